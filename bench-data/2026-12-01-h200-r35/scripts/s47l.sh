#!/usr/bin/env bash
# Call 15: test_model_gpu, every part (the new "late" one included), not quick, on this round's code.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
date
s=$(date +%s)
timeout 240 build-dev/tests/unit/model/test_model_gpu > $OUT/model_gpu_full.txt 2>&1
echo "model_gpu rc $? ($(( $(date +%s) - s )) s)"; grep -E "late|lease of another|FAIL|OK$" $OUT/model_gpu_full.txt | head; tail -1 $OUT/model_gpu_full.txt
date
