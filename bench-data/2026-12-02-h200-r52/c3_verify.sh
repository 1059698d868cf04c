#!/bin/bash
# Call 3: main with wip/attn-prologue cherry-picked (ead3fb0; build-r54 = build-dev by mkcarry.sh plus
# examples/decode, tests/golden/hz_logits, test_golden_gpu). The full test_model_gpu, the GPU golden fixtures,
# --attention-check, the full-size OLMoE-1B-7B shape against transformers, then the OLMoE c64 contract point.
# Carry build-r54 and .devcarry/lib.
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
HZ_EXECUTORS=grouped timeout 250 bash scripts/gpu-fullsize $N olmoe olmoe-1b-7b "64" > $OUT/fullsize_olmoe.txt 2>&1
echo "gpu-fullsize olmoe rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^RESULT|tokens|rel|PASS|FAIL" $OUT/fullsize_olmoe.txt | cut -c1-240 | tail -6
left=$(( 560 - ($(date +%s) - T0) ))
if [ $left -gt 110 ]; then
  timeout $left scripts/bench --build $N --work /tmp/hzw --models olmoe --executors grouped --residencies 64 --blocks 1 \
    --steps models,ceilings,sweep,table,report --out $OUT/olmoe > $OUT/bench_olmoe.txt 2>&1
  echo "scripts/bench olmoe rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c64/" $OUT/olmoe/benchmarks-section.md | head -1 | cut -c1-180
  tar -czf $OUT/olmoe.tgz -C $OUT olmoe bench_olmoe.txt && rm -rf $OUT/olmoe $OUT/bench_olmoe.txt
else
  echo "contract skipped: $left s left"
fi
cd $OUT && tar -czf checks.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
