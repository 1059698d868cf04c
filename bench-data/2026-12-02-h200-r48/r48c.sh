#!/bin/bash
# Call 3: the decode GEMV asking L2 for each warp's next rows (wip/gemv-l2-ahead, build-r48/l2:
# HZ_GEMV_L2_AHEAD=N rows after the wait, HZ_GEMV_L2_EARLY=1 before it; unset = main's behaviour with the
# changed code). test_decode_gemv with the knob, then the step alternating main / l2 off / ahead 1 /
# ahead 1 early / ahead 2 (OLMoE two rounds; Qwen once with ahead 1 and 4), then the timeline build of
# the branch with the knob off and on. Carry build-r48 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r48
HZ_GEMV_L2_AHEAD=1 timeout 100 $B/l2/test_decode_gemv > $OUT/gemv_a1.txt 2>&1; echo "test_decode_gemv ahead 1 rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/gemv_a1.txt)"
HZ_GEMV_L2_AHEAD=2 HZ_MODEL_GPU_QUICK=1 timeout 100 $B/l2/test_model_gpu > $OUT/model_a2.txt 2>&1; echo "test_model_gpu ahead 2 rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/model_a2.txt)"
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3; }
for r in 1 2; do
  step "olmoe 64 64" main ""; step "olmoe 64 64" l2 ""; step "olmoe 64 64" l2 "HZ_GEMV_L2_AHEAD=1"
  step "olmoe 64 64" l2 "HZ_GEMV_L2_AHEAD=1 HZ_GEMV_L2_EARLY=1"; step "olmoe 64 64" l2 "HZ_GEMV_L2_AHEAD=2"
done
step "qwen 60 64" main ""; step "qwen 60 64" l2 "HZ_GEMV_L2_AHEAD=1"; step "qwen 60 64" l2 "HZ_GEMV_L2_AHEAD=4"
for k in 0 1; do
  HZ_GEMV_L2_AHEAD=$k HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/l2tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_$k.txt 2>&1; echo "timeline ahead $k rc $?"
  grep -A30 'timeline over' $OUT/tl_$k.txt | grep -E 'qkv GEMV|attention|o GEMV|router|gate_up|down|chain' | head -16
done
cd $OUT && tar -czf r48c.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
