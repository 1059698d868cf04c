#!/usr/bin/env bash
# Session 27 call 4: the two-pass down kernel with each expert's K split over two warps
# (HZ_W4A16_DN_SPLIT), beside the gate_up split (HZ_W4A16_GU_SPLIT): kernel tests, layer, step.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
for cfg in "2 2" "1 1"; do set -- $cfg
  echo "== test_gpu_w4a16 gu $1 dn $2"; HZ_W4A16_GU_SPLIT=$1 HZ_W4A16_DN_SPLIT=$2 timeout 200 $B/cuda/test_gpu_w4a16 > $OUT/w4_$1$2.txt 2>&1; echo "rc $?"; grep -E '2pass|FAIL' $OUT/w4_$1$2.txt | head -4
done
for cfg in "2 1" "2 2"; do set -- $cfg
  echo "== layer gu $1 dn $2"; HZ_W4A16_GU_SPLIT=$1 HZ_W4A16_DN_SPLIT=$2 HZ_BENCH_EXECUTORS=grouped-2p+pdl,grouped:down,read-ceiling timeout 120 $B/cuda/bench_w4a16 200 olmoe 2>&1 | grep -E '^olmoe'
done
for i in 1 2 3; do for cfg in "2 1" "2 2" "1 2"; do set -- $cfg
  echo "== step gu $1 dn $2"; HZ_W4A16_GU_SPLIT=$1 HZ_W4A16_DN_SPLIT=$2 HZ_BENCH_GRAPH_ONLY=1 timeout 120 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
echo "== test_model_gpu"; HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "rc $?"; grep FAIL $OUT/mg.txt | head
date
