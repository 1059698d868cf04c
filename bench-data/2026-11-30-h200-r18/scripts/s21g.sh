#!/usr/bin/env bash
# Call 7 (main d77aad2, final code): GPU tests, sanitizers on the new kernel and the decode test, step
# A/B against 00b70c7 (.devcarry/old/bench_split), the OLMoE contract.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/chk/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/chk/w4.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/chk/rc.txt
timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/chk/tmg.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/chk/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/chk/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/chk/golden.txt 2>&1; echo "golden rc $?"; grep -E "vs dequant|agree|OK|FAIL" $OUT/chk/golden.txt | head -6; t
timeout 60 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 $B/tests/unit/model/test_router_cluster > $OUT/chk/mc_rc.txt 2>&1; echo "memcheck router_cluster rc $?"; tail -2 $OUT/chk/mc_rc.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 86 $B/tests/unit/model/test_router_cluster > $OUT/chk/rk_rc.txt 2>&1; echo "racecheck router_cluster rc $?"; tail -2 $OUT/chk/rk_rc.txt
timeout 60 compute-sanitizer --tool initcheck --error-exitcode 86 $B/tests/unit/model/test_router_cluster > $OUT/chk/ic_rc.txt 2>&1; echo "initcheck router_cluster rc $?"; tail -2 $OUT/chk/ic_rc.txt
HZ_MODEL_GPU_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/chk/memcheck.txt 2>&1; echo "memcheck model_gpu rc $?"; tail -2 $OUT/chk/memcheck.txt; t
for i in 1 2; do
  echo "== 00b70c7"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 .devcarry/old/bench_split --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
  echo "== d77aad2"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
m=olmoe
timeout 200 scripts/bench --build $B --models $m --executors grouped --residencies 30,64 --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,sweep,transports,table --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
for f in $OUT/$m/bench-*.json $OUT/$m/xport-*.json; do [ -f "$f" ] && { echo "$(basename $f)"; python3 .devcarry/hbsum.py $f; }; done
grep -E "pinned H2D .*x 8" $OUT/bench_$m.txt | head -2
t
date
