#!/bin/bash
# Call 4: the one-pass decode attention's tiles on the tensor cores (wip/attn-mma, HZ_GPU_ATTN_MMA=1):
# attention alone against FP64 (bench_model_ops 100), test_model_gpu with the knob, the step against
# main, the timeline. build-r50/mma release, build-r50/mmatl timeline; main = build-r49/main.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s)
for v in 0 1; do
  HZ_GPU_ATTN_MMA=$v timeout 120 build-r50/mma/bench_model_ops 100 > $OUT/ops_mma$v.txt 2>&1; echo "== bench_model_ops 100 mma=$v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -E "^attention|groups 2 " $OUT/ops_mma$v.txt | head -24
done
HZ_GPU_ATTN_MMA=1 timeout 200 build-r50/mma/test_model_gpu > $OUT/model_mma1.txt 2>&1; echo "test_model_gpu mma=1 rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/model_mma1.txt)"
grep -E "long context|max rel|FAIL" $OUT/model_mma1.txt | head -12
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 60 $2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
for r in 1 2; do
  step "olmoe 64 64" build-r49/main ""
  step "olmoe 64 64" build-r50/mma "HZ_GPU_ATTN_MMA=0"
  step "olmoe 64 64" build-r50/mma "HZ_GPU_ATTN_MMA=1"
done
step "qwen 60 64" build-r49/main ""
step "qwen 60 64" build-r50/mma "HZ_GPU_ATTN_MMA=1"
for v in 0 1; do
  HZ_GPU_ATTN_MMA=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-r50/mmatl/bench_model_ops --step olmoe 64 64 > $OUT/tl_mma$v.txt 2>&1; echo "== timeline mma=$v rc $?"
  grep -A8 'timeline over' $OUT/tl_mma$v.txt | grep -E '^    (qkv GEMV|attention|o GEMV|router|gate_up|down) |chain' | head -8
done
cd $OUT && tar -czf mma.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
