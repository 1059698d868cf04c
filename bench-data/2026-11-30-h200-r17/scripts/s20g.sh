#!/usr/bin/env bash
# Call 7: the two-pass gate_up kernel's tile copied in two halves along K (HZ_W4A16_GU_STAGES=2) against one piece.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for v in 2 1; do
  echo "== test_gpu_w4a16 stages $v"; HZ_W4A16_GU_STAGES=$v HZ_GPU_TEST_NO_FAULTS=1 timeout 120 $B/cuda/test_gpu_w4a16 2>&1 | grep -E "FAIL|failures" | tail -3
done
echo "== test_model_gpu stages 2"; HZ_W4A16_GU_STAGES=2 timeout 200 $B/tests/unit/model/test_model_gpu 2>&1 | grep -E "FAIL|model_gpu: OK" | tail -4
for v in 2 1; do
  echo "== layer stages $v"; HZ_W4A16_GU_STAGES=$v HZ_BENCH_EXECUTORS=grouped-2p+pdl,grouped:gate_up,read:g_u timeout 100 $B/cuda/bench_w4a16 200 olmoe 2>&1 | grep -E "graph .*us/layer"
done
for i in 1 2; do
  for v in 2 1; do
    echo "== olmoe stages $v $i"; HZ_W4A16_GU_STAGES=$v HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
  done
done
