#!/bin/bash
# Prepared for the next session, not run (call A of two): the full-size Qwen1.5-MoE-A2.7B shape against
# transformers on main with the tensor-core attention tiles (build-r51/main: release build of main's
# code, mkcarry.sh plus examples/decode, tests/golden/hz_logits, test_golden_gpu), about 4-5 min.
# Carry build-r51 and .devcarry/lib. Call B: next_r51b.sh.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
HZ_EXECUTORS=grouped timeout 330 bash scripts/gpu-fullsize build-r51/main qwen2moe qwen1.5-moe-a2.7b "60" > $OUT/fullsize_qwen.txt 2>&1
echo "gpu-fullsize qwen rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^RESULT|PASS|FAIL" $OUT/fullsize_qwen.txt | tail -3
echo "done after $(( $(date +%s) - T0 )) s"
