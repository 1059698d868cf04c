#!/usr/bin/env bash
# Call 6: the two-pass gate_up kernel launched with programmatic dependent launch (HZ_W4A16_GU_PDL=0: without).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
echo "== test_gpu_w4a16"; HZ_GPU_TEST_NO_FAULTS=1 timeout 120 $B/cuda/test_gpu_w4a16 2>&1 | grep -E "FAIL|2pass|OK|passed|failures" | tail -6
echo "== test_model_gpu"; timeout 200 $B/tests/unit/model/test_model_gpu 2>&1 | grep -E "FAIL|model_gpu" | tail -4
for i in 1 2; do
  for v in 1 0; do
    echo "== olmoe GU_PDL=$v $i"; HZ_W4A16_GU_PDL=$v HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
  done
done
for v in 1 0; do
  echo "== layer GU_PDL=$v"; HZ_W4A16_GU_PDL=$v HZ_BENCH_EXECUTORS=grouped+pdl,grouped-2p+pdl,read-ceiling timeout 100 $B/cuda/bench_w4a16 200 olmoe 2>&1 | grep -E "graph .*us/layer"
done
