#!/bin/bash
# Call 2: the kernel timeline (build-r44/tl: 501d745 configured -Dtimeline=true) with the one-pass
# attention and with HZ_GPU_ATTN_WARP=0; the GPU golden fixtures; the contract points OLMoE c64 and
# Qwen c60 (scripts/bench models, ceilings, sweep, table, report) on build-r44/final (501d745).
# Carry build-r44 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); N=build-r44/final
for v in warp chunked; do
  [ $v = chunked ] && export HZ_GPU_ATTN_WARP=0 || unset HZ_GPU_ATTN_WARP
  HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-r44/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_$v.txt 2>&1; echo "timeline $v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain|graph \+ pdl  \(graph\)' $OUT/tl_$v.txt | grep -v 'step 10' | head -24
done
unset HZ_GPU_ATTN_WARP
mkdir -p /tmp/gb && cp -r $N/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 60 $N/test_golden_gpu $N/tools/hz-mkmodel \
  $N/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -2
for m in olmoe qwen; do
  [ $m = olmoe ] && R=64 || R=60
  timeout 200 scripts/bench --build $N --models $m --executors grouped --residencies $R --blocks 1 \
    --steps models,ceilings,sweep,table,report --out $OUT/$m > $OUT/bench_$m.txt 2>&1
  echo "scripts/bench $m rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c$R/" $OUT/$m/benchmarks-section.md | head -1 | cut -c1-180
  cp $OUT/$m/benchmarks-section.md $OUT/section_$m.md 2>/dev/null
  tar -czf $OUT/$m.tgz -C $OUT $m bench_$m.txt && rm -rf $OUT/$m $OUT/bench_$m.txt
done
cd $OUT && tar -czf tl.tgz tl_*.txt golden.txt && rm -f tl_*.txt golden.txt
ls $OUT; echo "done after $(( $(date +%s) - T0 )) s"
