#!/usr/bin/env bash
# Call 3: the clustered attention with its grid reordered (cluster size, heads, clusters): every head's
# first cluster is placed before any second one. test_model_gpu, then the step with
# HZ_GPU_ATTN_CLUSTER 0 / 8 / 4 / 2, and the timeline of 8 and 4.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E 'clusters of [1-9]|FAIL' $OUT/tmg.txt | cut -c1-150; tail -1 $OUT/tmg.txt; t
for c in 0 8 4 2 0 8 4; do
  echo "OLMoE HZ_GPU_ATTN_CLUSTER=$c"
  HZ_GPU_ATTN_CLUSTER=$c HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; t
for c in 0 8 4 0 8 4; do
  echo "Qwen HZ_GPU_ATTN_CLUSTER=$c"
  HZ_GPU_ATTN_CLUSTER=$c HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
done; t
for c in 8 4; do
  echo "== timeline OLMoE HZ_GPU_ATTN_CLUSTER=$c"
  HZ_GPU_ATTN_CLUSTER=$c HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_c$c.txt 2>&1
  grep -E "^    (qkv|router|attention|o GEMV|lm_head)|main-stream|graph\)" $OUT/tl_c$c.txt
done; t
date
