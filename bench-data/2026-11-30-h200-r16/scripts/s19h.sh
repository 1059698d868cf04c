#!/usr/bin/env bash
# Call 13 (main): the two-pass lead again, OLMoE step, three alternations.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for i in 1 2 3; do
  for p in default twopass; do
    echo "== olmoe $p $i"; HZ_W4A16_PATH=$p HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
  done
done
