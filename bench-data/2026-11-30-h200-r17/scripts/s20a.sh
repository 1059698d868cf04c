#!/usr/bin/env bash
# Call 1: GEMV rows staged in shared memory before the dependency wait (HZ_GPU_GEMV_STAGE).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== gemv checks"; timeout 150 $B/tests/unit/model/bench_model_ops 50 2>&1 | grep -E "^gemv|custom|staged|FAIL|^bench_model_ops"
for m in "olmoe 64 64" "qwen 60 64"; do
  echo "== step $m stage sweep"; HZ_BENCH_SWEEP=HZ_GPU_GEMV_STAGE=0,1,0,1 HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tests/unit/model/bench_model_ops --step $m 2>&1 | grep -E "HZ_GPU|graph\)|FAIL|hash"
done
echo "== test_model_gpu"; timeout 200 $B/tests/unit/model/test_model_gpu 2>&1 | tail -4
