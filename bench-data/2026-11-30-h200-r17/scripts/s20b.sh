#!/usr/bin/env bash
# Call 2: which GEMVs stage (HZ_GPU_GEMV_STAGE mask: 1 q/k/v, 2 router GEMV, 4 lm_head).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for m in "olmoe 64 64" "qwen 60 64"; do
  echo "== step $m stage sweep"; HZ_BENCH_SWEEP=HZ_GPU_GEMV_STAGE=0,4,2,6,0,4,6 HZ_BENCH_GRAPH_ONLY=1 timeout 250 $B/tests/unit/model/bench_model_ops --step $m 2>&1 | grep -E "HZ_GPU|graph\)|FAIL|hash"
done
