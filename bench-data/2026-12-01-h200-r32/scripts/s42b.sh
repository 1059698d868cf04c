#!/usr/bin/env bash
# Next session, call 2 (carry: build-dev = main, .devcarry): are main's defaults still the fastest in
# hz-bench? The down split was not (thirty-second round: off by default since a step-bench figure, 1.7%
# faster on). Each switch turned off once, main's default three times, OLMoE c64 then Qwen c60.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
scripts/bench --build $B --models olmoe,qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { m=$1 c=$2; shift 2; echo "== hz-bench $m c$c $*"; env "$@" timeout 120 $B/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
hb olmoe 64 X=0
for k in HZ_W4A16_GU_SPLIT=1 HZ_W4A16_DN_TMA=0 HZ_W4A16_GU_PDL=0 HZ_GPU_ROUTE_CLUSTER=0 HZ_GPU_ROUTE_KERNEL=0; do hb olmoe 64 $k; done
hb olmoe 64 X=0
for k in HZ_GPU_ROUTE_KERNEL=all HZ_GPU_SPECULATE=0 HZ_GPU_ROUTE_READY=0 HZ_GPU_ATTN_GROUPS=0 HZ_GPU_ROUTER_ALONE=0 HZ_GPU_ROUTE_TAGS=0 HZ_GPU_GATE_IN_ROUTER=0 HZ_W4A16_PATH=fused; do hb olmoe 64 $k; done
hb olmoe 64 X=0
t
hb qwen 60 X=0
for k in HZ_W4A16_PATH=twopass HZ_GPU_SIDE_EDGE=0 HZ_GPU_ATTN_GROUPS=0; do hb qwen 60 $k; done
hb qwen 60 HZ_W4A16_PATH=twopass HZ_W4A16_DN_SPLIT=1
hb qwen 60 X=0
t
rm -rf $OUT/models $OUT/hb.json
date
