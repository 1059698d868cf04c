#!/usr/bin/env bash
# Session 34 call 4 (carry: build-dev = main 'capture only the reachable graphs'; build-exp/nw =
# wip/nw-smem = main + the two-pass down kernel asking for the routing weights and acc right after its
# wait instead of after its rows are summed).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
N=build-exp/nw; ln -sf libhorizon.so.0.1.0 $N/libhorizon.so.0
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
echo "== test_gpu_w4a16 (nw)"; timeout 120 $N/cuda/test_gpu_w4a16 > $OUT/tw.txt 2>&1; echo "rc $?"; grep -E "2pass|OK|FAIL" $OUT/tw.txt | tail -4
echo "== test_gpu_w4a16 (nw) splits 1"; HZ_W4A16_GU_SPLIT=1 HZ_W4A16_DN_SPLIT=1 timeout 120 $N/cuda/test_gpu_w4a16 > $OUT/tw1.txt 2>&1; echo "rc $?"; tail -1 $OUT/tw1.txt
echo "== test_model_gpu (nw)"; timeout 200 $N/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "rc $?"; grep "long context" $OUT/mg.txt; tail -1 $OUT/mg.txt; t
scripts/bench --build build-dev --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; shift 3; echo "== hz-bench $m c$c $d $*"; env "$@" timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2 3; do hb build-dev olmoe 64 X=0; hb $N olmoe 64 X=0; done
hb build-dev olmoe 64 HZ_GPU_ATTN_GROUPS=0
hb $N olmoe 64 HZ_W4A16_DN_SPLIT=1
hb build-dev olmoe 64 HZ_W4A16_DN_SPLIT=1
t
rm -rf $OUT/models $OUT/hb.json
date
