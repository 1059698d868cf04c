#!/usr/bin/env bash
# Call 5 (r23): compute-sanitizer memcheck of test_model_gpu's run part (the gates included), then the
# Qwen1.5-MoE-A2.7B shape at c30 and c39, experts ahead vs after, alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
echo "== memcheck test_model_gpu (quick, run part)"
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 240 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $R/memcheck.txt 2>&1; echo "memcheck rc $?"; grep -E "ahead|FAIL" $R/memcheck.txt | head -8; tail -3 $R/memcheck.txt; t
scripts/bench --build $B --models qwen --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
ls /tmp/hz-bench-work/
run() { local name=$1 c=$2 ah=$3
  echo "== $name (c$c, HZ_GPU_EXPERTS_AHEAD=$ah)"
  HZ_GPU_EXPERTS_AHEAD=$ah timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/qwen.hzq --device cuda:0 --executor grouped \
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
    ss = r.get("session_stats") or {}
    print("  experts_queued %s, gated %s, routing_stored %s" % (ss.get("experts_queued"), ss.get("experts_gated"), ss.get("routing_stored")))
PY
  rm -f $R/hb_$name.txt
}
run qa30a 30 1; run qe30a 30 0; run qa30b 30 1; run qe30b 30 0; t
run qa39a 39 1; run qe39a 39 0; t
rm -f $R/models/*.txt
date
