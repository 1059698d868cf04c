#!/usr/bin/env bash
# Next session, call 1 (carry: build-dev = main; build-exp/sp = wip/2p-union, the two-pass expert kernels
# as one function; build-exp/ef = wip/gemv-ef, the decode GEMV's rows evict-first in L2; for each, only
# tools/hz-bench and libhorizon.so.0.1.0, and .devcarry): bench_fn_switch (main), model tests on both
# branches, then hz-bench
# OLMoE c64 alternating main / union / union off (HZ_W4A16_2P_UNION=0) / evict-first, twice.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for d in build-exp/sp build-exp/ef; do ln -sf libhorizon.so.0.1.0 $d/libhorizon.so.0; done
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 60 $B/cuda/bench_fn_switch > $OUT/fn_switch.txt 2>&1; echo "bench_fn_switch rc $?"; cat $OUT/fn_switch.txt
for d in build-exp/sp build-exp/ef; do [ -x $d/tests/unit/model/test_model_gpu ] && { timeout 150 $d/tests/unit/model/test_model_gpu > $OUT/mg_$(basename $d).txt 2>&1; echo "$d test_model_gpu rc $?"; tail -1 $OUT/mg_$(basename $d).txt; }; done; t
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
M=/tmp/hz-bench-work/olmoe.hzq
hb() { d=$1 u=$2; echo "== hz-bench olmoe c64 $d union=$u"; HZ_W4A16_2P_UNION=$u timeout 100 $d/tools/hz-bench $M --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2; do hb $B 1; hb build-exp/sp 1; hb build-exp/sp 0; hb build-exp/ef 1; done; t
rm -rf $OUT/models $OUT/hb.json
date
