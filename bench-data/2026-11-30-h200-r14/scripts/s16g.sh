#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "FAIL|OK" $OUT/tmg.txt | tail -3
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/golden.txt
g() { grep -E "graph \+ pdl  \(graph\)|HZ_|FAIL|rror" "$1"; }
HZ_BENCH_GRAPH_ONLY=1 HZ_BENCH_SWEEP=HZ_GPU_X_SHARE=0,1,0,1 timeout 150 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/o_x.txt 2>&1; echo "olmoe x sweep rc $?"; g $OUT/o_x.txt
HZ_BENCH_GRAPH_ONLY=1 HZ_BENCH_SWEEP=HZ_GPU_X_SHARE=0,1 timeout 120 $B/tests/unit/model/bench_model_ops --step qwen 60 64 > $OUT/q_x.txt 2>&1; echo "qwen x sweep rc $?"; g $OUT/q_x.txt
timeout 90 .devcarry/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_o.txt 2>&1; echo "tl olmoe rc $?"; sed -n '/timeline over/,/graph + pdl  (graph)/p' $OUT/tl_o.txt | head -30
date
