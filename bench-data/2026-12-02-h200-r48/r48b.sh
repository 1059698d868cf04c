#!/bin/bash
# Call 2: main (3b58587; device code of da1a8fc, the decode GEMV's two FMA chains) as carried in
# build-r48/main: the GPU golden fixtures; compute-sanitizer memcheck on the W4A16 tests and on
# test_model_gpu's long part; the timeline (build-r48/tl: -Dtimeline=true, with the block-exit table of
# 1c0a65a); hz-bench A/B in one call on one artifact (old = build-r47/old, the device code of aa3a9cb;
# sweep and table only); the contract points OLMoE c64 and Qwen c60 on main (models, ceilings, sweep,
# table, report). Carry build-r48, build-r47 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); N=build-r48/main
mkdir -p /tmp/gb && cp -r $N/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 60 $N/test_golden_gpu $N/tools/hz-mkmodel \
  $N/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -2
HZ_GPU_TEST_NO_FAULTS=1 HZ_GPU_TEST_TRIALS=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $N/test_gpu_w4a16 > $OUT/memcheck_w4a16.txt 2>&1; echo "memcheck test_gpu_w4a16 rc $? ($(( $(date +%s) - T0 )) s)"; tail -2 $OUT/memcheck_w4a16.txt
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long timeout 100 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $N/test_model_gpu > $OUT/memcheck_model.txt 2>&1; echo "memcheck test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; tail -2 $OUT/memcheck_model.txt
HZ_BENCH_GRAPH_ONLY=1 timeout 100 build-r48/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl.txt 2>&1; echo "timeline rc $? ($(( $(date +%s) - T0 )) s)"
grep -E 'qkv GEMV|attention|o GEMV|router|gate_up|down|chain|exit' $OUT/tl.txt | grep -v 'step 10' | head -40
for b in old main; do
  [ $b = old ] && D=build-r47/old || D=$N
  timeout 150 scripts/bench --build $D --work /tmp/hzw --models olmoe --executors grouped --residencies 64 \
    --blocks 1 --steps models,sweep,table --out $OUT/ab_$b > $OUT/bench_ab_$b.txt 2>&1
  echo "== A/B $b rc $? ($(( $(date +%s) - T0 )) s): $(grep -h -o -E '"pooled_decode_tok_s": *[0-9.]+' $OUT/ab_$b/bench-*.json 2>/dev/null | head -1)"
done
for m in olmoe qwen; do
  [ $m = olmoe ] && R=64 || R=60
  timeout 200 scripts/bench --build $N --work /tmp/hzw --models $m --executors grouped --residencies $R --blocks 1 \
    --steps models,ceilings,sweep,table,report --out $OUT/$m > $OUT/bench_$m.txt 2>&1
  echo "scripts/bench $m rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c$R/" $OUT/$m/benchmarks-section.md | head -1 | cut -c1-180
  cp $OUT/$m/benchmarks-section.md $OUT/section_$m.md 2>/dev/null
  tar -czf $OUT/$m.tgz -C $OUT $m bench_$m.txt && rm -rf $OUT/$m $OUT/bench_$m.txt
done
cd $OUT && tar -czf checks.tgz golden.txt memcheck_*.txt tl.txt ab_old ab_main bench_ab_*.txt && rm -rf golden.txt memcheck_*.txt tl.txt ab_old ab_main bench_ab_*.txt
ls $OUT; echo "done after $(( $(date +%s) - T0 )) s"
