#!/usr/bin/env bash
# Call 8 (r24): the table's staging rewritten only after its last copy ran (tab_ev). test_model_gpu's run
# part five times, racecheck of it (quick), sessions in threads on cuda:0, OLMoE c63 / c30 on vs off.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for i in 1 2 3 4 5; do HZ_MODEL_GPU_PARTS=run timeout 120 $B/tests/unit/model/test_model_gpu > $R/mg.txt 2>&1; echo "test_model_gpu run $i rc $?"; grep -E "FAIL" $R/mg.txt | head -3; done; t
echo "== threads"; HZ_TEST_DEVICE=cuda:0 timeout 150 $B/tests/unit/model/test_model_sessions_threads 2>&1 | grep -E "PASSED|FAILED|ERROR" | head; t
echo "== racecheck test_model_gpu (quick, run part)"
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run timeout 300 compute-sanitizer --tool racecheck --error-exitcode 86 \
  $B/tests/unit/model/test_model_gpu > $R/racecheck.txt 2>&1; echo "racecheck rc $?"; grep -E "FAIL|model_gpu:" $R/racecheck.txt | cut -c1-200 | head -6; tail -1 $R/racecheck.txt; t
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
run() { local name=$1 c=$2 dh=$3
  echo "== $name (c$c, HZ_GPU_DEVICE_HITS=$dh)"
  HZ_GPU_DEVICE_HITS=$dh timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
    --resident $c --transport threaded --blocks 1 --h2d-ceiling 52.9 --json $R/hb_$name.json > $R/hb_$name.txt 2>&1; echo "rc $?"
  [ -s $R/hb_$name.json ] || tail -2 $R/hb_$name.txt
  python3 .devcarry/hbsum.py $R/hb_$name.json 2>/dev/null | head -1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; s=r['session_stats']; print('  gated %s hits %s waited %s copies %s' % (s.get('experts_gated'), s.get('gate_hits'), s.get('gates_waited'), s.get('gate_table_copies')))" $R/hb_$name.json 2>/dev/null
  rm -f $R/hb_$name.txt
}
run d63a 63 1; run w63a 63 0; run d30a 30 1; run w30a 30 0; t
rm -f $R/mg.txt $R/models/*.txt $R/bench_models.txt
tar czf $R/call8.tgz -C $R $(cd $R && ls hb_*.json) racecheck.txt && rm -f $R/hb_*.json $R/racecheck.txt
date
