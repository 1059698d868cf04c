#!/usr/bin/env bash
# Call 7 (r22): build-dev = main + the router storing its selection into pinned memory at partial
# residency (HZ_GPU_ROUTE_MIRROR=0: the copy and queue wait as before). test_model_gpu (both ways, both
# architectures, tiny models), then OLMoE hz-bench at c63 and c30, alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 100 $B/tests/unit/model/test_model_gpu > $R/mg.txt 2>&1; echo "test_model_gpu rc $?"
grep -E "partial|FAIL|model_gpu:" $R/mg.txt | head -24; t
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2 mir=$3
  echo "== $name (c$c, HZ_GPU_ROUTE_MIRROR=$mir)"
  HZ_GPU_ROUTE_MIRROR=$mir timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
    --resident $c --transport threaded --blocks 1 --h2d-ceiling 52.9 --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  python3 .devcarry/hbsum.py $R/hb_$name.json | head -1
  python3 - $R/hb_$name.json <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("  no json:", e); sys.exit(0)
for r in j["runs"]:
    ss = r.get("session_stats") or {}
    print("  routing_readback %s, routing_stored %s, decode path %s" % (ss.get("routing_readback"), ss.get("routing_stored"), ss.get("decode_path")))
PY
}
run m63a 63 1; run c63a 63 0; run m63b 63 1; run c63b 63 0; t
run m30a 30 1; run c30a 30 0; run m30b 30 1; run c30b 30 0; t
tail -3 $R/hb_m63a.txt
date
