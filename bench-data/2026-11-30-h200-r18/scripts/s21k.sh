#!/usr/bin/env bash
# Call 11 (branch wip/cluster-trigger): HZ_GPU_ROUTE_TRIGGER (process): where the router cluster
# releases the expert kernels (0 after its wait = main, 1 block 0 before routing, 2 at exit).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for v in 1 2; do HZ_GPU_ROUTE_TRIGGER=$v timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg_$v.txt 2>&1; echo "test_model_gpu trigger $v rc $?"; tail -1 $OUT/tmg_$v.txt; done; t
for i in 1 2; do for v in 0 1 2; do
  echo "== trigger $v"; HZ_GPU_ROUTE_TRIGGER=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; done; t
for v in 1 2; do
  echo "== timeline trigger $v"; HZ_GPU_ROUTE_TRIGGER=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_$v.txt 2>&1
  grep -E "^    (qkv|router|attention|o GEMV)|main-stream" $OUT/tl_$v.txt | head -5
done; t
date
