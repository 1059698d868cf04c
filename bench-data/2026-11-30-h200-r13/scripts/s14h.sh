#!/usr/bin/env bash
# Session 13, call 8: the final code on the GPU (env_on refactor, comments, hz-bench prefetch settle)
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
git log --oneline -1 2>/dev/null
timeout 60 build-dev/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "FAIL" $OUT/tmg.txt | head -5; tail -1 $OUT/tmg.txt
timeout 120 build-dev/tests/unit/model/test_prefill_gpu > $OUT/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 build-dev/tests/golden/test_golden_gpu build-dev/tools/hz-mkmodel build-dev/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/golden.txt; t
export HZ_BENCH_GRAPH_ONLY=1
B=build-dev/tests/unit/model/bench_model_ops
timeout 90 $B --step qwen 60 64 > $OUT/q.txt 2>&1; echo "qwen rc $?"; grep -E "graph \+ pdl  \(graph\)|FAIL" $OUT/q.txt; t
timeout 60 $B --step olmoe 64 64 > $OUT/o.txt 2>&1; echo "olmoe rc $?"; grep -E "graph \+ pdl  \(graph\)|FAIL" $OUT/o.txt; t
