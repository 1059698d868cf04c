#!/usr/bin/env bash
# Next session, call 2 (carry build-dev = main with the two-group decode attention, .devcarry): the Qwen
# contract with the transformers peer (c20, c30, c39, c60; the c30 transports).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
t
m=qwen
timeout 420 scripts/bench --build $B --models $m --executors grouped --residencies 20,30,39,60 --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,peer,sweep,transports,table --peer-variants default --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
tail -22 $OUT/bench_$m.txt | cut -c1-400; t
tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
date
