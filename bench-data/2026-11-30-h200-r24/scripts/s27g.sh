#!/usr/bin/env bash
# Call 7 (r24): compute-sanitizer racecheck of test_model_gpu's run part (the gates passing on the device's
# table included) and memcheck of the sessions-in-threads test on cuda:0.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
echo "== memcheck sessions_threads cuda:0"
HZ_TEST_DEVICE=cuda:0 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 86 $B/tests/unit/model/test_model_sessions_threads > $OUT/threads_memcheck.txt 2>&1
echo "rc $?"; grep -E "PASSED|FAILED|ERROR SUMMARY" $OUT/threads_memcheck.txt | head; t
echo "== racecheck test_model_gpu (quick, run part)"
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 400 compute-sanitizer --tool racecheck --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $OUT/racecheck.txt 2>&1; echo "racecheck rc $?"; grep -E "hits on the device|FAIL|OK" $OUT/racecheck.txt | cut -c1-200 | head -6; tail -2 $OUT/racecheck.txt; t
date
