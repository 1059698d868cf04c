#!/usr/bin/env bash
# Call 6: the two-pass gate_up kernel with each warp's tile asked for in K parts, part 0 of every warp
# first (working tree, default 4 parts; HZ_W4A16_GU_PARTS=1 is main's whole-tile copies). Kernel test
# with 4 and 2 parts, test_model_gpu, then the OLMoE step alternating 1 / 4 (and 2 once), then the
# layer alone (bench_w4a16).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for v in 4 2; do
  HZ_W4A16_GU_PARTS=$v HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4_p$v.txt 2>&1; echo "test_gpu_w4a16 parts $v rc $?"; tail -1 $OUT/w4_p$v.txt
done
timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/tmg.txt; t
for v in 1 4 1 4 2; do
  echo "== OLMoE step HZ_W4A16_GU_PARTS=$v"
  HZ_W4A16_GU_PARTS=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; t
for v in 1 4 2; do
  echo "== layer HZ_W4A16_GU_PARTS=$v"
  HZ_W4A16_GU_PARTS=$v HZ_BENCH_EXECUTORS=grouped-2p+pdl,grouped:gate_up timeout 60 $B/cuda/bench_w4a16 200 olmoe 2>&1 | grep -E "graph .*us/layer"
done; t
date
