#!/usr/bin/env bash
# Session 34 call 7 (carry: build-dev = main d811223; build-exp/sl2 = wip/gu-scales-ld2: the same as
# call 6's, a kernel parameter instead of a second instantiation, on by default; HZ_W4A16_GU_SCALES_BULK=1
# gives back the bulk copies).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
S=build-exp/sl2; ln -sf libhorizon.so.0.1.0 $S/libhorizon.so.0
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
echo "== test_gpu_w4a16 (sl2)"; timeout 120 $S/cuda/test_gpu_w4a16 > $OUT/tw.txt 2>&1; echo "rc $?"; grep -E "2pass|OK|FAIL" $OUT/tw.txt | tail -3
for v in 1 0; do echo "== bench_w4a16 olmoe grouped-2p+pdl SCALES_BULK=$v"; HZ_W4A16_GU_SCALES_BULK=$v HZ_BENCH_EXECUTORS=grouped-2p+pdl timeout 100 $S/cuda/bench_w4a16 200 olmoe 2>&1 | tee $OUT/bw_$v.txt | grep -E "graph"; done; t
scripts/bench --build build-dev --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; shift 3; rm -f $OUT/hb.json; echo "== hz-bench $m c$c $d $*"; env "$@" timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2 3; do hb build-dev olmoe 64 X=0; hb $S olmoe 64 X=0; done
hb $S olmoe 64 HZ_W4A16_GU_SCALES_BULK=1
t
rm -rf $OUT/models $OUT/hb.json
date
