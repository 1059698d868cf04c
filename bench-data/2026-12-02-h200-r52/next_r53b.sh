#!/bin/bash
# Prepared for the next session, not run: the two full-size checks against transformers that
# wip/attn-merge4 (attn_merge4.patch, build-r55/m4) needs before it can go to main (its tokens differ
# from main's). Carry build-r55 and .devcarry/lib; about 6-7 min.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s)
HZ_EXECUTORS=grouped timeout 200 bash scripts/gpu-fullsize build-r55/m4 olmoe olmoe-1b-7b "64" > $OUT/fullsize_olmoe.txt 2>&1
echo "gpu-fullsize olmoe (m4) rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^RESULT|PASS|FAIL" $OUT/fullsize_olmoe.txt | cut -c1-240
HZ_EXECUTORS=grouped timeout 330 bash scripts/gpu-fullsize build-r55/m4 qwen2moe qwen1.5-moe-a2.7b "60" > $OUT/fullsize_qwen.txt 2>&1
echo "gpu-fullsize qwen (m4) rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^RESULT|PASS|FAIL" $OUT/fullsize_qwen.txt | cut -c1-240
cd $OUT && for f in *.txt; do gzip $f; done
echo "done after $(( $(date +%s) - T0 )) s"
