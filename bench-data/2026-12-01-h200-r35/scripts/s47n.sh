#!/usr/bin/env bash
# Call 17: the model test (every part) and the sessions-in-threads test after the review commit 77f92f5.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
s=$(date +%s); timeout 200 build-dev/tests/unit/model/test_model_gpu > $OUT/model_gpu.txt 2>&1; echo "model_gpu rc $? ($(( $(date +%s) - s )) s)"; tail -1 $OUT/model_gpu.txt
HZ_TEST_DEVICE=cuda:0 timeout 100 build-dev/tests/unit/model/test_model_sessions_threads > $OUT/threads.txt 2>&1; echo "threads rc $?"; tail -1 $OUT/threads.txt
