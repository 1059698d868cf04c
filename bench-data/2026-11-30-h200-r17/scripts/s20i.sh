#!/usr/bin/env bash
# Call 9 (main): compute-sanitizer racecheck of the decode model test (quick mode; OLMoE now on the
# two-pass kernels with the gate_up kernel under PDL) and of the W4A16 kernel test (one trial).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
HZ_GPU_TEST_NO_FAULTS=1 HZ_GPU_TEST_TRIALS=1 timeout 200 compute-sanitizer --tool racecheck --error-exitcode 86 $B/cuda/test_gpu_w4a16 > $OUT/race_w4.txt 2>&1; echo "racecheck test_gpu_w4a16 rc $?"; tail -2 $OUT/race_w4.txt; t
HZ_MODEL_GPU_QUICK=1 timeout 330 compute-sanitizer --tool racecheck --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/race_model.txt 2>&1; echo "racecheck test_model_gpu rc $?"; tail -2 $OUT/race_model.txt; t
