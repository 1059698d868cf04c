#!/bin/bash
# Call 3: evict-last L2 loads for the router cluster's rows (kr), for the norm weights with a
# prefetch before the GEMV's wait (kn), both (kb), against main: OLMoE step alternating, Qwen step.
# Carry build-r45 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r45
for r in 1 2; do
  for v in main kr kn kb; do
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
  done
done
for v in main kb; do
  echo "== step qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done
echo "done after $(( $(date +%s) - T0 )) s"
