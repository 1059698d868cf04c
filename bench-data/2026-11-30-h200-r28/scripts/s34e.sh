#!/usr/bin/env bash
# Call 6 (carry build-dev = e9cc2e9, build-exp/m0 = main bf3f2a7, .devcarry): Qwen c60 hz-bench, main
# against the logit ranking, one process each.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 110 scripts/bench --build $B --models qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
for d in $B build-exp/m0; do echo "== hz-bench qwen c60 $d"; timeout 45 $d/tools/hz-bench /tmp/hz-bench-work/qwen.hzq --device cuda:0 --executor grouped --resident 60 --transport threaded --blocks 1 --json $OUT/hbq_$(basename $d).json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hbq_$(basename $d).json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; t; done
rm -rf $OUT/models
date
