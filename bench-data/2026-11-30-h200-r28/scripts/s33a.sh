#!/usr/bin/env bash
# Next round, call 1 (carry build-dev, build-gl = slim copies of branch wip/gemv-l2's plain and timeline
# builds, .devcarry). Two knobs of the branch, both "ask L2 before the wait, copy after it":
#   HZ_GPU_GEMV_L2_ROWS=N: the decode GEMV hints each warp's first N rows into L2 before its wait instead of
#     loading the first row into registers (the q/k/v GEMV's x-build prologue took 2.4 us per block after
#     the wait, queued behind its 128 KB per SM of row loads);
#   HZ_W4A16_DN_L2=1: the down kernel asks L2 for its tiles before the wait and bulk-copies them after the
#     intermediate (whose copy took 2.1 us after the wait, behind 68 KB of tiles per block).
# The branch's down kernel is held at 64 registers (__maxnreg__; split 2 then spills 4 bytes, the timeline
# build's split 1 8 bytes) in both knob states, so compare knob states within the branch's build first.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
P=build-gl/plain
date
HZ_W4A16_DN_L2=1 HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $P/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 dn_l2 rc $?"; tail -1 $OUT/w4.txt
for i in 1 2; do for v in "0 0" "1 0" "0 1" "1 1" "2 1"; do set -- $v
  echo "== olmoe step l2 rows $1 dn_l2 $2"; HZ_GPU_GEMV_L2_ROWS=$1 HZ_W4A16_DN_L2=$2 HZ_BENCH_GRAPH_ONLY=1 timeout 120 $P/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
echo "== main"; HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-dev/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'
for n in 0 1; do
  echo "== qwen step l2 rows $n"; HZ_GPU_GEMV_L2_ROWS=$n HZ_BENCH_GRAPH_ONLY=1 timeout 150 $P/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph|FAIL'
done
for v in "0 0" "1 1"; do set -- $v
  echo "== timeline l2 rows $1 dn_l2 $2"; HZ_GPU_GEMV_L2_ROWS=$1 HZ_W4A16_DN_L2=$2 HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-gl/tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_$1$2.txt 2>&1; echo "rc $?"; sed -n '/timeline over/,$p' $OUT/tl_$1$2.txt
done
HZ_GPU_GEMV_L2_ROWS=1 HZ_W4A16_DN_L2=1 HZ_MODEL_GPU_PARTS=run timeout 150 $P/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu both rc $?"; tail -1 $OUT/mg.txt
date
# bf3f2a7's raise_smem_limits loop (host code) on the GPU: main's kernel test and model test
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 build-dev/cuda/test_gpu_w4a16 > $OUT/w4main.txt 2>&1; echo "main test_gpu_w4a16 rc $?"; tail -1 $OUT/w4main.txt
HZ_MODEL_GPU_PARTS=run timeout 150 build-dev/tests/unit/model/test_model_gpu > $OUT/mgmain.txt 2>&1; echo "main test_model_gpu rc $?"; tail -1 $OUT/mgmain.txt
date
