#!/usr/bin/env bash
# Call 4 (r25): the GPU tests, then the contract for both models (the partial-residency graph and the gate
# in the router, the library defaults now).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; lscpu | grep "Model name"
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/w4.txt
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
f=0; for i in $(seq 1 10); do HZ_TEST_DEVICE=cuda:0 timeout 40 $B/tests/unit/model/test_model_sessions_threads > /tmp/t.txt 2>&1 || f=$((f+1)); done; echo "threads: $f failed of 10"
rm -f $OUT/w4.txt $OUT/mg.txt $OUT/rc.txt $OUT/pf.txt $OUT/golden.txt
t
for m in olmoe qwen; do
  res=30,64; [ $m = qwen ] && res=30,60
  timeout 270 scripts/bench --build $B --models $m --executors grouped --residencies $res --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,sweep,transports,table --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
  tail -25 $OUT/bench_$m.txt
  rm -rf /tmp/hz-bench-work/$m.* /tmp/hz-bench-work/$m-*; t
  tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
done
date
