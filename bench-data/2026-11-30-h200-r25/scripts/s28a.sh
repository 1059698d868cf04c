#!/usr/bin/env bash
# Call 1 (r25): main (build-dev, 2161e9f): the sessions-in-threads loop that checks the run lock at session
# create/destroy. Then wip/partial-graph rebased on main (build-pg): test_model_gpu run part, threads loop,
# OLMoE c63/c30 with HZ_GPU_PARTIAL_GRAPH=1/0 alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
loop() { local B=$1 n=$2 f=0
  for i in $(seq 1 $n); do
    HZ_TEST_DEVICE=cuda:0 timeout 40 $B/tests/unit/model/test_model_sessions_threads > /tmp/t.txt 2>&1 || { f=$((f+1)); echo "fail run $i"; grep -E "session|FAILED  \]|rror" /tmp/t.txt | head -4 | cut -c1-300; }
  done; echo "$B threads: $f failed of $n"; }
loop build-dev 60; t
B=build-pgs
HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $R/mg.txt 2>&1; echo "pg test_model_gpu rc $?"
grep -E "partial|FAIL|bit-identical|differ|graph" $R/mg.txt | cut -c1-260 | head -40; t
loop build-pgs 20; t
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2 pg=$3
  echo "== $name (c$c, HZ_GPU_PARTIAL_GRAPH=$pg)"
  HZ_GPU_PARTIAL_GRAPH=$pg timeout 90 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
    --resident $c --transport threaded --blocks 1 --h2d-ceiling 52.9 --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  [ -s $R/hb_$name.json ] || tail -3 $R/hb_$name.txt
  python3 .devcarry/hbsum.py $R/hb_$name.json | head -1
  python3 - $R/hb_$name.json <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(0)
for r in j["runs"]:
    ss = r.get("session_stats") or {}
    print("  " + ", ".join("%s %s" % (k, ss.get(k)) for k in ("decode_path", "graph_steps", "eager_steps", "graph_fallback", "gate_hits", "gates_waited", "gate_table_copies")))
PY
  rm -f $R/hb_$name.txt
}
run g63a 63 1; run e63a 63 0; run g63b 63 1; run e63b 63 0; t
run g30a 30 1; run e30a 30 0; run g30b 30 1; run e30b 30 0; t
rm -f $R/mg.txt $R/models/*.txt
date
