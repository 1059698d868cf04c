#!/usr/bin/env bash
# Session 33, call 3 (carry: build-dev = main with the per-function carveout fix (dacf794); build-exp/m0 =
# main before it (b295f35); build-exp/sp = wip/2p-union-cv, the fix + the two-pass kernels as one
# function): test_model_gpu on the fix, then hz-bench OLMoE c64 alternating m0 / fix / fix+union, twice;
# Qwen c60 m0 / fix, twice.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for d in build-exp/sp build-exp/m0; do ln -sf libhorizon.so.0.1.0 $d/libhorizon.so.0; done
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "fix test_model_gpu rc $?"; tail -1 $OUT/mg.txt; t
scripts/bench --build $B --models olmoe,qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; echo "== hz-bench $m c$c $d"; timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2; do hb build-exp/m0 olmoe 64; hb $B olmoe 64; hb build-exp/sp olmoe 64; done; t
for i in 1 2; do hb build-exp/m0 qwen 60; hb $B qwen 60; done; t
rm -rf $OUT/models $OUT/hb.json
date
