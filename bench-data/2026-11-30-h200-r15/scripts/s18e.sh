#!/usr/bin/env bash
# Sixteenth session, call 6 (f9842e8: the miss path by phase; the failure-message fix): OLMoE c30, threaded and
# threaded-whole, with the ceilings of the same call, for bench_report's staged bound. Tarred per model.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; lscpu | grep "Model name"
timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/tmg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/golden.txt
for m in olmoe; do
  timeout 250 scripts/bench --build $B --models $m --executors grouped --transports threaded,threaded-whole --transport-residency 30 --steps models,ceilings,transports,table --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
  for f in $OUT/$m/xport-*.json; do [ -f "$f" ] && { echo "$(basename $f)"; python3 .devcarry/hbsum.py $f; python3 .devcarry/phases.py $f; }; done
  rm -rf /tmp/hz-bench-work/$m.* /tmp/hz-bench-work/$m-*; t
  tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
done
date
