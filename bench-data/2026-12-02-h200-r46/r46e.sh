#!/bin/bash
# Call 5: main as the round closes (585cc2e): OLMoE step with the hand-over on and off
# (HZ_GPU_RES_IN_DOWN=0), two rounds; Qwen step (its path unchanged); the kernel timeline of the
# -Dtimeline=true build. Carry build-r46 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r46
for r in 1 2; do for v in on off; do
  [ $v = off ] && export HZ_GPU_RES_IN_DOWN=0 || unset HZ_GPU_RES_IN_DOWN
  echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/rel/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done; done
unset HZ_GPU_RES_IN_DOWN
echo "== step qwen"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/rel/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_main.txt 2>&1; echo "== timeline rc $? ($(( $(date +%s) - T0 )) s)"
grep -A30 -E '^ *role  ' $OUT/tl_main.txt | grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain' | head -24
cd $OUT && tar -czf r46e.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
