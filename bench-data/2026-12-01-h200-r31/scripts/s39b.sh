#!/usr/bin/env bash
# Call 4 (carry build-dev = main + the residual ended by the down kernel (uncommitted), .devcarry): the
# kernel tests, the model tests, then the step and hz-bench with HZ_GPU_RES_END 1 / 0 alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 60 $B/tests/unit/model/test_decode_args > $OUT/da.txt 2>&1; echo "test_decode_args rc $?"; tail -2 $OUT/da.txt
timeout 60 $B/tests/unit/model/test_decode_gemv > $OUT/dg.txt 2>&1; echo "test_decode_gemv rc $?"; grep -E 'normed|FAIL|OK' $OUT/dg.txt | head -12
timeout 200 $B/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; grep -E 'residual|FAIL|^OK|FAILED' $OUT/w4.txt | head -20
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E 'residual|long context|FAIL' $OUT/mg.txt | head -20; tail -1 $OUT/mg.txt
t
st() { m=$1 c=$2 re=$3; echo "== $m res_end=$re"; HZ_GPU_RES_END=$re HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)' | sed 's/.*(graph)://'; }
for r in 1 2; do for re in 1 0; do st olmoe 64 $re; done; done; t
st qwen 60 1; t
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { re=$1 i=$2; echo "== hz-bench olmoe c64 res_end=$re"; HZ_GPU_RES_END=$re timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_${re}_$i.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb_${re}_$i.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2; do hb 1 $i; hb 0 $i; done; t
rm -rf $OUT/models
date
