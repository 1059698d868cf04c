#!/usr/bin/env bash
# Call 6 (wip/attn-groups a1dc9e7, carry build-dev .devcarry): the attention's group count by position
# (default) against one group everywhere (HZ_GPU_ATTN_GROUPS=0): steps alternating, then correctness
# (test_model_gpu with its new long-context runs, golden fixtures on cuda:0) and compute-sanitizer
# memcheck / racecheck of the long-context part (quick: 72 positions).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
step() { m=$1; shift; echo "== $m $*"; env "$@" HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror'; }
step "olmoe 64" HZ_GPU_ATTN_GROUPS=1
step "olmoe 64" HZ_GPU_ATTN_GROUPS=0
step "qwen 60" HZ_GPU_ATTN_GROUPS=1
step "qwen 60" HZ_GPU_ATTN_GROUPS=0
t
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/model_gpu.txt 2>&1; echo "test_model_gpu rc $?"
grep -E "long context|FAIL" $OUT/model_gpu.txt; tail -1 $OUT/model_gpu.txt; t
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden_gpu.txt 2>&1; echo "golden rc $?"; tail -2 $OUT/golden_gpu.txt; t
for tool in memcheck racecheck; do
  HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long timeout 170 compute-sanitizer --tool $tool --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/long_$tool.txt 2>&1
  echo "$tool rc $?"; grep -E "long context|FAIL" $OUT/long_$tool.txt | head -8; tail -2 $OUT/long_$tool.txt; t
done
date
