#!/usr/bin/env bash
# Call 5 (wip/attn-groups, carry build-dev .devcarry): hz-bench with the attention in one group (main's
# kernel) and in two groups (HZ_ATTN_GROUPS=2, up to 4 chunks in one block), alternating: OLMoE c64,
# Qwen c60 (the contract's positions are 16..255).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
scripts/bench --build $B --models olmoe,qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { m=$1 c=$2 g=$3; echo "== hz-bench $m c$c groups=$g"; HZ_ATTN_GROUPS=$g timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb_${m}_$g.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb_${m}_$g.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for g in 1 2 1 2; do hb olmoe 64 $g; done; t
for g in 1 2 1 2; do hb qwen 60 $g; done; t
rm -rf $OUT/models
date
