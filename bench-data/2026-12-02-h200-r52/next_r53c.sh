#!/bin/bash
# Prepared for the next session, not run: wip/screen-bulk (screen_bulk.patch, build-r55/sb). The lm_head
# screen's INT8 pass on the integer path takes its codes by bulk copies, four stages of eight rows (16 KB
# at 2,048 values) in flight per block, two blocks per SM (HZ_GPU_SCREEN_BULK_BLOCKS=3: three), the first
# stages asked for before the wait; HZ_GPU_SCREEN_BULK=0 runs the register path in the same binary. Same
# sums and bounds, so the same bits: the step's tokens must stay main's. Carry build-r55, .devcarry/lib;
# about 5 min.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); S=build-r55/sb
nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader
for v in 1 0; do
  HZ_GPU_SCREEN_BULK=$v timeout 120 $S/test_decode_screen > $OUT/screen_test_$v.txt 2>&1
  echo "test_decode_screen (bulk=$v) rc $?: $(tail -1 $OUT/screen_test_$v.txt)"; grep -E "FAIL" $OUT/screen_test_$v.txt | head -3
done
HZ_GPU_SCREEN_BULK_BLOCKS=3 timeout 120 $S/test_decode_screen > $OUT/screen_test_b3.txt 2>&1; echo "test_decode_screen (3 blocks) rc $?: $(tail -1 $OUT/screen_test_b3.txt)"
# the same inputs on both paths: every shape's bounds must hash the same (the lines print them)
if diff <(grep -o 'rows .*bounds [0-9a-f]*' $OUT/screen_test_1.txt) <(grep -o 'rows .*bounds [0-9a-f]*' $OUT/screen_test_0.txt) > $OUT/screen_diff.txt &&
   diff <(grep -o 'rows .*bounds [0-9a-f]*' $OUT/screen_test_b3.txt) <(grep -o 'rows .*bounds [0-9a-f]*' $OUT/screen_test_0.txt) >> $OUT/screen_diff.txt; then
  echo "bounds bit-identical on both paths ($(grep -c 'bounds [0-9a-f]' $OUT/screen_test_0.txt) shapes)"
else echo "bounds DIFFER between the paths:"; head -6 $OUT/screen_diff.txt; fi
for t in memcheck racecheck synccheck initcheck; do
  timeout 150 compute-sanitizer --tool $t --error-exitcode 9 $S/test_decode_screen > $OUT/san_$t.txt 2>&1
  echo "$t test_decode_screen rc $?: $(grep -E 'SUMMARY' $OUT/san_$t.txt | head -1)"
done
echo "($(( $(date +%s) - T0 )) s)"
sc() { echo "== screen $1 [$2]"; env $2 timeout 60 $1/bench_model_ops --screen 200 2>&1 | grep -E "us|FAIL" | head -6; }
for r in 1 2; do sc build-r55/main HZ_X=; sc $S HZ_GPU_SCREEN_BULK=1; sc $S HZ_GPU_SCREEN_BULK_BLOCKS=3; sc $S HZ_GPU_SCREEN_BULK=0; done
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 60 $2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
for r in 1 2; do step "olmoe 64 64" build-r55/main HZ_X=; step "olmoe 64 64" $S HZ_X=; step "olmoe 64 64" $S HZ_GPU_SCREEN_BULK_BLOCKS=3; done
step "qwen 60 64" build-r55/main HZ_X=; step "qwen 60 64" $S HZ_X=
HZ_MODEL_GPU_QUICK=1 timeout 100 $S/test_model_gpu > $OUT/model_sb.txt 2>&1; echo "test_model_gpu (sb, quick) rc $?: $(tail -1 $OUT/model_sb.txt)"
cd $OUT && tar -czf r53c.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
# If the screen and the step gain: test_model_gpu full, hz-bench A/B on one artifact, then the contract.
