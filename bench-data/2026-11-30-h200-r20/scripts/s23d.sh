#!/usr/bin/env bash
# Call 4: the attention's two staged chunks taken in one pass (working tree) against main (old/bench_head:
# call 1's build run with HZ_GPU_ATTN_CLUSTER=0, i.e. main's attention); test_model_gpu and golden first.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E 'long context|FAIL' $OUT/tmg.txt | cut -c1-170; tail -1 $OUT/tmg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -2 $OUT/golden.txt; t
for m in "olmoe 64 64" "qwen 60 64"; do for i in 1 2; do
  echo "== $m main";  HZ_GPU_ATTN_CLUSTER=0 HZ_BENCH_GRAPH_ONLY=1 timeout 100 .devcarry/old/bench_head --step $m 2>&1 | grep -E "graph\)|FAIL"
  echo "== $m new";  HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m 2>&1 | grep -E "graph\)|FAIL"
done; done; t
echo "== timeline OLMoE new"
HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_new.txt 2>&1
grep -E "^    (qkv|router|attention|o GEMV|lm_head)|main-stream|graph\)" $OUT/tl_new.txt; t
date
