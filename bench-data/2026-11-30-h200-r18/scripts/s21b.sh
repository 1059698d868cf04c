#!/usr/bin/env bash
# Call 2 (router GEMV + route as one cluster, uncommitted work tree): the new kernel test, the decode
# tests, OLMoE step with HZ_GPU_ROUTE_CLUSTER 1/0 alternating, Qwen unchanged, timeline of both.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/rc.txt 2>&1; echo "test_router_cluster rc $?"; cat $OUT/chk/rc.txt | tail -12
timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "FAIL|cluster|OK" $OUT/chk/tmg.txt | head -12; t
HZ_BENCH_GRAPH_ONLY=1 HZ_BENCH_SWEEP=HZ_GPU_ROUTE_CLUSTER=1,0,1,0 timeout 150 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL|sweep|HZ_GPU"; t
HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"; t
for v in 1 0; do
  echo "== timeline HZ_GPU_ROUTE_CLUSTER=$v"
  HZ_GPU_ROUTE_CLUSTER=$v HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/chk/tl_$v.txt 2>&1; echo "rc $?"
  sed -n '/means per launch/,/tokens/p' $OUT/chk/tl_$v.txt
done; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
