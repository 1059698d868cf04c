#!/usr/bin/env bash
# Call 2 (r24): the hits on the device (gates that look the ids up in the device's table of rows).
# test_model_gpu (run part), sessions in threads on cuda:0, tiny c2; then OLMoE c63 and c30, device hits
# on vs off (HZ_GPU_DEVICE_HITS), alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_MODEL_GPU_PARTS=run timeout 120 $B/tests/unit/model/test_model_gpu > $R/mg.txt 2>&1; echo "test_model_gpu rc $?"
grep -E "partial|FAIL|bit-identical|differ" $R/mg.txt | cut -c1-260 | head -40; t
echo "== threads"; HZ_TEST_DEVICE=cuda:0 timeout 150 $B/tests/unit/model/test_model_sessions_threads 2>&1 | grep -v "^\[ RUN\|^\[       OK" | head -20; t
W=/tmp/w; mkdir -p $W
$B/tools/hz-mkmodel --arch olmoe --preset tiny $W/tiny > /dev/null 2>&1 && $B/tools/hz-pack $W/tiny $W/tiny.hzq > /dev/null 2>&1; echo "tiny model rc $?"
echo "== tiny hz-bench c2"; timeout 60 $B/tools/hz-bench $W/tiny.hzq --device cuda:0 --executor grouped --resident 2 --blocks 1 --quick --json $R/tiny.json 2>&1 | tail -2
python3 -c "import json; s=json.load(open('$R/tiny.json'))['runs'][0]['session_stats']; print({k: s.get(k) for k in ('experts_queued','experts_gated','gate_hits','gates_waited','gate_table_copies')})"
t
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2 dh=$3
  echo "== $name (c$c, HZ_GPU_DEVICE_HITS=$dh)"
  HZ_GPU_DEVICE_HITS=$dh timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
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
    print("  " + ", ".join("%s %s" % (k, ss.get(k)) for k in ("experts_queued", "experts_gated", "gate_hits", "gates_waited", "gate_table_copies")))
PY
  rm -f $R/hb_$name.txt
}
run d63a 63 1; run w63a 63 0; run d63b 63 1; run w63b 63 0; t
run d30a 30 1; run w30a 30 0; run d30b 30 1; run w30b 30 0; t
rm -f $R/mg.txt $R/tiny.json $R/models/*.txt
date
