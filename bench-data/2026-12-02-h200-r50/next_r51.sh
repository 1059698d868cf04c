#!/bin/bash
# Prepared for the next session, not run: (1) the full-size Qwen1.5-MoE-A2.7B shape against transformers
# on main with the tensor-core attention tiles (build-r51/main: release build of main's code, mkcarry.sh
# plus examples/decode, tests/golden/hz_logits, test_golden_gpu); (2) where the one-pass attention's
# 1.5 us of tiles go: clock64 stamps in block 0 (wip/attn-clock, build-r51/clk), attention alone
# (bench_model_ops 3) and in the OLMoE step. Carry build-r51 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
HZ_EXECUTORS=grouped timeout 330 bash scripts/gpu-fullsize build-r51/main qwen2moe qwen1.5-moe-a2.7b "60" > $OUT/fullsize_qwen.txt 2>&1
echo "gpu-fullsize qwen rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^RESULT|PASS|FAIL" $OUT/fullsize_qwen.txt | tail -3
echo "ACLK columns: pos | qkv read | norm+rope+copies | row pos+barrier | q pack | scores | softmax | values | to merge barrier | merge+store (cycles)"
summ() { grep '^ACLK' $1 | awk -v w="$2" 'w == "" || ($2 >= w && $2 < w + 100) {for(i=3;i<=NF;i++) s[i]+=$i; n++} END {printf "mean"; for(i=3;i<=11;i++) printf " %d", s[i]/n; printf "  (n %d)\n", n}'; }
timeout 120 build-r51/clk/bench_model_ops 3 > $OUT/aclk_alone.txt 2>&1; echo "alone rc $?"
for w in 0 100 200; do echo -n "alone pos $w-$((w+99)): "; summ $OUT/aclk_alone.txt $w; done
HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-r51/clk/bench_model_ops --step olmoe 64 16 > $OUT/aclk_step.txt 2>&1; echo "step rc $?"
for w in 0 100 200; do echo -n "step pos $w-$((w+99)): "; summ $OUT/aclk_step.txt $w; done
cd $OUT && grep -v '^ACLK' aclk_alone.txt > alone_rest.txt; grep -v '^ACLK' aclk_step.txt > step_rest.txt
grep '^ACLK' aclk_step.txt | head -20000 > aclk_step_lines.txt; grep '^ACLK' aclk_alone.txt | head -20000 > aclk_alone_lines.txt
rm aclk_alone.txt aclk_step.txt; tar -czf r51a.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
