#!/usr/bin/env bash
# Call 5 (carry build-dev = call 4's code + bench_model_ops' HZ_BENCH_MAX_CONTEXT, .devcarry): the step
# with hz-bench's max_context (255) and with 2048, HZ_GPU_RES_END 1 / 0 alternating; hz-bench again.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
st() { m=$1 c=$2 re=$3 mc=$4; echo "== $m res_end=$re max_context=$mc"; HZ_BENCH_MAX_CONTEXT=$mc HZ_GPU_RES_END=$re HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m $c 64 2>&1 | grep -E 'graph \+ pdl' | sed 's/.*pdl //'; }
for r in 1 2; do for re in 1 0; do st olmoe 64 $re 255; done; done; t
for re in 1 0; do st olmoe 64 $re 2048; done; t
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { re=$1 i=$2; echo "== hz-bench olmoe c64 res_end=$re"; HZ_GPU_RES_END=$re timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_${re}_$i.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb_${re}_$i.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'], r['session_stats']['residual_end'])"; }
for i in 1 2 3; do hb 0 $i; hb 1 $i; done; t
rm -rf $OUT/models
date
