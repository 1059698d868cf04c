#!/usr/bin/env bash
# Sixteenth session, call 2: hz-ceilings with multi-blob pipelined rounds (a7cc44d); OLMoE c30 threaded
# plain vs piecewise 2 waves (repeats); Qwen c30 threaded, lock-free transport vs the one before; then the
# o-tags step sweeps of wip/o-tags (s15a.sh). Everything is tarred into $OUT/r.tgz.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT/r; mkdir -p $R
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; lscpu | grep -E "Model name"; git log --oneline -1 2>/dev/null
timeout 150 $B/tools/hz-ceilings --json $R/ceil.json > $R/ceil.txt 2>&1; echo "hz-ceilings rc $?"
grep -E "pinned H2D .*x 8|staged round|pipelined" $R/ceil.txt; t
scripts/bench --build $B --models olmoe,qwen --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; ls /tmp/hz-bench-work/; t
H2D=$(python3 -c "
import json
j=json.load(open('$R/ceil.json'))
print(round([x for x in j['h2d_pinned'] if x['label']=='olmoe_expert'][0]['gbps'],2))")
H2DQ=$(python3 -c "
import json
j=json.load(open('$R/ceil.json'))
print(round([x for x in j['h2d_pinned'] if x['label']=='qwen_expert'][0]['gbps'],2))")
echo "h2d ceilings: olmoe $H2D qwen $H2DQ"
run() { local name=$1 m=$2 h=$3 lib=$4 envs=$5; shift 5; echo "== $name ($m $lib; $envs $*)"; env LD_LIBRARY_PATH=$lib:$PWD/.devcarry/lib $envs timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident 30 --transport threaded --blocks 1 --h2d-ceiling $h --json $R/hb_$name.json "$@" > $R/hb_$name.txt 2>&1; echo "rc $?"; python3 .devcarry/hbsum.py $R/hb_$name.json; }
NEW=$PWD/$B OLD=$PWD/.devcarry/oldtxn
run o_new1 olmoe $H2D $NEW HZ_X=1
run o_pw2a olmoe $H2D $NEW "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=2"
run o_new2 olmoe $H2D $NEW HZ_X=1
run o_pw2b olmoe $H2D $NEW "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=2"
run o_new3 olmoe $H2D $NEW HZ_X=1
run o_pw2c olmoe $H2D $NEW "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=2"; t
run q_new1 qwen $H2DQ $NEW HZ_X=1
run q_old1 qwen $H2DQ $OLD HZ_X=1
run q_new2 qwen $H2DQ $NEW HZ_X=1
run q_old2 qwen $H2DQ $OLD HZ_X=1
run q_pw2 qwen $H2DQ $NEW "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=2"; t
tar czf $OUT/r.tgz -C $OUT r
OUT=$R bash .devcarry/s15a.sh
tar czf $OUT/r.tgz -C $OUT r; rm -rf $R; date
