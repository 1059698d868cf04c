#!/bin/bash
# Call 5 of r49: the timeline (-Dtimeline=true builds) of main's device code (build-r49/maintl: wip/gu-waves
# with its knob unset) and of wip/l2-predict with HZ_GPU_L2_PREDICT unset, 16 (prediction only), 17 (gate/up
# bytes pulled) and 19 (all bytes pulled), joined at the step's end. Carry build-r49 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r49
tl() {
  env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$1/bench_model_ops --step olmoe 64 64 > $OUT/tl_$2.txt 2>&1; echo "== timeline $2 [$3] rc $?"
  grep -E 'graph \+ pdl  \(' $OUT/tl_$2.txt | head -1
  grep -A40 'timeline over' $OUT/tl_$2.txt | grep -E '^    (qkv GEMV|attention|o GEMV|router|gate_up|down) |chain' | head -8
}
tl maintl main ""
tl predtl off ""
tl predtl p16 "HZ_GPU_L2_PREDICT=16"
tl predtl p17 "HZ_GPU_L2_PREDICT=17"
tl predtl p19 "HZ_GPU_L2_PREDICT=19"
cd $OUT && tar -czf tl.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
