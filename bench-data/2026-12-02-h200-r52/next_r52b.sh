#!/bin/bash
# Prepared for the next session, not run: wip/qk-ssq (qk_ssq.patch, build-r53/ssq) against main (build-r53/main).
# The q/k/v GEMV stores per-block sums of squares of q's and k's FP16 outputs (hz_dgemv_args.ssq), and the
# attention adds those (2 KB at OLMoE's shape) instead of reading all of q and k (8.4 KB) after its wait;
# this round's probe bounds that read at about 0.006 ms per step. HZ_GPU_QK_SSQ=0 restores the old read in
# the same binary. Tokens change (the sums' order), so test_model_gpu against the CPU path decides
# correctness. build-r53/both: wip/attn-both (this branch with wip/attn-prologue cherry-picked). Carry
# build-r53 and .devcarry/lib; ~5 min.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
timeout 60 build-r53/ssq/test_decode_gemv > $OUT/gemv_ssq.txt 2>&1; echo "test_decode_gemv (ssq) rc $?: $(tail -1 $OUT/gemv_ssq.txt)"; grep -E "sums of squares|FAIL" $OUT/gemv_ssq.txt | head -5
HZ_MODEL_GPU_QUICK=1 timeout 120 build-r53/ssq/test_model_gpu > $OUT/model_ssq.txt 2>&1; echo "test_model_gpu (ssq, quick) rc $?: $(tail -1 $OUT/model_ssq.txt)"
grep -E "long context|FAIL" $OUT/model_ssq.txt | head -6
step() { echo "== step $1 $2 ${3:-}"; env ${3:-HZ_X=} HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-r53/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
HZ_MODEL_GPU_QUICK=1 timeout 120 build-r53/both/test_model_gpu > $OUT/model_both.txt 2>&1; echo "test_model_gpu (both, quick) rc $?: $(tail -1 $OUT/model_both.txt)"
for r in 1 2; do step "olmoe 64 64" main; step "olmoe 64 64" ssq HZ_GPU_QK_SSQ=1; step "olmoe 64 64" ssq HZ_GPU_QK_SSQ=0; step "olmoe 64 64" both; done
step "qwen 60 64" main; step "qwen 60 64" ssq
cd $OUT && tar -czf r52b.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
# If OLMoE gains: the full test_model_gpu, memcheck/racecheck of test_decode_gemv and the long part,
# gpu-fullsize OLMoE, then the contract; with wip/attn-prologue too if both win (they touch different
# phases of the attention: the read after the wait and the phases after the norm).
