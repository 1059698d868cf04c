#!/usr/bin/env bash
# Call 4 (route_rank_split: each expert's rank counted by 2-8 threads): tests, step A/B against the
# previous build (.devcarry/old/bench_model_ops_warpknob = 7852906 + warp knob, knob off), timeline.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -3 $OUT/chk/rc.txt
timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/chk/tmg.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/chk/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/chk/tpg.txt; t
for i in 1 2; do
  echo "== previous (block rank)"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 .devcarry/old/bench_model_ops_warpknob --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
  echo "== split rank"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; t
echo "== qwen split rank"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/chk/tl.txt 2>&1; echo "timeline rc $?"
sed -n '/means per launch/,/tokens/p' $OUT/chk/tl.txt; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
