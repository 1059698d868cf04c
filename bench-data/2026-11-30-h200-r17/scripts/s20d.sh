#!/usr/bin/env bash
# Eighteenth session, call 4: the contract with the two-pass expert kernels for OLMoE (main), both models.
# c30 (threaded, threaded-whole, registered) and full residency. Tarred per model.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; lscpu | grep "Model name"
mkdir -p $OUT/chk
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
for m in olmoe qwen; do
  res=30,64; [ $m = qwen ] && res=30,60
  timeout 280 scripts/bench --build $B --models $m --executors grouped --residencies $res --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,sweep,transports,table --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
  for f in $OUT/$m/bench-*.json $OUT/$m/xport-*.json; do [ -f "$f" ] && { echo "$(basename $f)"; python3 .devcarry/hbsum.py $f; }; done
  grep -E "pipelined round .* x [248]|pinned H2D .*x 8" $OUT/bench_$m.txt | head -8
  rm -rf /tmp/hz-bench-work/$m.* /tmp/hz-bench-work/$m-*; t
  tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
done
date
