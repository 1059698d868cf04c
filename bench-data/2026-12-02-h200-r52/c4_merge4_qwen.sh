#!/bin/bash
# Call 4: wip/attn-merge4 (attn_merge4.patch, build-r54/m4): the one-pass attention's merge of the 16 warps'
# partials by all 512 threads (4 per value at head_dim 128, each adding 4 warps, then a butterfly) instead
# of 128 threads adding 16 warps each; the clock probe put the merge and store at ~740 cycles. Sums in
# another order, so tokens may change. Against build-r54 (main at ead3fb0), then the Qwen c60 contract
# point on build-r54. Carry build-r54 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); N=build-r54
nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader
timeout 60 $N/m4/bench_model_ops --attention-check > $OUT/check_m4.txt 2>&1; echo "attention-check (m4) rc $?: $(grep -c ' ok$' $OUT/check_m4.txt) ok"
HZ_MODEL_GPU_QUICK=1 timeout 120 $N/m4/test_model_gpu > $OUT/model_m4.txt 2>&1; echo "test_model_gpu (m4, quick) rc $?: $(tail -1 $OUT/model_m4.txt)"
step() { echo "== step $1 $2"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 $2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
for r in 1 2; do step "olmoe 64 64" $N; step "olmoe 64 64" $N/m4; done
step "qwen 60 64" $N; step "qwen 60 64" $N/m4
left=$(( 560 - ($(date +%s) - T0) ))
timeout $left scripts/bench --build $N --work /tmp/hzw --models qwen --executors grouped --residencies 60 --blocks 1 \
  --steps models,ceilings,sweep,table,report --out $OUT/qwen > $OUT/bench_qwen.txt 2>&1
echo "scripts/bench qwen rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| grouped.*\| c60/" $OUT/qwen/benchmarks-section.md | head -1 | cut -c1-180
tar -czf $OUT/qwen.tgz -C $OUT qwen bench_qwen.txt && rm -rf $OUT/qwen $OUT/bench_qwen.txt
cd $OUT && tar -czf m4.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
