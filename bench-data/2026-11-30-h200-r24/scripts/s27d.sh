#!/usr/bin/env bash
# Call 4 (r24): hits counted without a lease (hz_cache_touch) on the hit path. test_model_gpu (run part);
# then OLMoE c63 and c30: t = this build, p = the library of 578dc81 (hits on the device, group leased on
# every layer) swapped in with LD_LIBRARY_PATH, w = this build with HZ_GPU_DEVICE_HITS=0; alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_MODEL_GPU_PARTS=run timeout 120 $B/tests/unit/model/test_model_gpu > $R/mg.txt 2>&1; echo "test_model_gpu rc $?"
grep -E "hits on the device|every gate|FAIL|differ" $R/mg.txt | cut -c1-230 | head -20; t
echo "== threads"; HZ_TEST_DEVICE=cuda:0 timeout 150 $B/tests/unit/model/test_model_sessions_threads 2>&1 | grep -E "PASSED|FAILED|ERROR" | head; t
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2 lib=$3 dh=$4
  echo "== $name (c$c, lib $lib, HZ_GPU_DEVICE_HITS=$dh)"
  local lp=$PWD/.devcarry/lib; [ $lib = prev ] && lp=$PWD/.devcarry/prev:$lp
  LD_LIBRARY_PATH=$lp HZ_GPU_DEVICE_HITS=$dh timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
    --resident $c --transport threaded --blocks 1 --h2d-ceiling 52.9 --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  [ -s $R/hb_$name.json ] || tail -2 $R/hb_$name.txt
  python3 .devcarry/hbsum.py $R/hb_$name.json | head -1
  python3 - $R/hb_$name.json <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(0)
for r in j["runs"]:
    ss = r.get("session_stats") or {}; c = r.get("cache") or {}
    print("  " + ", ".join("%s %s" % (k, ss.get(k)) for k in ("experts_gated", "gate_hits", "gates_waited", "gate_table_copies")) + ", decode hits %s misses %s" % ((c.get("measured_decode") or {}).get("hits"), (c.get("measured_decode") or {}).get("misses")))
PY
  rm -f $R/hb_$name.txt
}
run t63a 63 cur 1; run p63a 63 prev 1; run w63a 63 cur 0; run t63b 63 cur 1; run p63b 63 prev 1; run w63b 63 cur 0; t
run t30a 30 cur 1; run p30a 30 prev 1; run w30a 30 cur 0; run t30b 30 cur 1; run p30b 30 prev 1; run w30b 30 cur 0; t
rm -f $R/mg.txt $R/models/*.txt $R/bench_models.txt
tar czf $R/hb.tgz -C $R $(cd $R && ls hb_*.json) && rm -f $R/hb_*.json
date
