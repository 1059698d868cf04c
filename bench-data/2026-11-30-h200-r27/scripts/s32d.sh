#!/usr/bin/env bash
# Session 28 call 4 (main 1ad160d, build-dev): kernel tests in three knob settings, compute-sanitizer
# memcheck + racecheck on the kernel test with the split / bulk-copy variants, the model tests and golden,
# the routing's clock breakdown (diagnostic build), then the OLMoE contract with the peer.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/w4.txt
HZ_W4A16_GU_SPLIT=1 HZ_W4A16_DN_SPLIT=2 HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4s.txt 2>&1; echo "test_gpu_w4a16 gu1 dn2 rc $?"; tail -1 $OUT/w4s.txt
HZ_W4A16_DN_TMA=0 HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4t.txt 2>&1; echo "test_gpu_w4a16 dn_tma 0 rc $?"; tail -1 $OUT/w4t.txt
for v in "" "HZ_W4A16_DN_SPLIT=2" "HZ_W4A16_GU_SPLIT=1 HZ_W4A16_DN_TMA=0"; do for tool in memcheck racecheck; do
  extra=; [ $tool = memcheck ] && extra="--leak-check full"
  env $v HZ_GPU_TEST_NO_FAULTS=1 HZ_GPU_TEST_TRIALS=1 timeout 120 compute-sanitizer --tool $tool $extra --error-exitcode 86 $B/cuda/test_gpu_w4a16 > $OUT/san.txt 2>&1
  echo "sanitizer $tool [$v] rc $? $(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/san.txt)"
done; done; t
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
tar czf $OUT/tests.tgz -C $OUT w4.txt w4s.txt w4t.txt mg.txt rc.txt pf.txt golden.txt san.txt; t
echo "== routing clocks"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-exp/rc/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/rclk.txt 2>&1; echo "rc $?"; grep -E 'graph \+ pdl' $OUT/rclk.txt
grep '^RCLK' $OUT/rclk.txt | awk '{n++; for(i=2;i<=6;i++) s[i]+=$i} END {printf "RCLK n %d mean cycles: logits %.0f | max+exp %.0f | sum %.0f | rank %.0f | write %.0f\n", n, s[2]/n, s[3]/n, s[4]/n, s[5]/n, s[6]/n}'
grep '^RCLK' $OUT/rclk.txt | sort -k2n | awk 'NR%500==1' | head -8
gzip -f $OUT/rclk.txt; t
m=olmoe
timeout 300 scripts/bench --build $B --models $m --executors grouped --residencies 30,40,50,60,64 --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,peer,sweep,transports,table --peer-variants default --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
tail -22 $OUT/bench_$m.txt; t
tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
date
