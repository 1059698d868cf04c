#!/usr/bin/env bash
# Call 6: the next layer's q/k/v lines hinted into L2 by every thread of the fused expert kernel
# (prefetch.global.L2; wip/l2-next-lines, HZ_GPU_L2_NEXT: 1 after the gate_up bytes, 2 at the end, +4
# evict_last), OLMoE and Qwen steps.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
HZ_BENCH_GRAPH_ONLY=1 HZ_BENCH_SWEEP=HZ_GPU_L2_NEXT=0,1,5,2,0,1,5,2,0 timeout 200 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "HZ_GPU|graph\)|OK|FAIL"
HZ_BENCH_GRAPH_ONLY=1 HZ_BENCH_SWEEP=HZ_GPU_L2_NEXT=0,1,5,0,1,5 timeout 200 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "HZ_GPU|graph\)|OK|FAIL"
