#!/usr/bin/env bash
# Next session, call 1 (carry build-dev = main 5e8c54c, build-exp = rk: slim release build of branch
# wip/route-keys16 at 2e8625b, .devcarry). The branch ranks the router's experts on one 32-bit key each and
# reads the exponentials' in-order sum 32 values ahead; selection and weights must be bit-identical to main's.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev R=build-exp/rk
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 60 $R/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "branch test_router_cluster rc $?"; tail -1 $OUT/rc.txt
HZ_MODEL_GPU_PARTS=run timeout 150 $R/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "branch test_model_gpu rc $?"; tail -1 $OUT/mg.txt
timeout 120 $R/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "branch test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $R/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "branch golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
t
step() { HZ_BENCH_GRAPH_ONLY=1 timeout 150 "$@" 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; }
for i in 1 2; do
  echo "== olmoe main"; step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
  echo "== olmoe keys"; step $R/tests/unit/model/bench_model_ops --step olmoe 64 64
done
for i in 1 2; do
  echo "== qwen main"; step $B/tests/unit/model/bench_model_ops --step qwen 60 64
  echo "== qwen keys"; step $R/tests/unit/model/bench_model_ops --step qwen 60 64
done
t
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"
for d in $B $R $B $R; do echo "== hz-bench olmoe c64 $d"; timeout 60 $d/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; done
rm -rf $OUT/models; t
date
