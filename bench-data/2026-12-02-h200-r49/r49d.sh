#!/bin/bash
# Call 4 of r49: as call 3, with bit 16 (the prediction's side stream joined once at the step's end,
# not before each layer's experts). Carry build-r49 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r49
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror|l2 predict' | head -4; }
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=23"
for r in 1 2; do
  step "olmoe 64 64" main ""
  step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=16"
  step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=19"
  step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=17"
  step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=27"
done
step "qwen 60 64" main ""
step "qwen 60 64" pred "HZ_GPU_L2_PREDICT=16"
step "qwen 60 64" pred "HZ_GPU_L2_PREDICT=19"
echo "done after $(( $(date +%s) - T0 )) s"
