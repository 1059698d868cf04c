#!/usr/bin/env bash
# Call 1 (r23): build-dev = main + each layer's experts queued ahead of the routing behind a gate at
# partial residency (HZ_GPU_EXPERTS_AHEAD=0: queued after it, as before). test_model_gpu (run part),
# the sessions-in-threads test on cuda:0, OLMoE hz-bench at c63 and c30 alternating ahead/after, then
# compute-sanitizer memcheck of test_model_gpu's run part.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_MODEL_GPU_PARTS=run timeout 120 $B/tests/unit/model/test_model_gpu > $R/mg.txt 2>&1; echo "test_model_gpu rc $?"
grep -E "partial|FAIL|bit-identical" $R/mg.txt | head -40; t
HZ_TEST_DEVICE=cuda:0 timeout 150 $B/tests/unit/model/test_model_sessions_threads > $R/threads.txt 2>&1; echo "sessions_threads cuda:0 rc $?"
tail -5 $R/threads.txt; t
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2 ah=$3
  echo "== $name (c$c, HZ_GPU_EXPERTS_AHEAD=$ah)"
  HZ_GPU_EXPERTS_AHEAD=$ah timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
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
    print("  experts_queued %s, gated %s, routing_stored %s" % (ss.get("experts_queued"), ss.get("experts_gated"), ss.get("routing_stored")))
PY
}
run a63a 63 1; run e63a 63 0; run a63b 63 1; run e63b 63 0; t
run a30a 30 1; run e30a 30 0; run a30b 30 1; run e30b 30 0; t
tail -3 $R/hb_a63a.txt
echo "== memcheck test_model_gpu (quick, run part)"
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 240 compute-sanitizer --tool memcheck --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $R/memcheck.txt 2>&1; echo "memcheck rc $?"; tail -3 $R/memcheck.txt; t
date
