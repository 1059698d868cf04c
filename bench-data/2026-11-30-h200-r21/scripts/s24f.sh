#!/usr/bin/env bash
# Call 6 (r21, main d610367): compute-sanitizer memcheck / racecheck / initcheck on the kernel test
# (one trial per shape: it covers the changed two-pass kernels), then racecheck on test_model_gpu.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for tool in memcheck racecheck initcheck; do
  extra=(); [[ $tool == memcheck ]] && extra=(--leak-check full)
  HZ_GPU_TEST_NO_FAULTS=1 HZ_GPU_TEST_TRIALS=1 timeout 100 compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 86 \
    $B/cuda/test_gpu_w4a16 > $OUT/w4_$tool.txt 2>&1; echo "test_gpu_w4a16 $tool rc $?"; grep -m1 "ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/w4_$tool.txt; t
done
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/mg_racecheck.txt 2>&1
echo "test_model_gpu racecheck rc $?"; grep -m1 "RACECHECK SUMMARY" $OUT/mg_racecheck.txt; tail -2 $OUT/mg_racecheck.txt; t
date
