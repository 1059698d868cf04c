#!/usr/bin/env bash
# Session 27 call 2: the step's fixed part. OLMoE step at 16/8/4/2 layers (build-dev, graph only), then
# the timeline build (build-x = build-tl's bench) with the step's head printed.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date
for L in 16 8 4 2 1 16 8 4 2 1; do
  echo "== layers $L"; HZ_BENCH_LAYERS=$L HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-dev/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done
echo "== timeline"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-x/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl.txt 2>&1; echo "rc $?"; cat $OUT/tl.txt
echo "== timeline 4 layers"; HZ_BENCH_LAYERS=4 HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-x/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'launch|span|graph'
date
