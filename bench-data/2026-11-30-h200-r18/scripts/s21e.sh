#!/usr/bin/env bash
# Call 5 (experiments on 2nd commit): HZ_GPU_ROUTE_WARM (process: the cluster leader dry-runs the routing
# before its wait) x HZ_GPU_O_EARLY (session: the o GEMV releases its dependents before its wait).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
HZ_GPU_ROUTE_WARM=1 HZ_GPU_O_EARLY=1 timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu (warm, o early) rc $?"; tail -1 $OUT/chk/tmg.txt
HZ_GPU_ROUTE_WARM=1 timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/rc.txt 2>&1; echo "test_router_cluster (warm) rc $?"; tail -1 $OUT/chk/rc.txt; t
for i in 1 2; do for w in 0 1; do
  echo "== HZ_GPU_ROUTE_WARM=$w"
  HZ_GPU_ROUTE_WARM=$w HZ_BENCH_GRAPH_ONLY=1 HZ_BENCH_SWEEP=HZ_GPU_O_EARLY=0,1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL|HZ_GPU"
done; done; t
for c in "1 0" "0 1"; do set -- $c
  echo "== timeline HZ_GPU_ROUTE_WARM=$1 HZ_GPU_O_EARLY=$2"
  HZ_GPU_ROUTE_WARM=$1 HZ_GPU_O_EARLY=$2 HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/chk/tl_$1$2.txt 2>&1; echo "rc $?"
  sed -n '/means per launch/,/main-stream/p' $OUT/chk/tl_$1$2.txt
done; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
