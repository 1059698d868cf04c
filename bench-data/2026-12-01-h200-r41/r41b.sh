#!/bin/bash
# The kernel timeline (builds configured with -Dtimeline=true) of main (3a2b7b1) and of the routing change,
# OLMoE layer shapes, twice each, alternating. Carry build-bench (bench_model_ops_tl_base),
# build-bench-new (bench_model_ops_tl) and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s)
for r in 1 2; do
  for b in build-bench/bench_model_ops_tl_base build-bench-new/bench_model_ops_tl; do
    echo "== $b round $r"
    HZ_BENCH_GRAPH_ONLY=1 timeout 100 $b --step olmoe 64 64 > $OUT/tl_$(basename $b)_$r.txt 2>&1
    sed -n '/timeline over/,$p' $OUT/tl_$(basename $b)_$r.txt | head -40
  done
done
echo "done after $(( $(date +%s) - T0 )) s"
