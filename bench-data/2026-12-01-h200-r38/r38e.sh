#!/usr/bin/env bash
# Call 5 (carry build-dev = 1cb66fd, .devcarry): every GPU test of the model path on the committed code,
# and compute-sanitizer memcheck (leak check) and racecheck on the screen's kernel test and on
# test_model_gpu's screen part (quick mode).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 100 $B/tests/unit/model/test_decode_screen > $OUT/ds.txt 2>&1; rc=$?; echo "test_decode_screen rc $rc"; tail -1 $OUT/ds.txt
timeout 200 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; rc=$?; echo "test_model_gpu rc $rc"; grep -E "screen|long context|FAIL" $OUT/mg.txt | head -12; tail -1 $OUT/mg.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; rc=$?; echo "test_prefill_gpu rc $rc"; tail -1 $OUT/pf.txt
timeout 60 $B/tests/unit/model/test_decode_args > $OUT/da.txt 2>&1; rc=$?; echo "test_decode_args rc $rc"; tail -1 $OUT/da.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; rc=$?; echo "test_router_cluster rc $rc"; tail -1 $OUT/rc.txt
HZ_BUILD_ROOT=$PWD/$B HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 200 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; rc=$?; echo "test_golden_gpu rc $rc"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
t
for tool in memcheck racecheck; do
  extra=(); [[ $tool == memcheck ]] && extra=(--leak-check full)
  HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=screen timeout 150 compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/san_mg_$tool.txt 2>&1; rc=$?
  echo "sanitizer $tool test_model_gpu(screen) rc $rc"; grep -E "ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY|Hazard" $OUT/san_mg_$tool.txt | head -4
  t
done
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 86 $B/tests/unit/model/test_decode_screen > $OUT/san_ds_racecheck.txt 2>&1; rc=$?
echo "sanitizer racecheck test_decode_screen rc $rc"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|Hazard|^OK|FAIL" $OUT/san_ds_racecheck.txt | head -4
t
date
