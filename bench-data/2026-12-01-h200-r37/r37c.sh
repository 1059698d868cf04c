#!/usr/bin/env bash
# r37 call 7: the GPU tests on the session's final library code (init macros, session order, JSON).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
s=$(date +%s); timeout 200 build-dev/tests/unit/model/test_model_gpu > $OUT/model_gpu.txt 2>&1; echo "model_gpu rc $? ($(( $(date +%s) - s )) s)"; tail -2 $OUT/model_gpu.txt
HZ_TEST_DEVICE=cuda:0 timeout 100 build-dev/tests/unit/model/test_model_sessions_threads > $OUT/threads.txt 2>&1; echo "threads rc $?"; tail -1 $OUT/threads.txt
for t in build-dev/tests/golden/test_golden_gpu build-dev/tests/unit/model/test_prefill_gpu; do
  timeout 100 $t > $OUT/$(basename $t).txt 2>&1; echo "$(basename $t) rc $?"; tail -1 $OUT/$(basename $t).txt; done
