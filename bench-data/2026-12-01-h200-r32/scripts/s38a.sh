#!/usr/bin/env bash
# Next session, call 1 (carry build-dev = main with the two-group decode attention, .devcarry): the GPU
# tests, then the OLMoE contract with the transformers peer (every residency, the c30 transports).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; grep "long context" $OUT/mg.txt; tail -1 $OUT/mg.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
t
m=olmoe
timeout 420 scripts/bench --build $B --models $m --executors grouped --residencies 30,40,50,60,64 --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,peer,sweep,transports,table --peer-variants default --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
tail -22 $OUT/bench_$m.txt | cut -c1-400; t
tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
tar czf $OUT/tests.tgz -C $OUT rc.txt mg.txt pf.txt golden.txt
date
