#!/usr/bin/env bash
# Call 5 (main 2438732 + attention timeline marks): route_block with four barriers against main's
# af29d9d binary, alternating; then the timeline with the attention kernel's three marks.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for i in 1 2; do
  echo "== head"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 .devcarry/old/bench_head --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
  echo "== new";  HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; t
for i in 1 2; do
  echo "== qwen head"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 .devcarry/old/bench_head --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
  echo "== qwen new";  HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
done; t
for m in "olmoe 64" "qwen 60"; do
  HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-tl/tests/unit/model/bench_model_ops --step $m 64 > $OUT/tl_${m% *}.txt 2>&1
  grep -E "^    (qkv|router|attention|o GEMV|lm_head|experts|route|shared)|main-stream|graph\)" $OUT/tl_${m% *}.txt
done; t
date
