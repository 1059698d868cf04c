#!/usr/bin/env bash
# Session 13, call 4: router rows alone (kept form), routing table copied to shared memory, router logits loaded in pairs
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
timeout 60 build-dev/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "FAIL|spread" $OUT/tmg.txt | head -5; tail -1 $OUT/tmg.txt
timeout 120 build-dev/tests/unit/model/test_prefill_gpu > $OUT/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 build-dev/tests/golden/test_golden_gpu build-dev/tools/hz-mkmodel build-dev/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/golden.txt; t
export HZ_BENCH_GRAPH_ONLY=1
B=build-dev/tests/unit/model/bench_model_ops
g() { grep -E "graph \+ pdl  \(graph\)|HZ_|FAIL|rror" "$1"; }
HZ_BENCH_SWEEP=HZ_GPU_TABLE_PRE=0,1,0,1 timeout 150 $B --step qwen 60 64 > $OUT/q_tp.txt 2>&1; echo "qwen table-pre sweep rc $?"; g $OUT/q_tp.txt; t
HZ_BENCH_SWEEP=HZ_GPU_LOGITS_PAIR=0,1,0,1 timeout 150 $B --step qwen 60 64 > $OUT/q_lp.txt 2>&1; echo "qwen logits-pair sweep rc $?"; g $OUT/q_lp.txt; t
HZ_BENCH_SWEEP=HZ_GPU_ROUTER_ALONE=0,1 timeout 150 $B --step qwen 60 64 > $OUT/q_ra.txt 2>&1; echo "qwen router-alone sweep rc $?"; g $OUT/q_ra.txt; t
timeout 90 .devcarry/tl/bench_model_ops --step qwen 60 64 > $OUT/tl_q.txt 2>&1; echo "tl qwen rc $?"; sed -n '/timeline over/,/graph + pdl  (graph)/p' $OUT/tl_q.txt; t
