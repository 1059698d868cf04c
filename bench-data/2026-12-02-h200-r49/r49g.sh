#!/bin/bash
# Call 7 of r49: bit 64, the router cluster releasing the expert kernels once x is built rather than right
# after its wait, so that the guessed tiles' copies (bit 32) do not queue ahead of the router's x reads.
# Carry build-r49 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r49
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror|l2 predict' | head -4; }
step "olmoe 64 64" pred ""
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=48"
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=112"
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=80"
echo "done after $(( $(date +%s) - T0 )) s"
