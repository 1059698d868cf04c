#!/bin/bash
# Call 10: the contract points on main as the round closes (build-r42/final = 3eb3142; the kernels are
# those of 0bbd0fd): scripts/bench models, ceilings, sweep, table, report for OLMoE c64 and Qwen c60.
# Carry build-r42 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); N=build-r42/final
for mr in olmoe:64 qwen:60; do
  m=${mr%%:*} r=${mr##*:}
  timeout 230 scripts/bench --build $N --models $m --executors grouped --residencies $r --blocks 1 \
    --steps models,ceilings,sweep,table,report --out $OUT/$m > $OUT/bench_$m.txt 2>&1
  echo "scripts/bench $m rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c$r/" $OUT/$m/benchmarks-section.md | head -1 | cut -c1-160
  cp $OUT/$m/benchmarks-section.md $OUT/section_$m.md 2>/dev/null
  tar -czf $OUT/$m.tgz -C $OUT $m bench_$m.txt && rm -rf $OUT/$m $OUT/bench_$m.txt
done
ls $OUT; echo "done after $(( $(date +%s) - T0 )) s"
