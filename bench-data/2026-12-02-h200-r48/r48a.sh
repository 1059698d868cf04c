#!/bin/bash
# Call 1: the two prepared branches on main (3b58587). oe = wip/o-early2 (the o GEMV releases the router
# cluster as its blocks start; HZ_GPU_O_EARLY=0 off), ss = wip/screen-split2 (the screen's INT8 dp2a chain
# in two). Tests of each, the screen alone (main / ss), then the step alternating main, oe, oe with the
# knob off, ss (OLMoE two rounds, Qwen once). Carry build-r48 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r48
run_test() { HZ_MODEL_GPU_QUICK=1 timeout 150 $B/$1/$2 > $OUT/${2}_$1.txt 2>&1; echo "$1 $2 rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/${2}_$1.txt)"; grep -iE 'FAIL' $OUT/${2}_$1.txt | head -3; }
for t in test_model_gpu test_router_cluster test_decode_gemv; do run_test oe $t; done
for t in test_decode_screen test_model_gpu; do run_test ss $t; done
for r in 1 2; do for v in main ss; do
  echo "== screen $v"; timeout 60 $B/$v/bench_model_ops --screen 200 2>&1 | grep -E 'argmax GEMV|FAIL|--screen' | head -6
done; done
for r in 1 2; do for v in main oe oe0 ss; do
  b=$v; env=""; [ $v = oe0 ] && { b=oe; env="HZ_GPU_O_EARLY=0"; }
  echo "== step olmoe $v"; env $env HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$b/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done; done
for v in main oe ss; do
  echo "== step qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done
cd $OUT && tar -czf r48a.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
