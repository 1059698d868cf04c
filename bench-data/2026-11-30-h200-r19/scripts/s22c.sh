#!/usr/bin/env bash
# Call 3 (temporary build: HZ_W4A16_POLL = bit 0 relaxed polling + one fence, >> 1 nanosleep ns):
# how the expert kernels poll the router's ready flags. OLMoE: HZ_GPU_ROUTE_READY=1,0 in one process
# per poll setting; Qwen (fused kernel, always on flags) per poll setting.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
(cuobjdump -sass .devcarry/acq.cubin 2>&1 || /usr/local/cuda/bin/cuobjdump -sass .devcarry/acq.cubin 2>&1) | grep -E "Function|LD|CCTL|MEMBAR|FENCE|ERRBAR" | head -20
HZ_W4A16_POLL=1 timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/tmg_poll1.txt 2>&1; echo "test_model_gpu POLL=1 rc $?"; tail -1 $OUT/tmg_poll1.txt; t
echo "== head"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 .devcarry/old/bench_head --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
for pv in 0 1 513 2001 512; do
  echo "== POLL=$pv, ROUTE_READY=1,0"; HZ_W4A16_POLL=$pv HZ_BENCH_SWEEP=HZ_GPU_ROUTE_READY=1,0 timeout 90 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; t
for pv in 0 1 513; do
  echo "== qwen POLL=$pv"; HZ_W4A16_POLL=$pv HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
done; t
date
