#!/usr/bin/env bash
# Call 4 (temporary build): HZ_GPU_NW_EARLY (session): 1 the q/k/v GEMV, 2 lm_head, 4 the router GEMV
# copy their norm weights into shared memory before the wait; 256: the router cluster fences once
# (thread 0 after the barrier) before its ready flags instead of in every thread.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_GPU_NW_EARLY=3 timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/tmg_nw3.txt 2>&1; echo "test_model_gpu NW_EARLY=3 rc $?"; tail -1 $OUT/tmg_nw3.txt; t
echo "== olmoe, flags off, NW_EARLY=0,1,3,0,1,3"
HZ_GPU_ROUTE_READY=0 HZ_BENCH_SWEEP=HZ_GPU_NW_EARLY=0,1,3,0,1,3 timeout 150 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"; t
echo "== olmoe, NW_EARLY=0: ROUTE_READY=0,1"
HZ_GPU_NW_EARLY=0 HZ_BENCH_SWEEP=HZ_GPU_ROUTE_READY=0,1 timeout 90 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
echo "== olmoe, NW_EARLY=256 (one fence): ROUTE_READY=0,1"
HZ_GPU_NW_EARLY=256 HZ_BENCH_SWEEP=HZ_GPU_ROUTE_READY=0,1 timeout 90 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"; t
echo "== qwen NW_EARLY=0,1,3,4"
HZ_BENCH_SWEEP=HZ_GPU_NW_EARLY=0,1,3,4 timeout 150 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"; t
for v in 0 1; do
  echo "== timeline NW_EARLY=$v, flags off"
  HZ_GPU_ROUTE_READY=0 HZ_GPU_NW_EARLY=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_nw$v.txt 2>&1
  grep -E "^    (qkv|router|attention|o GEMV|lm_head)|main-stream|graph\)" $OUT/tl_nw$v.txt
done; t
date
