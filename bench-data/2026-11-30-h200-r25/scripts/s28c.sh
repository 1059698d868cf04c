#!/usr/bin/env bash
# Call 3 (r25): the experts' gate run by the router's routing warp (build-dev, uncommitted on d770b79+):
# test_model_gpu run part x2, memcheck of it (quick), sessions in threads x20, then OLMoE c63 / c30 with
# HZ_GPU_GATE_IN_ROUTER=1/0 alternating, then Qwen c30 if time allows.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for i in 1 2; do HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $R/mg$i.txt 2>&1; echo "test_model_gpu run $i rc $?"; grep -E "FAIL" $R/mg$i.txt | head -5 | cut -c1-300; done
grep -E "gate kernel|hits on the device\)" $R/mg1.txt | cut -c1-250 | head -8; t
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 200 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $R/memcheck.txt 2>&1; echo "memcheck rc $?"; grep -E "FAIL" $R/memcheck.txt | cut -c1-200 | head -6; tail -2 $R/memcheck.txt; t
f=0; for i in $(seq 1 20); do HZ_TEST_DEVICE=cuda:0 timeout 40 $B/tests/unit/model/test_model_sessions_threads > /tmp/t.txt 2>&1 || { f=$((f+1)); grep -E "session|FAILED  \]|rror" /tmp/t.txt | head -4 | cut -c1-300; }; done; echo "threads: $f failed of 20"; t
run() { local name=$1 model=$2 c=$3 gr=$4
  echo "== $name ($model c$c, HZ_GPU_GATE_IN_ROUTER=$gr)"
  HZ_GPU_GATE_IN_ROUTER=$gr timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/$model.hzq --device cuda:0 --executor grouped \
    --resident $c --transport threaded --blocks 1 --h2d-ceiling 52.9 --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  [ -s $R/hb_$name.json ] || tail -3 $R/hb_$name.txt
  python3 .devcarry/hbsum.py $R/hb_$name.json 2>/dev/null | head -1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; s=r['session_stats']; print('  ' + ', '.join('%s %s' % (k, s.get(k)) for k in ('decode_path','experts_gate','graph_steps','gate_hits','gates_waited','gate_table_copies')))" $R/hb_$name.json 2>/dev/null
  rm -f $R/hb_$name.txt
}
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run r63a olmoe 63 1; run k63a olmoe 63 0; run r63b olmoe 63 1; run k63b olmoe 63 0; t
run r30a olmoe 30 1; run k30a olmoe 30 0; run r30b olmoe 30 1; run k30b olmoe 30 0; t
rm -f /tmp/hz-bench-work/olmoe*
if [ $(( $(date +%s) - T0 )) -lt 330 ]; then
  scripts/bench --build $B --models qwen --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
  run r30q qwen 30 1; run k30q qwen 30 0; run r30Q qwen 30 1; run k30Q qwen 30 0; t
fi
rm -f $R/models/*.txt $R/bench_models.txt
tar czf $R/call3.tgz -C $R $(cd $R && ls hb_*.json) memcheck.txt mg1.txt mg2.txt && rm -f $R/hb_*.json $R/memcheck.txt $R/mg?.txt
date
