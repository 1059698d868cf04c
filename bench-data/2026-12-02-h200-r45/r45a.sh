#!/bin/bash
# Call 1: the one-pass attention releasing the o GEMV after its tiles (wip/attn-late-launch,
# HZ_GPU_ATTN_LATE=0/1) against main (b8f1149): OLMoE step alternating, Qwen step; timelines of main,
# the branch (LATE 0/1; marks inside the tiles) and the router-cluster probe (wip/router-probe: marks at
# inputs loaded, warp 0's rows done, cluster barrier passed). Carry build-r45 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r45
for r in 1 2; do
  for v in main late0 late1; do
    bin=$B/${v%[01]}/bench_model_ops; [ $v = main ] && bin=$B/main/bench_model_ops
    [ $v = late1 ] && export HZ_GPU_ATTN_LATE=1 || unset HZ_GPU_ATTN_LATE
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
  done
done
for v in main late1; do
  [ $v = late1 ] && export HZ_GPU_ATTN_LATE=1 || unset HZ_GPU_ATTN_LATE
  bin=$B/${v%[01]}/bench_model_ops
  echo "== step qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done
echo "steps done ($(( $(date +%s) - T0 )) s)"
for v in maintl latetl0 latetl1 rptl; do
  bin=$B/${v%[01]}/bench_model_ops
  [ $v = latetl1 ] && export HZ_GPU_ATTN_LATE=1 || unset HZ_GPU_ATTN_LATE
  HZ_BENCH_GRAPH_ONLY=1 timeout 150 $bin --step olmoe 64 64 > $OUT/tl_$v.txt 2>&1; echo "== timeline $v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -A30 -E '^ *role  ' $OUT/tl_$v.txt | grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain' | head -24
done
cd $OUT && tar -czf tl.tgz tl_*.txt && rm -f tl_*.txt
echo "done after $(( $(date +%s) - T0 )) s"
