#!/bin/bash
# Call 2 of r49: the full-size Qwen1.5-MoE-A2.7B shape against transformers on main (eeacde3's library
# code = da1a8fc's, the GEMV's two chains), c60, grouped. Carry build-r48 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s)
HZ_EXECUTORS=grouped timeout 420 bash scripts/gpu-fullsize build-r48/fs qwen2moe qwen1.5-moe-a2.7b "60" > $OUT/fullsize_qwen.txt 2>&1
echo "gpu-fullsize qwen rc $? after $(( $(date +%s) - T0 )) s"
tail -25 $OUT/fullsize_qwen.txt
