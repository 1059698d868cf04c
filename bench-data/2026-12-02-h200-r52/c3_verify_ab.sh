#!/bin/bash
# Call 3: main with wip/attn-prologue cherry-picked (ead3fb0; build-r54 = build-dev by mkcarry.sh plus
# examples/decode, tests/golden/hz_logits, test_golden_gpu): the full test_model_gpu, the GPU golden
# fixtures, --attention-check; wip/attn-merge4 (attn_merge4.patch, build-r54/m4: the one-pass attention's
# merge of the 16 warps' partials by all 512 threads, 4 per value at head_dim 128, then a butterfly)
# against it; then the OLMoE c64 and Qwen c60 contract points on build-r54. Carry build-r54, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); N=build-r54
nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader
timeout 150 $N/test_model_gpu > $OUT/model_full.txt 2>&1; echo "test_model_gpu (full) rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/model_full.txt)"
grep -E "FAIL|long context" $OUT/model_full.txt | head -4 | cut -c1-200
timeout 60 $N/bench_model_ops --attention-check > $OUT/check.txt 2>&1; echo "attention-check rc $?: $(grep -c ' ok$' $OUT/check.txt) ok"
mkdir -p /tmp/gb && cp -r $N/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 60 $N/test_golden_gpu $N/tools/hz-mkmodel \
  $N/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -2
timeout 60 $N/m4/bench_model_ops --attention-check > $OUT/check_m4.txt 2>&1; echo "attention-check (m4) rc $?: $(grep -c ' ok$' $OUT/check_m4.txt) ok"
HZ_MODEL_GPU_QUICK=1 timeout 100 $N/m4/test_model_gpu > $OUT/model_m4.txt 2>&1; echo "test_model_gpu (m4, quick) rc $?: $(tail -1 $OUT/model_m4.txt)"
step() { echo "== step $1 $2"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 $2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
for r in 1 2; do step "olmoe 64 64" $N; step "olmoe 64 64" $N/m4; done
echo "($(( $(date +%s) - T0 )) s)"
timeout 130 scripts/bench --build $N --work /tmp/hzw --models olmoe --executors grouped --residencies 64 --blocks 1 \
  --steps models,ceilings,sweep,table,report --out $OUT/olmoe > $OUT/bench_olmoe.txt 2>&1
echo "scripts/bench olmoe rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c64/" $OUT/olmoe/benchmarks-section.md | head -1 | cut -c1-180
tar -czf $OUT/olmoe.tgz -C $OUT olmoe bench_olmoe.txt && rm -rf $OUT/olmoe $OUT/bench_olmoe.txt
left=$(( ${HZ_CALL_CAP:-500} - ($(date +%s) - T0) )) # the session's device time left bounds the call
[ $left -lt 150 ] && { echo "qwen contract skipped: $left s left"; left=1; }
timeout $left scripts/bench --build $N --work /tmp/hzw --models qwen --executors grouped --residencies 60 --blocks 1 \
  --steps models,ceilings,sweep,table,report --out $OUT/qwen > $OUT/bench_qwen.txt 2>&1
echo "scripts/bench qwen rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c60/" $OUT/qwen/benchmarks-section.md | head -1 | cut -c1-180
tar -czf $OUT/qwen.tgz -C $OUT qwen bench_qwen.txt && rm -rf $OUT/qwen $OUT/bench_qwen.txt
cd $OUT && tar -czf checks.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
