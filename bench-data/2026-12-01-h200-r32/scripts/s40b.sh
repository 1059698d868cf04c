#!/usr/bin/env bash
# Next session, call 2 (carry build-dev = main, .devcarry): Qwen's shared down GEMV beside the routed
# experts runs its own function (the deep batch, dgemv_kernel<1,0,11,3>); HZ_GEMV_DEEP=0 gives it the
# function the q/k/v, o and lm_head launches share. hz-bench Qwen c60 alternating, twice.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
scripts/bench --build $B --models qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
M=/tmp/hz-bench-work/qwen.hzq
hb() { dp=$1; echo "== hz-bench qwen c60 HZ_GEMV_DEEP=$dp"; HZ_GEMV_DEEP=$dp timeout 120 $B/tools/hz-bench $M --device cuda:0 --executor grouped --resident 60 --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2; do hb 1; hb 0; done; t
rm -rf $OUT/models $OUT/hb.json
date
