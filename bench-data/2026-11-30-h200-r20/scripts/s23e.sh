#!/usr/bin/env bash
# Call 5 (main 3857c70 = 294d6c6's code): the contract for both models (scripts/bench: OLMoE c30/c64,
# Qwen c30/c60, three transports at c30, ceilings, table).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; lscpu | grep "Model name"
for m in olmoe qwen; do
  res=30,64; [ $m = qwen ] && res=30,60
  timeout 270 scripts/bench --build $B --models $m --executors grouped --residencies $res --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,sweep,transports,table --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
  tail -25 $OUT/bench_$m.txt
  rm -rf /tmp/hz-bench-work/$m.* /tmp/hz-bench-work/$m-*; t
  tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
done
date
