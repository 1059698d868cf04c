#!/bin/bash
# Call 1 of r49: the two-pass gate_up kernel in two waves (wip/gu-waves,
# HZ_W4A16_GU_WAVES=1; build-r48/gw release, build-r48/gwtl -Dtimeline=true, both of wip/gu-waves (c685ae5)
# on 65ab90e). The kernel tests with the knob, then the step alternating main / off / on
# (OLMoE three rounds; Qwen takes the fused kernel, not this one), then the timeline off and on.
# Carry build-r48 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r48
HZ_W4A16_GU_WAVES=1 HZ_GPU_TEST_TRIALS=2 timeout 150 $B/gw/test_gpu_w4a16 > $OUT/w4a16_on.txt 2>&1; echo "test_gpu_w4a16 on rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/w4a16_on.txt)"
HZ_W4A16_GU_WAVES=1 HZ_MODEL_GPU_QUICK=1 timeout 100 $B/gw/test_model_gpu > $OUT/model_on.txt 2>&1; echo "test_model_gpu on rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/model_on.txt)"
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3; }
for r in 1 2 3; do step "olmoe 64 64" main ""; step "olmoe 64 64" gw ""; step "olmoe 64 64" gw "HZ_W4A16_GU_WAVES=1"; done
for k in 0 1; do
  HZ_W4A16_GU_WAVES=$k HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/gwtl/bench_model_ops --step olmoe 64 64 > $OUT/tl_$k.txt 2>&1; echo "timeline waves $k rc $?"
  grep -A40 'timeline over' $OUT/tl_$k.txt | grep -E 'gate_up|down|qkv GEMV|chain|median' | head -12
done
cd $OUT && tar -czf gu_waves.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
