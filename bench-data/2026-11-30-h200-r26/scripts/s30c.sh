#!/usr/bin/env bash
# Session 27 call 3: the two-pass gate_up kernel with each tile's K split over two warps
# (HZ_W4A16_GU_SPLIT=2) against the tree's kernel (1): test_gpu_w4a16, the layer alone, the OLMoE step
# alternating, test_model_gpu run part.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
echo "== test_gpu_w4a16 split 2"; HZ_W4A16_GU_SPLIT=2 timeout 200 $B/cuda/test_gpu_w4a16 > $OUT/w4_split2.txt 2>&1; echo "rc $?"; grep -E '2pass|FAIL|PASS|passed' $OUT/w4_split2.txt | tail -12
for sp in 1 2 1 2; do
  echo "== layer split $sp"; HZ_W4A16_GU_SPLIT=$sp HZ_BENCH_EXECUTORS=grouped-2p+pdl,grouped+pdl,read-ceiling,grouped:gate_up timeout 120 $B/cuda/bench_w4a16 200 olmoe 2>&1 | grep -vE '^\s*$' | tail -8
done
for i in 1 2 3; do for sp in 1 2; do
  echo "== step split $sp"; HZ_W4A16_GU_SPLIT=$sp HZ_BENCH_GRAPH_ONLY=1 timeout 120 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
echo "== test_model_gpu split 2"; HZ_W4A16_GU_SPLIT=2 HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg_split2.txt 2>&1; echo "rc $?"; grep FAIL $OUT/mg_split2.txt | head
date
