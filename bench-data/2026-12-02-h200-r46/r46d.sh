#!/bin/bash
# Call 4: main as the round closes (build-r46/final = 585cc2e, the down kernel's residual add): the GPU
# golden fixtures; compute-sanitizer memcheck on the W4A16 executor tests (the new grouped-2pass/acc/h
# variant among them) and on test_model_gpu's long part; the contract point OLMoE c64 (scripts/bench
# models, ceilings, sweep, table, report). Qwen's path did not change (the hand-over needs no shared
# expert). Carry build-r46 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); N=build-r46/final
mkdir -p /tmp/gb && cp -r $N/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 60 $N/test_golden_gpu $N/tools/hz-mkmodel \
  $N/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -2
HZ_GPU_TEST_NO_FAULTS=1 HZ_GPU_TEST_TRIALS=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $N/test_gpu_w4a16 > $OUT/memcheck_w4a16.txt 2>&1; echo "memcheck test_gpu_w4a16 rc $? ($(( $(date +%s) - T0 )) s)"; tail -2 $OUT/memcheck_w4a16.txt
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long timeout 100 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $N/test_model_gpu > $OUT/memcheck_model.txt 2>&1; echo "memcheck test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; tail -2 $OUT/memcheck_model.txt
timeout 170 scripts/bench --build $N --models olmoe --executors grouped --residencies 64 --blocks 1 \
  --steps models,ceilings,sweep,table,report --out $OUT/olmoe > $OUT/bench_olmoe.txt 2>&1
echo "scripts/bench olmoe rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c64/" $OUT/olmoe/benchmarks-section.md | head -1 | cut -c1-180
cp $OUT/olmoe/benchmarks-section.md $OUT/section_olmoe.md 2>/dev/null
tar -czf $OUT/olmoe.tgz -C $OUT olmoe bench_olmoe.txt && rm -rf $OUT/olmoe $OUT/bench_olmoe.txt
tar -czf $OUT/checks.tgz -C $OUT golden.txt memcheck_w4a16.txt memcheck_model.txt && rm -f $OUT/golden.txt $OUT/memcheck_*.txt
ls $OUT; echo "done after $(( $(date +%s) - T0 )) s"
