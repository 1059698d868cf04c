#!/usr/bin/env bash
# Session 33, call 6: as call 5 (s41c.sh), on Qwen c60, once: m0, dr split 1, dr split 2, union.
# carve-probe with the two-pass union; build-exp/dr = wip/dn-regs: main with the split-1 down kernel's
# bounds at one block per SM (71 registers instead of 64)). hz-bench OLMoE c64 alternating, twice.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
for d in build-exp/cp build-exp/m0 build-exp/dr; do ln -sf libhorizon.so.0.1.0 $d/libhorizon.so.0; done
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
scripts/bench --build build-dev --models qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; shift 3; echo "== hz-bench $m c$c $d $*"; env "$@" timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
hb build-exp/m0 qwen 60 X=0
hb build-exp/dr qwen 60 X=0
hb build-exp/dr qwen 60 HZ_W4A16_DN_SPLIT=2
t
rm -rf $OUT/models $OUT/hb.json
date
