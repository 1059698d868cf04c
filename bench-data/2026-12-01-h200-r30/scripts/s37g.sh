#!/usr/bin/env bash
# Call 7 (wip/attn-groups, block-wide barriers instead of named ones; carry build-dev .devcarry):
# test_model_gpu, OLMoE step groups on/off, racecheck of the long-context part (quick), hz-bench OLMoE c64.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/model_gpu.txt 2>&1; echo "test_model_gpu rc $?"
grep -E "long context|FAIL" $OUT/model_gpu.txt | head -4; tail -1 $OUT/model_gpu.txt; t
step() { m=$1; shift; echo "== $m $*"; env "$@" HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror'; }
step "olmoe 64" HZ_GPU_ATTN_GROUPS=1
step "olmoe 64" HZ_GPU_ATTN_GROUPS=0
t
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long timeout 150 compute-sanitizer --tool racecheck --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/long_racecheck.txt 2>&1
echo "racecheck rc $?"; grep -E "long context|FAIL|Race|SUMMARY" $OUT/long_racecheck.txt | head -8; t
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
for g in 1 0; do echo "== hz-bench olmoe c64 groups=$g"; HZ_GPU_ATTN_GROUPS=$g timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_$g.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb_$g.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; done
rm -rf $OUT/models; t
date
