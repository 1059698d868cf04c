#!/usr/bin/env bash
# Call 2 (working tree on af29d9d): the two-pass expert kernels start on the router cluster's ready
# flags; route_block with four barriers. GPU tests, then the step A/B against main's binary
# (.devcarry/old/bench_head) and HZ_GPU_ROUTE_READY=1,0 in one process, then the timeline.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/chk/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/chk/w4.txt
timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "FAIL|fail" $OUT/chk/tmg.txt | head -5; tail -1 $OUT/chk/tmg.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/trc.txt 2>&1; echo "test_router_cluster rc $?"; grep -E "FAIL" $OUT/chk/trc.txt | head -5; tail -1 $OUT/chk/trc.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/chk/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/chk/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/chk/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/chk/golden.txt; t
for i in 1 2; do
  echo "== head"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 .devcarry/old/bench_head --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
  echo "== new, ROUTE_READY=1,0"; HZ_BENCH_SWEEP=HZ_GPU_ROUTE_READY=1,0 timeout 90 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph|FAIL"
done; t
echo "== qwen head / new"
HZ_BENCH_GRAPH_ONLY=1 timeout 60 .devcarry/old/bench_head --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"; t
HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl.txt 2>&1
grep -E "^    (qkv|router|attention|o GEMV|lm_head)|main-stream|graph\)" $OUT/tl.txt; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
