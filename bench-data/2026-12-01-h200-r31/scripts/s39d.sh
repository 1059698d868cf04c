#!/usr/bin/env bash
# Call 6 (carry build-dev = main + bench_model_ops' HZ_BENCH_MODEL / HZ_BENCH_MAX_CONTEXT,
# build-exp/re/.../bench_model_ops = wip/res-end with them, .devcarry): the step on hz-bench's own
# artifact, HZ_GPU_RES_END 1 / 0 alternating, against the same on the step bench's model.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev; X=build-exp/re/tests/unit/model/bench_model_ops
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
st() { bin=$1 re=$2 mdl=$3; echo "== $bin res_end=$re model=${mdl:-own}"; HZ_BENCH_MODEL=$mdl HZ_BENCH_MAX_CONTEXT=255 HZ_GPU_RES_END=$re HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl|FAIL' | sed 's/.*pdl //'; }
M=/tmp/hz-bench-work/olmoe.hzq
for r in 1 2; do st $X 1 $M; st $X 0 $M; done; t
st $B/tests/unit/model/bench_model_ops 0 $M; t
for r in 1; do st $X 1 ""; st $X 0 ""; done; t
rm -rf $OUT/models
date
