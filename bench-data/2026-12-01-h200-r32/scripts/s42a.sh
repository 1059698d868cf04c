#!/usr/bin/env bash
# Next session, call 1 (carry: build-dev = main (cc6d281 or later); build-exp/cp2 = wip/carve-probe2: the
# carveout preference per kernel + HZ_CARVE_SKIP (tags: b step begin, v generic GEMV, k its copy, d deep
# GEMV, r route GEMV, n non-vector GEMV, a attention, c router cluster) + HZ_GEMV_COPY (1: q/k/v on a
# copy, 4: o on a copy); build-exp/sp = wip/2p-union2: the two passes as one function, on main's splits
# (both two warps now, so both launches run bulk_pass_kernel<2>); build-exp/d2 = wip/dn2-regs: the split
# down kernel at one block per SM (79 registers against 64: a down block then no longer fits beside a
# gate_up block). For each: tools/hz-bench and libhorizon.so.0.1.0.
# OLMoE runs take about 5 s, Qwen's 12 s; with the models about 300 s. s42b.sh can follow in the same
# call (the models are then already there).
# Questions: (1) was the thirty-first round's 5% the o launches without the carveout preference (o on a
# copy left out)? (2) which of r, n, b, c costs Qwen the 1.1%? (3) does the union gain on main's splits? (4) the split down kernel's register cap;
# (5) does OLMoE gain if the attention, router cluster or step begin keep the driver's carveout?
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
for d in build-exp/cp2 build-exp/sp build-exp/d2; do ln -sf libhorizon.so.0.1.0 $d/libhorizon.so.0; done
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
scripts/bench --build build-dev --models olmoe,qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; shift 3; echo "== hz-bench $m c$c $d $*"; env "$@" timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
C=build-exp/cp2
for i in 1 2; do
  hb build-dev olmoe 64 X=0
  hb $C olmoe 64 X=0
  hb $C olmoe 64 HZ_GEMV_COPY=4
  hb $C olmoe 64 HZ_GEMV_COPY=4 HZ_CARVE_SKIP=k
  hb $C olmoe 64 HZ_CARVE_SKIP=v
  hb build-exp/sp olmoe 64 HZ_W4A16_2P_UNION=1
  hb build-exp/sp olmoe 64 HZ_W4A16_2P_UNION=0
  hb build-exp/d2 olmoe 64 X=0
done
for s in a c b; do hb $C olmoe 64 HZ_CARVE_SKIP=$s; done
t
hb build-dev qwen 60 X=0
for s in r n b c; do hb $C qwen 60 HZ_CARVE_SKIP=$s; done
hb $C qwen 60 X=0
t
rm -rf $OUT/models $OUT/hb.json
date
