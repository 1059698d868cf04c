#!/usr/bin/env bash
# Call 1 (main aaec033: the review commit, compiled only last session): GPU tests, OLMoE/Qwen step,
# then the full-size OLMoE shape against transformers (two-pass expert kernels).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; git log --oneline -1 2>/dev/null
mkdir -p $OUT/chk
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/chk/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/chk/w4.txt
timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/chk/tmg.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/chk/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/chk/tpg.txt; t
for m in "olmoe 64" "qwen 60"; do
  HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m 64 2>&1 | grep -E "graph\)|FAIL"
done; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
HZ_EXECUTORS=grouped timeout 300 scripts/gpu-fullsize $B olmoe olmoe-1b-7b "64" > $OUT/fullsize_olmoe.txt 2>&1; echo "fullsize olmoe rc $?"
tail -25 $OUT/fullsize_olmoe.txt; t
date
