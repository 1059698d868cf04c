#!/usr/bin/env bash
# Session 27 call 1: df7a914 checks on the GPU, then wip/qkv-flags A/B (build-qf).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== main test_model_gpu run part"
HZ_MODEL_GPU_PARTS=run timeout 150 build-dev/tests/unit/model/test_model_gpu > $OUT/mg_main.txt 2>&1; echo "rc $?"; grep -c FAIL $OUT/mg_main.txt
echo "== main test_decode_args"; timeout 30 build-dev/tests/unit/model/test_decode_args 2>&1 | tail -2
f=0; for i in $(seq 1 10); do HZ_TEST_DEVICE=cuda:0 timeout 40 build-dev/tests/unit/model/test_model_sessions_threads > /tmp/t.txt 2>&1 || { f=$((f+1)); grep -E "session|FAILED  \]|rror" /tmp/t.txt | head -4 | cut -c1-300; }; done; echo "threads: $f failed of 10"
B=build-qf
for i in 1 2; do for f in 1 0; do
  echo "== HZ_GPU_QKV_FLAGS=$f"; HZ_GPU_QKV_FLAGS=$f HZ_BENCH_GRAPH_ONLY=1 timeout 120 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | tail -4
done; done
echo "== main step"; HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-dev/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | tail -4
HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg_qf.txt 2>&1; echo "qf test_model_gpu rc $?"; grep FAIL $OUT/mg_qf.txt | head
timeout 30 $B/tests/unit/model/test_decode_args 2>&1 | tail -2
date
