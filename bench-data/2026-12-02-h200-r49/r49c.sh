#!/bin/bash
# Call 3 of r49: the layer's experts predicted from its input residual and asked of L2 while attention,
# o and the router run (wip/l2-predict, HZ_GPU_L2_PREDICT bits: 1 gate/up, 2 down, 4 score, 8
# programmatic fork). build-r49/pred = that branch, build-r49/main = main's device code.
# Carry build-r49 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r49
HZ_GPU_L2_PREDICT=3 HZ_MODEL_GPU_QUICK=1 timeout 100 $B/pred/test_model_gpu > $OUT/model_pred.txt 2>&1; echo "test_model_gpu pred=3 rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/model_pred.txt)"
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror|l2 predict' | head -4; }
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=7"
step "qwen 60 64" pred "HZ_GPU_L2_PREDICT=7"
for r in 1 2; do
  step "olmoe 64 64" main ""
  step "olmoe 64 64" pred ""
  step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=3"
  step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=1"
  step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=11"
done
step "qwen 60 64" main ""
step "qwen 60 64" pred "HZ_GPU_L2_PREDICT=3"
cd $OUT && tar -czf pred.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
