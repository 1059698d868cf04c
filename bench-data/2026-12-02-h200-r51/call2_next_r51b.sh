#!/bin/bash
# Prepared for the next session, not run (call B of two): (1) wip/attn-merge-n (attn_merge_n.patch,
# build-r51/merge): the one-pass attention merges only the warps that had a tile, the same bits, so the
# step's tokens must stay main's (7a8cd25385f7bdcb); (2) where the one-pass attention's 1.5 us of tiles
# go: clock64 stamps in block 0 (wip/attn-clock, attn_clock.patch, build-r51/clk), attention alone
# (bench_model_ops 3) and in the OLMoE step. Carry build-r51 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
HZ_MODEL_GPU_QUICK=1 timeout 100 build-r51/merge/test_model_gpu > $OUT/model_merge.txt 2>&1; echo "test_model_gpu (merge, quick) rc $?: $(tail -1 $OUT/model_merge.txt)"
step() { echo "== step $1 $2"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 $2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
for r in 1 2; do step "olmoe 64 64" build-r51/main; step "olmoe 64 64" build-r51/merge; done
step "qwen 60 64" build-r51/main; step "qwen 60 64" build-r51/merge
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
