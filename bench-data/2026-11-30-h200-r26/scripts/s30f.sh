#!/usr/bin/env bash
# Session 27 call 6: the GPU tests on 4754922, then the Qwen contract with the transformers peer and the
# whole residency sweep.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/w4.txt
HZ_W4A16_GU_SPLIT=1 HZ_W4A16_DN_SPLIT=2 HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4s.txt 2>&1; echo "test_gpu_w4a16 (other splits) rc $?"; tail -1 $OUT/w4s.txt
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
f=0; for i in $(seq 1 10); do HZ_TEST_DEVICE=cuda:0 timeout 40 $B/tests/unit/model/test_model_sessions_threads > /tmp/t.txt 2>&1 || f=$((f+1)); done; echo "threads: $f failed of 10"
tar czf $OUT/tests.tgz -C $OUT w4.txt w4s.txt mg.txt rc.txt pf.txt golden.txt; rm -f $OUT/w4.txt $OUT/w4s.txt $OUT/mg.txt $OUT/rc.txt $OUT/pf.txt $OUT/golden.txt
t
m=qwen
timeout 400 scripts/bench --build $B --models $m --executors grouped --residencies 20,30,39,60 --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,peer,sweep,transports,table --peer-variants default --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
tail -22 $OUT/bench_$m.txt; t
tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
date
