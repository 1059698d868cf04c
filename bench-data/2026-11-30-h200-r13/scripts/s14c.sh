#!/usr/bin/env bash
# Session 13, call 3: v2 of the same (no spills in the plain GEMV: router warps with one row, norm weights prefetched into L1)
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
timeout 60 build-dev/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "FAIL" $OUT/tmg.txt | head -5; tail -1 $OUT/tmg.txt
export HZ_BENCH_GRAPH_ONLY=1
B=build-dev/tests/unit/model/bench_model_ops
g() { grep -E "graph \+ pdl  \(graph\)|HZ_|FAIL|rror" "$1"; }
timeout 60 .devcarry/edge/bench_model_ops --step qwen 60 64 > $OUT/q_base.txt 2>&1; echo "qwen base (edge binary) rc $?"; g $OUT/q_base.txt; t
HZ_GPU_NORM_EARLY=0 HZ_BENCH_SWEEP=HZ_GPU_ROUTE_FIRST=0,1,0,1 timeout 150 $B --step qwen 60 64 > $OUT/q_rf.txt 2>&1; echo "qwen route-first sweep (norm early 0) rc $?"; g $OUT/q_rf.txt; t
HZ_GPU_ROUTE_FIRST=1 HZ_BENCH_SWEEP=HZ_GPU_NORM_EARLY=0,1,0,1 timeout 150 $B --step qwen 60 64 > $OUT/q_ne.txt 2>&1; echo "qwen norm-early sweep (route first 1) rc $?"; g $OUT/q_ne.txt; t
timeout 60 .devcarry/edge/bench_model_ops --step olmoe 64 64 > $OUT/o_base.txt 2>&1; echo "olmoe base (edge binary) rc $?"; g $OUT/o_base.txt; t
HZ_BENCH_SWEEP=HZ_GPU_NORM_EARLY=0,1,0,1 timeout 150 $B --step olmoe 64 64 > $OUT/o_ne.txt 2>&1; echo "olmoe norm-early sweep rc $?"; g $OUT/o_ne.txt; t
timeout 90 .devcarry/tl/bench_model_ops --step qwen 60 64 > $OUT/tl_q.txt 2>&1; echo "tl qwen rc $?"; sed -n '/timeline over/,/graph + pdl  (graph)/p' $OUT/tl_q.txt; t
