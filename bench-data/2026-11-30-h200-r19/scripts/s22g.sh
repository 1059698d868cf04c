#!/usr/bin/env bash
# Call 7 (main fae3866, the final code): GPU tests, golden, compute-sanitizer on the router cluster
# test (memcheck with leak check, racecheck) and on test_model_gpu (memcheck, quick), then the steps.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/chk/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/chk/w4.txt
timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/chk/tmg.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/trc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/chk/trc.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/chk/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/chk/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/chk/golden.txt 2>&1; echo "golden rc $?"; grep -E "vs dequant|vs fp16|OK|FAIL" $OUT/chk/golden.txt | head -6; t
timeout 100 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 $B/tests/unit/model/test_router_cluster > $OUT/chk/mc_trc.txt 2>&1; echo "memcheck router_cluster rc $?"; tail -2 $OUT/chk/mc_trc.txt
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 86 $B/tests/unit/model/test_router_cluster > $OUT/chk/rc_trc.txt 2>&1; echo "racecheck router_cluster rc $?"; tail -2 $OUT/chk/rc_trc.txt; t
HZ_MODEL_GPU_QUICK=1 timeout 140 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/chk/mc_tmg.txt 2>&1; echo "memcheck model_gpu rc $?"; tail -2 $OUT/chk/mc_tmg.txt; t
for m in "olmoe 64" "qwen 60"; do
  HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step $m 64 2>&1 | grep -E "graph\)|FAIL"
done; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
