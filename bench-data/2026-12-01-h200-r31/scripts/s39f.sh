#!/usr/bin/env bash
# Call 8 (carry as call 7, build-exp/sp now with the probe knob HZ_GEMV_SPEC: which launches take the
# specialised GEMV kernels; 0 = none, as main): hz-bench OLMoE c64 per setting, twice.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev; S=build-exp/sp
ln -sf libhorizon.so.0.1.0 $S/libhorizon.so.0
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
M=/tmp/hz-bench-work/olmoe.hzq
hb() { d=$1 sp=$2 i=$3; echo "== hz-bench olmoe c64 $d spec=$sp"; HZ_GEMV_SPEC=$sp timeout 100 $d/tools/hz-bench $M --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_$(basename $d)_${sp}_$i.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb_$(basename $d)_${sp}_$i.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2; do hb $B 0 $i; for sp in 0 1 2 4; do hb $S $sp $i; done; done; t
rm -rf $OUT/models
date
