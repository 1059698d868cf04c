#!/usr/bin/env bash
# Call 11: the fused expert kernel with at most W of its 4 gate_up copy stages requested ahead of its math
# (wip/copy-window, HZ_FUSED_WINDOW=W; 4 = the tree's order), so that other kernels' loads on its SMs wait
# behind fewer bytes. Correctness, layer bench, OLMoE and Qwen steps.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for w in 2 3; do HZ_FUSED_WINDOW=$w HZ_GPU_TEST_NO_FAULTS=1 timeout 120 $B/cuda/test_gpu_w4a16 > $OUT/tw$w.txt 2>&1; echo "test_gpu_w4a16 W=$w rc $?"; tail -1 $OUT/tw$w.txt; done
for w in 4 2 3 4 2 3; do echo "== W=$w"; HZ_FUSED_WINDOW=$w HZ_BENCH_EXECUTORS=grouped+pdl,read-ceiling timeout 60 $B/cuda/bench_w4a16 200 2>&1 | grep -E "^(olmoe|qwen)  "; done
HZ_BENCH_GRAPH_ONLY=1 HZ_BENCH_SWEEP=HZ_FUSED_WINDOW=4,2,3,4,2,3 timeout 200 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "HZ_FUSED|graph\)|OK|FAIL"
HZ_BENCH_GRAPH_ONLY=1 HZ_BENCH_SWEEP=HZ_FUSED_WINDOW=4,2,3,4,2,3 timeout 200 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "HZ_FUSED|graph\)|OK|FAIL"
HZ_FUSED_WINDOW=2 timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu W=2 rc $?"; tail -1 $OUT/tmg.txt
