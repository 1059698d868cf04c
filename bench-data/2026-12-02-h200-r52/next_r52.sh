#!/bin/bash
# Prepared for the next session, not run: wip/attn-prologue (attn_prologue.patch, build-r53/pro) against main
# (build-r53/main = build-dev at c45d6a5). The one-pass attention's tensor-core path writes row pos (k from the
# norm pass, v by idle lanes) and q's FP16 copy before the barrier that ends the norm phase, and clears the
# value rows after pos before the dependency wait: the "row pos + barrier" (~370 cycles) and "q pack" (~600)
# phases of this round's clock probe go. Same shared-memory contents, so the same bits: the step's tokens
# must stay 7a8cd25385f7bdcb (OLMoE) and d481f2c58d6dcd31 (Qwen). Carry build-r53 and .devcarry/lib; ~3 min.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader
timeout 60 build-r53/pro/bench_model_ops --attention-check > $OUT/check_pro.txt 2>&1; echo "attention-check (pro) rc $?: $(grep -c ' ok$' $OUT/check_pro.txt) ok"
HZ_MODEL_GPU_QUICK=1 timeout 120 build-r53/pro/test_model_gpu > $OUT/model_pro.txt 2>&1; echo "test_model_gpu (pro, quick) rc $?: $(tail -1 $OUT/model_pro.txt)"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 build-r53/pro/bench_model_ops --attention-check > $OUT/rc_pro.txt 2>&1
echo "racecheck --attention-check (pro) rc $?: $(grep SUMMARY $OUT/rc_pro.txt)"
step() { echo "== step $1 $2"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-r53/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
for r in 1 2; do step "olmoe 64 64" main; step "olmoe 64 64" pro; done
step "qwen 60 64" main; step "qwen 60 64" pro
cd $OUT && tar -czf r52a.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
# If it wins: cherry-pick 0e75eb5 onto main, the full test_model_gpu, the contract (scripts/bench OLMoE c64,
# Qwen c60), then the doc. If the step does not move, the phases were not on the path: drop it.
