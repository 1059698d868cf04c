#!/bin/bash
# Call 5: wip/attn-mma with the tensor-core tiles as the default (build-r50/new, release, mkcarry.sh plus
# examples/decode, tests/golden/hz_logits, test_golden_gpu): the GPU golden fixtures, compute-sanitizer
# memcheck and racecheck on test_model_gpu's long part (quick), the full-size OLMoE-1B-7B shape against
# transformers, then the OLMoE c64 contract point if time is left.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); N=build-r50/new
mkdir -p /tmp/gb && cp -r $N/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 60 $N/test_golden_gpu $N/tools/hz-mkmodel \
  $N/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -3
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long timeout 110 compute-sanitizer --tool $tool $extra --error-exitcode 9 $N/test_model_gpu > $OUT/${tool}_model.txt 2>&1
  echo "$tool test_model_gpu (long, quick) rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "SUMMARY|model_gpu" $OUT/${tool}_model.txt | tail -2
done
HZ_EXECUTORS=grouped timeout 250 bash scripts/gpu-fullsize $N olmoe olmoe-1b-7b "64" > $OUT/fullsize_olmoe.txt 2>&1
echo "gpu-fullsize olmoe rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^RESULT|tokens|rel|PASS|FAIL" $OUT/fullsize_olmoe.txt | cut -c1-240 | tail -8
left=$(( 540 - ($(date +%s) - T0) ))
if [ $left -gt 120 ]; then
  timeout $left scripts/bench --build $N --work /tmp/hzw --models olmoe --executors grouped --residencies 64 --blocks 1 \
    --steps models,ceilings,sweep,table,report --out $OUT/olmoe > $OUT/bench_olmoe.txt 2>&1
  echo "scripts/bench olmoe rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c64/" $OUT/olmoe/benchmarks-section.md | head -1 | cut -c1-180
  tar -czf $OUT/olmoe.tgz -C $OUT olmoe bench_olmoe.txt && rm -rf $OUT/olmoe $OUT/bench_olmoe.txt
else
  echo "contract skipped: $left s left"
fi
cd $OUT && tar -czf checks.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
