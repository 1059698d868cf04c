#!/bin/bash
# Call 6 of r49: the two-pass gate_up kernel copies the tiles of the experts predicted for its slots
# before its dependency wait, and checks them against the routing after it (wip/l2-predict, bit 32;
# 48 = 32 | 16, the prediction's side stream joined at the step's end, no L2 pull). Carry build-r49
# and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r49
HZ_GPU_L2_PREDICT=48 HZ_MODEL_GPU_QUICK=1 timeout 100 $B/pred/test_model_gpu > $OUT/model_p48.txt 2>&1; echo "test_model_gpu p48 rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/model_p48.txt)"
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror|l2 predict' | head -4; }
step "olmoe 64 64" main ""
step "olmoe 64 64" pred ""
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=48"
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=16"
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=49"
step "olmoe 64 64" main ""
step "olmoe 64 64" pred ""
step "olmoe 64 64" pred "HZ_GPU_L2_PREDICT=48"
HZ_GPU_L2_PREDICT=48 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/predtl/bench_model_ops --step olmoe 64 64 > $OUT/tl_p48.txt 2>&1; echo "== timeline p48 rc $?"
grep -E 'graph \+ pdl  \(' $OUT/tl_p48.txt | head -1
grep -A40 'timeline over' $OUT/tl_p48.txt | grep -E '^    (qkv GEMV|attention|o GEMV|router|gate_up|down) ' | head -8
cd $OUT && tar -czf p48.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
