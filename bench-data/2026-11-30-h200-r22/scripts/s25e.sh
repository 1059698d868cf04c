#!/usr/bin/env bash
# Call 5 (r22): build-dev = main + the backing mapped with MADV_HUGEPAGE (HZ_BACKING_THP=0 leaves it
# out). OLMoE c30 threaded (and registered once each), alternating, on one generated model.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; uname -r; lscpu | grep -E "Model name|^CPU\(s\)"
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
grep -E "MemTotal|MemFree|AnonHugePages" /proc/meminfo
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
timeout 120 $B/tools/hz-ceilings --repeats 20 --json $R/ceil.json > $R/ceil.txt 2>&1; echo "hz-ceilings rc $?"
grep -E "pinned H2D|staged round|memcpy" $R/ceil.txt | head -12; t
H2D=$(python3 -c "
import json
j=json.load(open('$R/ceil.json'))
print(round([x for x in j['h2d_pinned'] if x['label']=='olmoe_expert'][0]['gbps'],2))" 2>/dev/null || echo 52.7)
echo "h2d ceiling olmoe $H2D"
run() { local name=$1 thp=$2 tr=$3
  echo "== $name (HZ_BACKING_THP=$thp, $tr)"
  ( while sleep 1; do grep AnonHugePages /proc/meminfo; done ) > $R/thp_$name.txt & local sp=$!
  HZ_BACKING_THP=$thp timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
    --resident 30 --transport $tr --blocks 1 --h2d-ceiling $H2D --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  kill $sp 2>/dev/null; echo "  AnonHugePages max: $(sort -k2 -n $R/thp_$name.txt | tail -1)"
  python3 .devcarry/hbsum.py $R/hb_$name.json
  grep -iE "backing|load" $R/hb_$name.txt | head -3; }
run on1 1 threaded; run off1 0 threaded; run on2 1 threaded; run off2 0 threaded; t
run on3 1 threaded; run off3 0 threaded; t
run on_reg 1 registered; run off_reg 0 registered; t
date
