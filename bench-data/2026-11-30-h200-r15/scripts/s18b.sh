#!/usr/bin/env bash
# Sixteenth session, call 3: OLMoE c30 threaded, plain vs piecewise 2 and 4 waves, four rounds in rotation,
# between two hz-ceilings runs (host drift). Everything is tarred into $OUT/r.tgz.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT/r; mkdir -p $R
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; lscpu | grep -E "Model name"
timeout 150 $B/tools/hz-ceilings --json $R/ceil1.json > $R/ceil1.txt 2>&1; echo "hz-ceilings rc $?"
grep -E "pinned H2D .*x 8|staged round .*streaming|pipelined" $R/ceil1.txt; t
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
H2D=$(python3 -c "
import json
j=json.load(open('$R/ceil1.json'))
print(round([x for x in j['h2d_pinned'] if x['label']=='olmoe_expert'][0]['gbps'],2))")
echo "h2d ceiling: $H2D"
run() { local name=$1 envs=$2; shift 2; echo "== $name ($envs $*)"; env $envs timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 30 --transport threaded --blocks 1 --h2d-ceiling $H2D --json $R/hb_$name.json "$@" > $R/hb_$name.txt 2>&1; echo "rc $?"; python3 .devcarry/hbsum.py $R/hb_$name.json; }
for i in 1 2 3 4; do
  run plain$i HZ_X=1
  run pw2_$i "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=2"
  run pw4_$i "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=4"
  t
done
timeout 150 $B/tools/hz-ceilings --json $R/ceil2.json > $R/ceil2.txt 2>&1; echo "hz-ceilings rc $?"
grep -E "pinned H2D .*x 8|staged round .*streaming|pipelined" $R/ceil2.txt; t
tar czf $OUT/r.tgz -C $OUT r; rm -rf $R; date
