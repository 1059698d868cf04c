#!/usr/bin/env bash
# Call 5 (r24, main with the hits on the device): test_model_gpu built with its gate_hits check inverted
# (must fail), memcheck of test_model_gpu's run part (quick), then Qwen c30 and c39, device hits on vs off.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
echo "== test_model_gpu with the check inverted (expected to fail)"
HZ_MODEL_GPU_PARTS=run timeout 120 .devcarry/brk/test_model_gpu_brk > $R/brk.txt 2>&1; echo "rc $?"
grep -E "FAIL|passed on the device's table" $R/brk.txt | cut -c1-220 | head -6; tail -2 $R/brk.txt; t
echo "== memcheck test_model_gpu (quick, run part)"
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 240 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $R/memcheck.txt 2>&1; echo "memcheck rc $?"; grep -E "hits on the device|FAIL" $R/memcheck.txt | cut -c1-200 | head -6; tail -3 $R/memcheck.txt; t
scripts/bench --build $B --models qwen --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2 dh=$3
  echo "== $name (c$c, HZ_GPU_DEVICE_HITS=$dh)"
  HZ_GPU_DEVICE_HITS=$dh timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/qwen.hzq --device cuda:0 --executor grouped \
    --resident $c --transport threaded --blocks 1 --h2d-ceiling 52.9 --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  [ -s $R/hb_$name.json ] || tail -2 $R/hb_$name.txt
  python3 .devcarry/hbsum.py $R/hb_$name.json 2>/dev/null | head -1
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
run q30a 30 1; run v30a 30 0; run q30b 30 1; run v30b 30 0; t
run q39a 39 1; run v39a 39 0; run q39b 39 1; run v39b 39 0; t
rm -f $R/models/*.txt $R/bench_models.txt $R/brk.txt
tar czf $R/hb.tgz -C $R $(cd $R && ls hb_*.json) memcheck.txt && rm -f $R/hb_*.json $R/memcheck.txt
date
