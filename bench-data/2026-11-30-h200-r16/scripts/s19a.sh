#!/usr/bin/env bash
# Seventeenth session, call 1: the sliced expert kernel (w4a16_sliced.cu). Correctness (test_gpu_w4a16,
# test_model_gpu), the layer bench (fused vs sliced vs read ceiling), the OLMoE step fused vs sliced.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT/r; mkdir -p $R
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
HZ_GPU_TEST_NO_FAULTS=1 timeout 200 $B/cuda/test_gpu_w4a16 > $R/tw.txt 2>&1; echo "test_gpu_w4a16 rc $?"; grep -E "FAIL|sliced|fused|^case|OK" $R/tw.txt | head -60; t
timeout 120 $B/cuda/bench_w4a16 200 olmoe > $R/bw.txt 2>&1; echo "bench_w4a16 rc $?"; grep -E "grouped\+pdl|fused|sliced|read-ceil|copy|HBM" $R/bw.txt; t
for i in 1 2; do
  for p in fused sliced; do
    echo "== step olmoe $p $i"; HZ_W4A16_PATH=$p HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | tail -4
  done
done; t
timeout 60 $B/tests/unit/model/test_model_gpu > $R/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -2 $R/tmg.txt; t
tar czf $OUT/r.tgz -C $OUT r; rm -rf $R; date
