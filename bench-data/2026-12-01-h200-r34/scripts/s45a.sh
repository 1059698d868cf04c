#!/usr/bin/env bash
# Session 35, call 2: the full-size random-weight shapes against transformers on main (9ecc76c, code of
# dc6ae47), the first time since the twenty-second round (the router's ranking, the two-group attention
# and the split down kernel came after it). Carry ["build-dev", ".devcarry"]. About 7 minutes.
set -u
export PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_EXECUTORS=grouped timeout 250 bash scripts/gpu-fullsize build-dev olmoe olmoe-1b-7b "64 30" > $OUT/fullsize-olmoe.txt 2>&1
echo "olmoe rc $?"; grep -E "^RESULT|^DECODE|tokens|rel" $OUT/fullsize-olmoe.txt | cut -c1-240 | tail -12; t
HZ_EXECUTORS=grouped timeout 300 bash scripts/gpu-fullsize build-dev qwen2moe qwen1.5-moe-a2.7b "60 30" > $OUT/fullsize-qwen2moe.txt 2>&1
echo "qwen rc $?"; grep -E "^RESULT|^DECODE|tokens|rel" $OUT/fullsize-qwen2moe.txt | cut -c1-240 | tail -12; t
date
