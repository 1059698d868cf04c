#!/bin/bash
# Call 6: the decode GEMV asks L2 for its output lines (evict-last) before its wait (pf), against main:
# OLMoE step alternating; Qwen step; the timeline of pf. Carry build-r45 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r45
for r in 1 2; do
  for v in main pf; do
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
  done
done
for v in main pf; do
  echo "== step qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done
HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/pftl/bench_model_ops --step olmoe 64 64 > $OUT/tl_pf.txt 2>&1; echo "== timeline pf rc $? ($(( $(date +%s) - T0 )) s)"
grep -A30 -E '^ *role  ' $OUT/tl_pf.txt | grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain' | head -24
cd $OUT && tar -czf r45f.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
