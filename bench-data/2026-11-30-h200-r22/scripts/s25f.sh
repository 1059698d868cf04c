#!/usr/bin/env bash
# Call 6 (r22): main. What the partial-residency step costs with almost no misses: hz-bench on OLMoE at
# c64 (full residency: graph, routing on the device) against c63 (partial: per layer the ids come back
# to the host, leases, eager launches; 1 of 64 experts per layer not resident) and c48 / c30.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2
  echo "== $name (c$c, threaded)"
  timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
    --resident $c --transport threaded --blocks 1 --h2d-ceiling 52.9 --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  python3 .devcarry/hbsum.py $R/hb_$name.json
  python3 - $R/hb_$name.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["runs"]:
    c = r["cache"]; md = c.get("measured_decode") or {}; ss = r.get("session_stats") or {}
    print("  decode hit %s, decode misses %s, decode path %s, pdl %s" % (md.get("hit_rate"), md.get("misses"), ss.get("decode_path"), ss.get("decode_pdl")))
PY
}
run c64a 64; run c63a 63; run c64b 64; run c63b 63; t
run c48 48; run c30 30; t
date
