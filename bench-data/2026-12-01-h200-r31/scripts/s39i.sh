#!/usr/bin/env bash
# Call 11 (carry build-dev = main, build-exp/sp = wip/gemv-ef: the decode GEMV's rows loaded with an L2
# evict-first policy): hz-bench OLMoE c64, main and the branch alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev; S=build-exp/sp
ln -sf libhorizon.so.0.1.0 $S/libhorizon.so.0
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
M=/tmp/hz-bench-work/olmoe.hzq
hb() { d=$1; echo "== hz-bench olmoe c64 $d"; timeout 100 $d/tools/hz-bench $M --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2; do hb $B; hb $S; done; t
rm -rf $OUT/models $OUT/hb.json
date
