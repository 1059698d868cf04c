#!/usr/bin/env bash
# Call 8 (main d77aad2): the OLMoE contract again, its whole output kept (call 7's lost its model and
# transport reports to the output limit).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
m=olmoe
timeout 200 scripts/bench --build $B --models $m --executors grouped --residencies 30,64 --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,sweep,transports,table --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
for f in $OUT/$m/bench-*.json $OUT/$m/xport-*.json; do [ -f "$f" ] && { echo "$(basename $f)"; python3 .devcarry/hbsum.py $f; }; done
grep -E "pinned H2D .*x 8" $OUT/bench_$m.txt | head -2
tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt; t
date
