#!/usr/bin/env bash
# Call 4 (carry build-dev = 691c50a, .devcarry): the contract points with the lm_head screen: OLMoE c64 and
# Qwen c60 (hz-bench, ceilings in the same run), each folder archived (the tool returns few files).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for mr in olmoe:64 qwen:60; do
  m=${mr%%:*} r=${mr##*:}
  timeout 280 scripts/bench --build build-dev --models $m --executors grouped --residencies $r --blocks 1 \
    --steps models,ceilings,sweep,table,report --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
  tail -8 $OUT/bench_$m.txt | cut -c1-300; t
  cp $OUT/$m/benchmarks-section.md $OUT/$m-section.md 2>/dev/null
  tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
done
date
