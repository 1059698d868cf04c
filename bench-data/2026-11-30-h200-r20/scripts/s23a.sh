#!/usr/bin/env bash
# Call 1: the review 294d6c6 (compiled only last round) plus the clustered attention (working tree):
# GPU tests and golden with the default (clusters of 8), then the step with HZ_GPU_ATTN_CLUSTER
# 0 / 8 / 4 / 2 alternating (0 = the plain kernel of 294d6c6).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/chk
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/chk/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/chk/w4.txt
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E 'long context|FAIL' $OUT/chk/tmg.txt | cut -c1-200; tail -1 $OUT/chk/tmg.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/trc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/chk/trc.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/chk/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/chk/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/chk/golden.txt 2>&1; echo "golden rc $?"; tail -2 $OUT/chk/golden.txt; t
for c in 0 8 4 2 0 8; do
  echo "OLMoE HZ_GPU_ATTN_CLUSTER=$c"
  HZ_GPU_ATTN_CLUSTER=$c HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done; t
for c in 0 8 0 8; do
  echo "Qwen HZ_GPU_ATTN_CLUSTER=$c"
  HZ_GPU_ATTN_CLUSTER=$c HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
done; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
