#!/usr/bin/env bash
# Next session, call 1 (prepared 2026-11-30, session 13): o GEMV -> router GEMV through tagged words
# (branch wip/o-tags; binaries in .devcarry/otags built from it; rebuild them if the branch moved).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
timeout 60 .devcarry/otags/test_model_gpu > $OUT/tmg_otags.txt 2>&1; echo "test_model_gpu (o tags) rc $?"; grep -E "FAIL|without tags" $OUT/tmg_otags.txt | head -5; tail -1 $OUT/tmg_otags.txt; t
export HZ_BENCH_GRAPH_ONLY=1
g() { grep -E "graph \+ pdl  \(graph\)|HZ_|FAIL|rror" "$1"; }
timeout 90 build-dev/tests/unit/model/bench_model_ops --step qwen 60 64 > $OUT/q_main.txt 2>&1; echo "qwen main rc $?"; g $OUT/q_main.txt; t
HZ_BENCH_SWEEP=HZ_GPU_O_TAGS=0,1,0,1 timeout 150 .devcarry/otags/bench_model_ops --step qwen 60 64 > $OUT/q_otags.txt 2>&1; echo "qwen o-tags sweep rc $?"; g $OUT/q_otags.txt; t
timeout 60 build-dev/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/o_main.txt 2>&1; echo "olmoe main rc $?"; g $OUT/o_main.txt; t
HZ_BENCH_SWEEP=HZ_GPU_O_TAGS=0,1,0,1 timeout 150 .devcarry/otags/bench_model_ops --step olmoe 64 64 > $OUT/o_otags.txt 2>&1; echo "olmoe o-tags sweep rc $?"; g $OUT/o_otags.txt; t
