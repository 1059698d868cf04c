#!/usr/bin/env bash
# Session 28 call 1: weights evict-first in L2 (branch wip/l2-stream, build-l2s / build-l2ts slim copies)
# against main (build-dev / build-x): kernel test, OLMoE and Qwen step alternating, the timeline, the layer.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 build-l2s/cuda/test_gpu_w4a16 > $OUT/w4_l2.txt 2>&1; echo "l2 test_gpu_w4a16 rc $?"; tail -1 $OUT/w4_l2.txt
for i in 1 2 3; do for b in build-dev build-l2s; do
  echo "== olmoe step $b"; HZ_BENCH_GRAPH_ONLY=1 timeout 120 $b/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
for i in 1 2; do for b in build-dev build-l2s; do
  echo "== qwen step $b"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 $b/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph|FAIL'
done; done
for b in build-x build-l2ts; do
  echo "== timeline $b"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 $b/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_$b.txt 2>&1; echo "rc $?"; sed -n '/timeline over/,$p' $OUT/tl_$b.txt
done
for b in build-dev build-l2s build-dev build-l2s; do
  echo "== layer $b"; timeout 60 $b/cuda/bench_w4a16 200 olmoe 2>&1 | grep -E 'grouped|ceiling' | head -6
done
echo "== l2 test_model_gpu"; HZ_MODEL_GPU_PARTS=run timeout 150 build-l2s/tests/unit/model/test_model_gpu > $OUT/mg_l2.txt 2>&1; echo "rc $?"; grep FAIL $OUT/mg_l2.txt | head
date
