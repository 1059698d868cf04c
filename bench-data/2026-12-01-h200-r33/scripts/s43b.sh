#!/usr/bin/env bash
# Session 34 call 3 (carry: build-dev = main fc7d07e; build-exp/gb = wip/gu-bars: the two-pass gate_up
# tile copied per part (HZ_W4A16_GU_BARS=1) or per part in two runs (=2), so that a warp starts as soon
# as its part (or run) is in; 0 = main's one barrier per tile).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
G=build-exp/gb; ln -sf libhorizon.so.0.1.0 $G/libhorizon.so.0
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for b in 1 2; do echo "== test_gpu_w4a16 GU_BARS=$b"; HZ_W4A16_GU_BARS=$b timeout 120 $G/cuda/test_gpu_w4a16 > $OUT/tw_$b.txt 2>&1; echo "rc $?"; tail -3 $OUT/tw_$b.txt; done; t
for b in 0 1 2; do echo "== bench_w4a16 olmoe grouped-2p+pdl GU_BARS=$b"; HZ_W4A16_GU_BARS=$b HZ_BENCH_EXECUTORS=grouped-2p+pdl,read-ceiling+pdl timeout 150 $G/cuda/bench_w4a16 200 olmoe 2>&1 | tee $OUT/bw_$b.txt | grep -E "graph|ceiling|GB/s"; done; t
scripts/bench --build build-dev --models olmoe,qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; shift 3; echo "== hz-bench $m c$c $d $*"; env "$@" timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2; do
  hb build-dev olmoe 64 X=0
  for b in 0 1 2; do hb $G olmoe 64 HZ_W4A16_GU_BARS=$b; done
done
t
hb $G qwen 60 HZ_W4A16_PATH=twopass HZ_W4A16_GU_BARS=0
hb $G qwen 60 HZ_W4A16_PATH=twopass HZ_W4A16_GU_BARS=2
t
rm -rf $OUT/models $OUT/hb.json
date
