#!/usr/bin/env bash
# Next session, call 1 (prepared in session 12): programmatic graph edge router GEMV -> side shared down
# (branch wip/side-pdl-edge; binaries in .devcarry/edge, rebuild them if the branch moved).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
timeout 40 .devcarry/edge/test_model_gpu > $OUT/tmg_edge.txt 2>&1; echo "test_model_gpu (edge) rc $?"; grep -E "FAIL|fallback" $OUT/tmg_edge.txt | head -5; tail -1 $OUT/tmg_edge.txt
HZ_GPU_SIDE_EDGE=0 timeout 40 .devcarry/edge/test_model_gpu > $OUT/tmg_edge0.txt 2>&1; echo "test_model_gpu (full edge) rc $?"; tail -1 $OUT/tmg_edge0.txt
HZ_GPU_SIDE_EDGE=2 timeout 40 .devcarry/edge/test_model_gpu > $OUT/tmg_edge2.txt 2>&1; echo "test_model_gpu (side PDL) rc $?"; grep -E "FAIL" $OUT/tmg_edge2.txt | head -3; tail -1 $OUT/tmg_edge2.txt; t
export HZ_BENCH_GRAPH_ONLY=1
HZ_BENCH_SWEEP=HZ_GPU_SIDE_EDGE=0,1,2,0,1,2 timeout 150 .devcarry/edge/bench_model_ops --step qwen 60 64 > $OUT/edge_qwen.txt 2>&1; echo "sweep rc $?"; grep -E "graph \+|HZ_|FAIL|rror|eager" $OUT/edge_qwen.txt; t
timeout 60 .devcarry/edge/bench_model_ops_tl --step qwen 60 64 > $OUT/tl_edge_qwen.txt 2>&1; echo "tl rc $?"; sed -n '/timeline over/,/graph + pdl  (graph)/p' $OUT/tl_edge_qwen.txt; t
