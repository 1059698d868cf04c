#!/bin/bash
# Call 4: the q/k/v GEMV's x by bulk copy (wip/gemv-x-tma, build-r48/xt: HZ_GEMV_X_TMA=1; the norm
# weights copied before the wait, h after it, both into shared memory; unset = main's kernels). Tests with
# the knob, then the step alternating main / xt off / xt on (OLMoE three rounds), then the timeline build
# of the branch with the knob off and on. Carry build-r48 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r48
for t in test_model_gpu test_decode_gemv; do
  HZ_GEMV_X_TMA=1 HZ_MODEL_GPU_QUICK=1 timeout 100 $B/xt/$t > $OUT/${t}_xt.txt 2>&1; echo "$t xt on rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/${t}_xt.txt)"
done
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3; }
for r in 1 2 3; do
  step "olmoe 64 64" main ""; step "olmoe 64 64" xt ""; step "olmoe 64 64" xt "HZ_GEMV_X_TMA=1"
done
for k in 0 1; do
  HZ_GEMV_X_TMA=$k HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/xttl/bench_model_ops --step olmoe 64 64 > $OUT/tl_$k.txt 2>&1; echo "timeline x_tma $k rc $?"
  grep -A30 'timeline over' $OUT/tl_$k.txt | grep -E 'qkv GEMV|attention|o GEMV|router|gate_up|down|chain' | head -18
done
cd $OUT && tar -czf r48d.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
