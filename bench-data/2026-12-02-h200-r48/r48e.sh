#!/bin/bash
# Call 5: the full-size OLMoE-1B-7B shape against transformers on main (3b58587; device code of da1a8fc,
# the decode GEMV's two FMA chains, which changed the sums' order): scripts/gpu-fullsize (hz-mkmodel,
# hz-pack, examples/decode at c64, then 32 greedy steps of hz_logits against transformers on the
# artifact's values). Carry build-r48/fs (release build of main: libhorizon, tools, examples/decode,
# hz_logits) and .devcarry/lib. Qwen's shape did not fit in this session's device time.
export PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
HZ_EXECUTORS=grouped timeout 250 bash scripts/gpu-fullsize build-r48/fs olmoe olmoe-1b-7b "64" > $OUT/fullsize-olmoe.txt 2>&1
echo "olmoe rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "^RESULT|^DECODE|tokens|rel|OK|FAIL" $OUT/fullsize-olmoe.txt | cut -c1-240 | tail -14
