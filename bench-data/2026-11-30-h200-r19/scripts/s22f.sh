#!/usr/bin/env bash
# Call 6 (temporary build): HZ_GPU_KV_HINT=1 (session): the q/k/v GEMV hints the layer's cached K/V
# rows 0..pos-1 into L2 before its wait; attention timeline marks: q/k/v read, first chunk in, chunks done.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_GPU_KV_HINT=1 timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/tmg_kv1.txt 2>&1; echo "test_model_gpu KV_HINT=1 rc $?"; tail -1 $OUT/tmg_kv1.txt; t
echo "== olmoe KV_HINT=0,1,0,1"
HZ_BENCH_SWEEP=HZ_GPU_KV_HINT=0,1,0,1 timeout 120 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"; t
echo "== qwen KV_HINT=0,1"
HZ_BENCH_SWEEP=HZ_GPU_KV_HINT=0,1 timeout 120 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"; t
for v in 0 1; do
  echo "== timeline KV_HINT=$v"
  HZ_GPU_KV_HINT=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_kv$v.txt 2>&1
  grep -E "^    (qkv|router|attention|o GEMV|lm_head)|main-stream|graph\)" $OUT/tl_kv$v.txt
done; t
date
