#!/usr/bin/env bash
# Call 2 (r22): main 93bec10, the full-size random-weight shapes against transformers (32 greedy steps,
# scripts/gpu-fullsize, grouped executor): Qwen first (last checked 2026-11-29), then OLMoE.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
HZ_EXECUTORS=grouped timeout 330 scripts/gpu-fullsize $B qwen2moe qwen1.5-moe-a2.7b "60" /tmp/fs-qwen > $OUT/fullsize_qwen.txt 2>&1; echo "fullsize qwen rc $?"
tail -22 $OUT/fullsize_qwen.txt; t
HZ_EXECUTORS=grouped timeout 200 scripts/gpu-fullsize $B olmoe olmoe-1b-7b "64" /tmp/fs-olmoe > $OUT/fullsize_olmoe.txt 2>&1; echo "fullsize olmoe rc $?"
tail -22 $OUT/fullsize_olmoe.txt; t
date
