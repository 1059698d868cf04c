#!/usr/bin/env bash
# Session 27 call 5: the OLMoE contract on 4754922 (both two-pass splits at their defaults: gate_up split,
# down not), with the transformers peer and the whole residency sweep; then hz-bench c64 with the down
# split off / on alternating on the same artifact.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; lscpu | grep "Model name"
m=olmoe
timeout 430 scripts/bench --build $B --models $m --executors grouped --residencies 30,40,50,60,64 --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,peer,sweep,transports,table --peer-variants default --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
tail -30 $OUT/bench_$m.txt; t
for i in 1 2; do for dn in 1 2; do
  HZ_W4A16_DN_SPLIT=$dn timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/ab_dn${dn}_$i.json > $OUT/ab_dn${dn}_$i.txt 2>&1; echo "dn $dn rc $?"; grep -iE 'decode' $OUT/ab_dn${dn}_$i.txt | head -3
done; done; t
tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt ab_dn1_1.txt ab_dn2_1.txt ab_dn1_2.txt ab_dn2_2.txt ab_dn1_1.json ab_dn2_1.json ab_dn1_2.json ab_dn2_2.json; rm -rf $OUT/$m $OUT/bench_$m.txt $OUT/ab_*
date
