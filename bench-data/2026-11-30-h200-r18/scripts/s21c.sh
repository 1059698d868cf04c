#!/usr/bin/env bash
# Call 3 (7852906 + the cluster's route by one warp, HZ_GPU_ROUTE_WARP, process-level): test, step A/B, timeline.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
HZ_GPU_ROUTE_WARP=1 timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/rc.txt 2>&1; echo "test_router_cluster (warp) rc $?"; tail -1 $OUT/chk/rc.txt
HZ_GPU_ROUTE_WARP=1 timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu (warp) rc $?"; tail -1 $OUT/chk/tmg.txt; t
for i in 1 2; do for v in 0 1; do
  echo "== HZ_GPU_ROUTE_WARP=$v"
  HZ_GPU_ROUTE_WARP=$v HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; done; t
for v in 0 1; do
  echo "== timeline HZ_GPU_ROUTE_WARP=$v"
  HZ_GPU_ROUTE_WARP=$v HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/chk/tl_$v.txt 2>&1; echo "rc $?"
  grep -E "router GEMV|route " $OUT/chk/tl_$v.txt | head -3
done; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
