#!/usr/bin/env bash
# Call 2: the kernel timeline (build-tl, -Dtimeline=true) of OLMoE's step with the attention plain
# (HZ_GPU_ATTN_CLUSTER=0) and clustered (8, 4): where the clustered attention loses.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for c in 0 8 4; do
  echo "== timeline OLMoE HZ_GPU_ATTN_CLUSTER=$c"
  HZ_GPU_ATTN_CLUSTER=$c HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_c$c.txt 2>&1
  grep -E "^    (qkv|router|attention|o GEMV|lm_head)|main-stream|graph\)" $OUT/tl_c$c.txt
done; t
date
