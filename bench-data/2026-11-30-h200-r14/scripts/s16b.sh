#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date; lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|NUMA|L3|Model name"
HC_SWEEP=1 timeout 100 .devcarry/hostcopy 2>&1 | tail -20
date
scripts/bench --build $B --models olmoe --executors grouped --steps models,ceilings --blocks 1 --out $OUT/olmoe > $OUT/bench_models.txt 2>&1; echo "bench models rc $?"
H2D=$(python3 -c "
import json
j=json.load(open('$OUT/olmoe/ceilings.json'))
print(round([x for x in j['h2d_pinned'] if x['label']=='olmoe_expert'][0]['gbps'],2))")
echo "h2d ceiling: $H2D"; [ -z "$H2D" ] && H2D=52.5
grep -iE "memcpy|pinned" $OUT/olmoe/ceilings.txt | head -12
date
run() { local name=$1 envs=$2; shift 2; echo "== $name ($envs $*)"; env $envs timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 30 --transport threaded --blocks 1 --h2d-ceiling $H2D --json $OUT/hb_$name.json "$@" > $OUT/hb_$name.txt 2>&1; echo "rc $?"; python3 .devcarry/hbsum.py $OUT/hb_$name.json; }
run t16 HZ_X=1
run t12 HZ_X=1 --staging-threads 12
run t8 HZ_X=1 --staging-threads 8
run t14 HZ_X=1 --staging-threads 14
run t12pw2 "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=2" --staging-threads 12
run t12pw4 "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=4" --staging-threads 12
run t16b HZ_X=1
date
