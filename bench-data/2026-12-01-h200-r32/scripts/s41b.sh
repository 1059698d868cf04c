#!/usr/bin/env bash
# Session 33, call 4 (carry: build-exp/m0 = main before the carveout fix (b295f35); build-exp/cp =
# wip/carve-probe: the fix + HZ_CARVE_SKIP tags (b begin, v/k GEMV and its copy, d deep GEMV, r route GEMV,
# n non-vector GEMV, a attention, c router cluster) + HZ_GEMV_COPY (gemv_copy.patch) + the two-pass
# union (HZ_W4A16_2P_UNION=0: two functions).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
for d in build-exp/cp build-exp/m0; do ln -sf libhorizon.so.0.1.0 $d/libhorizon.so.0; done
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
scripts/bench --build build-dev --models olmoe,qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; shift 3; echo "== hz-bench $m c$c $d $*"; env "$@" timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
C=build-exp/cp
for i in 1 2; do
  hb build-exp/m0 olmoe 64 X=0
  hb $C olmoe 64 HZ_W4A16_2P_UNION=1
  hb $C olmoe 64 HZ_W4A16_2P_UNION=0
  hb $C olmoe 64 HZ_W4A16_2P_UNION=0 HZ_GEMV_COPY=1
  hb $C olmoe 64 HZ_W4A16_2P_UNION=0 HZ_GEMV_COPY=1 HZ_CARVE_SKIP=k
done; t
hb build-exp/m0 qwen 60 X=0
hb $C qwen 60 HZ_W4A16_2P_UNION=0
hb $C qwen 60 HZ_W4A16_2P_UNION=0 HZ_CARVE_SKIP=d
hb $C qwen 60 HZ_W4A16_2P_UNION=0 HZ_CARVE_SKIP=a
hb $C qwen 60 HZ_W4A16_2P_UNION=0 HZ_CARVE_SKIP=rnbc
hb $C qwen 60 HZ_W4A16_2P_UNION=1
t
rm -rf $OUT/models $OUT/hb.json
date
