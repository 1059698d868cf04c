#!/usr/bin/env bash
# Call 4: sliced kernel v2 (down scales staged by cp.async, reduction in one round trip): correctness,
# layer bench with knobs, OLMoE step fused vs sliced.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
HZ_GPU_TEST_NO_FAULTS=1 timeout 200 $B/cuda/test_gpu_w4a16 > $OUT/tw.txt 2>&1; echo "test_gpu_w4a16 rc $?"; grep -E "FAIL|sliced|^OK" $OUT/tw.txt | head -30
run() { echo "== $*"; env "$@" HZ_BENCH_EXECUTORS=grouped-fused+pdl,grouped-sliced+pdl,read-ceiling timeout 60 $B/cuda/bench_w4a16 200 olmoe 2>&1 | grep -E "^olmoe  "; }
for r in 1 2; do for d in 0 2 8 4 16; do run HZ_SLICED_DBG=$d; done; done
for i in 1 2; do
  for p in fused sliced; do
    echo "== step olmoe $p $i"; HZ_W4A16_PATH=$p HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep "(graph)"
  done
done
timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/tmg.txt
