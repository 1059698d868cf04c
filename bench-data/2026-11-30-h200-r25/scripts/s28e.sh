#!/usr/bin/env bash
# Call 5 (r25): racecheck of test_model_gpu's run part (quick) on 43ac5b5 (the gate in the router).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev; date
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 300 compute-sanitizer --tool racecheck --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $OUT/racecheck.txt 2>&1; echo "racecheck rc $?"; grep -E "FAIL|model_gpu:" $OUT/racecheck.txt | cut -c1-200 | head -6; tail -1 $OUT/racecheck.txt
date
