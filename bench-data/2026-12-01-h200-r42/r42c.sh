#!/bin/bash
# Calls 3 and 4: the contract point of one model with the integer screen (build-r42/new = main 8e791b7:
# scripts/bench models, ceilings, sweep, table, report; no peer), then hz-bench on the same artifact,
# f674433 (build-bench-new, the screen's FP32 pass) and 8e791b7 alternating. Usage: r42c.sh olmoe 64 | qwen 60.
# Carry build-r42, build-bench-new and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); m=$1 r=$2 N=build-r42/new
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date
timeout 330 scripts/bench --build $N --models $m --executors grouped --residencies $r --blocks 1 \
  --steps models,ceilings,sweep,table,report --out $OUT/$m > $OUT/bench_$m.txt 2>&1
echo "scripts/bench rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| *c$r|tok/s" $OUT/bench_$m.txt | head -5 | cut -c1-300
A=/tmp/hz-bench-work/$m.hzq
for k in 1 2; do
  for b in build-bench-new $N; do
    tag=$(echo $b | tr '/' '_')
    timeout 70 $b/tools/hz-bench $A --device cuda:0 --executor grouped --resident $r --blocks 1 --transport threaded \
      --json $OUT/ab_${tag}_$k.json > $OUT/ab_${tag}_$k.txt 2>&1
    echo "== $b round $k rc $?: $(grep -E "^c$r/" $OUT/ab_${tag}_$k.txt | head -1)"
  done
done
cp $OUT/$m/benchmarks-section.md $OUT/section_$m.md 2>/dev/null
tar -czf $OUT/$m.tgz -C $OUT $m bench_$m.txt $(cd $OUT && ls ab_*) && rm -rf $OUT/$m $OUT/bench_$m.txt $OUT/ab_*
ls $OUT; echo "done after $(( $(date +%s) - T0 )) s"
