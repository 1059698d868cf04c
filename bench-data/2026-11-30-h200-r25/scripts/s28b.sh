#!/usr/bin/env bash
# Call 2 (r25): wip/partial-graph (build-pgs): test_model_gpu run part x3, racecheck and memcheck of its
# run part (quick), then Qwen c30 / c39 with HZ_GPU_PARTIAL_GRAPH=1/0 alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-pgs
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for i in 1 2 3; do HZ_MODEL_GPU_PARTS=run timeout 120 $B/tests/unit/model/test_model_gpu > $R/mg.txt 2>&1; echo "test_model_gpu run $i rc $?"; grep -E "FAIL" $R/mg.txt | head -3; done
grep -c "graph (partial" $R/mg.txt; grep -E "graph|eager" $R/mg.txt | head -4 | cut -c1-200; t
echo "== racecheck test_model_gpu (quick, run part)"
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 300 compute-sanitizer --tool racecheck --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $R/racecheck.txt 2>&1; echo "racecheck rc $?"; grep -E "FAIL|model_gpu:" $R/racecheck.txt | cut -c1-200 | head -6; tail -1 $R/racecheck.txt; t
echo "== memcheck test_model_gpu (quick, run part)"
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 200 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $R/memcheck.txt 2>&1; echo "memcheck rc $?"; grep -E "FAIL" $R/memcheck.txt | cut -c1-200 | head -6; tail -2 $R/memcheck.txt; t
scripts/bench --build $B --models qwen --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2 pg=$3
  echo "== $name (c$c, HZ_GPU_PARTIAL_GRAPH=$pg)"
  HZ_GPU_PARTIAL_GRAPH=$pg timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/qwen.hzq --device cuda:0 --executor grouped \
    --resident $c --transport threaded --blocks 1 --h2d-ceiling 52.9 --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  [ -s $R/hb_$name.json ] || tail -3 $R/hb_$name.txt
  python3 .devcarry/hbsum.py $R/hb_$name.json 2>/dev/null | head -1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; s=r['session_stats']; print('  ' + ', '.join('%s %s' % (k, s.get(k)) for k in ('decode_path','graph_steps','eager_steps','graph_fallback','gate_hits','gates_waited','gate_table_copies')))" $R/hb_$name.json 2>/dev/null
  rm -f $R/hb_$name.txt
}
run g30a 30 1; run e30a 30 0; run g30b 30 1; run e30b 30 0; t
run g39a 39 1; run e39a 39 0; t
rm -f $R/mg.txt $R/models/*.txt $R/bench_models.txt
tar czf $R/call2.tgz -C $R $(cd $R && ls hb_*.json) racecheck.txt memcheck.txt && rm -f $R/hb_*.json $R/racecheck.txt $R/memcheck.txt
date
