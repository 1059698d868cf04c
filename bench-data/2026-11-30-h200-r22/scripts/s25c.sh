#!/usr/bin/env bash
# Call 3 (r22): main + HZ_MODEL_GPU_PARTS. compute-sanitizer racecheck of test_model_gpu (quick mode) in
# two pieces run side by side (the long-context checks; the rest), and beside them the GPU tests of
# the current code (one GPU; correctness only, nothing timed).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; compute-sanitizer --version | tail -1
( HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long timeout 540 compute-sanitizer --tool racecheck --error-exitcode 86 \
    $B/tests/unit/model/test_model_gpu > $OUT/racecheck_long.txt 2>&1; echo "racecheck long rc $? at $(( $(date +%s) - T0 )) s" ) &
( HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run,modes,queued timeout 540 compute-sanitizer --tool racecheck --error-exitcode 86 \
    $B/tests/unit/model/test_model_gpu > $OUT/racecheck_run.txt 2>&1; echo "racecheck run,modes,queued rc $? at $(( $(date +%s) - T0 )) s" ) &
HZ_GPU_TEST_NO_FAULTS=1 timeout 120 $B/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/w4.txt
timeout 200 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
timeout 200 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 150 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
t
wait
tail -3 $OUT/racecheck_long.txt $OUT/racecheck_run.txt
date
