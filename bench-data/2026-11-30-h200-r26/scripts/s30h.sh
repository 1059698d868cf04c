#!/usr/bin/env bash
# Session 27 call 8: the two-pass down kernel's intermediate by one bulk copy (HZ_W4A16_DN_TMA, default on)
# against loads: kernel tests, step A/B alternating, the timeline with it, test_model_gpu.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/w4.txt
HZ_W4A16_DN_SPLIT=2 HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4s.txt 2>&1; echo "test_gpu_w4a16 dn split rc $?"; tail -1 $OUT/w4s.txt
for i in 1 2 3; do for tma in 1 0; do
  echo "== step tma $tma"; HZ_W4A16_DN_TMA=$tma HZ_BENCH_GRAPH_ONLY=1 timeout 120 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
for i in 1; do
  echo "== step tma 1 dn split 2"; HZ_W4A16_DN_SPLIT=2 HZ_BENCH_GRAPH_ONLY=1 timeout 120 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done
echo "== timeline tma"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-x/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_tma.txt 2>&1; echo "rc $?"; sed -n '/step 10, launch/,/GEMV blocks placed/p' $OUT/tl_tma.txt
echo "== test_model_gpu"; HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "rc $?"; grep FAIL $OUT/mg.txt | head
date
