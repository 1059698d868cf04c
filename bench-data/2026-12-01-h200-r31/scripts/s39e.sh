#!/usr/bin/env bash
# Call 7 (carry build-dev = main, build-exp/sp pieces = wip/gemv-spec: the decode GEMV's x mode and tail
# compiled into the q/k/v, o and lm_head launches, .devcarry): its tests, then hz-bench OLMoE c64 and the
# step on hz-bench's artifact, main and the branch alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev; S=build-exp/sp
ln -sf libhorizon.so.0.1.0 $S/libhorizon.so.0
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 60 $S/tests/unit/model/test_decode_gemv > $OUT/dg.txt 2>&1; echo "test_decode_gemv rc $?"; tail -1 $OUT/dg.txt
timeout 150 $S/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E 'FAIL' $OUT/mg.txt | head; tail -1 $OUT/mg.txt
t
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
M=/tmp/hz-bench-work/olmoe.hzq
hb() { d=$1 i=$2; echo "== hz-bench olmoe c64 $d"; timeout 100 $d/tools/hz-bench $M --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_$(basename $d)_$i.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb_$(basename $d)_$i.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2 3; do hb $B $i; hb $S $i; done; t
st() { bin=$1; echo "== step $bin"; HZ_BENCH_MODEL=$M HZ_BENCH_MAX_CONTEXT=255 HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl|FAIL' | sed 's/.*pdl //'; }
for i in 1 2; do st $B/tests/unit/model/bench_model_ops; st $S/tests/unit/model/bench_model_ops; done; t
rm -rf $OUT/models
date
