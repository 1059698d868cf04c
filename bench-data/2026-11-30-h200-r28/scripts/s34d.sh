#!/usr/bin/env bash
# Call 5 (carry build-dev = the router ranking on logits, build-exp: tl = its timeline bench, m0 = main
# bf3f2a7, .devcarry): GPU correctness first, then the step A/B against main, the timeline, hz-bench, and
# (only if the step is faster at positions 32-96 in both rounds) the OLMoE contract with the peer.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
timeout 120 $B/tests/unit/model/test_decode_gemv > $OUT/gemv.txt 2>&1; echo "test_decode_gemv rc $?"; tail -1 $OUT/gemv.txt
timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
t
step() { HZ_BENCH_GRAPH_ONLY=1 timeout 150 "$@" 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; }
win=0
for i in 1 2; do
  echo "== olmoe main bf3f2a7"; a=$(step build-exp/m0/tests/unit/model/bench_model_ops --step olmoe 64 64); echo "$a"
  echo "== olmoe logit ranking"; b=$(step $B/tests/unit/model/bench_model_ops --step olmoe 64 64); echo "$b"
  ma=$(echo "$a" | sed -E 's/.*pos 32..96 ([0-9.]+) ms.*/\1/'); mb=$(echo "$b" | sed -E 's/.*pos 32..96 ([0-9.]+) ms.*/\1/')
  awk -v a="$ma" -v b="$mb" 'BEGIN{exit !(b < a)}' && win=$((win+1))
done
echo "faster rounds: $win"
echo "== qwen main bf3f2a7"; step build-exp/m0/tests/unit/model/bench_model_ops --step qwen 60 64
echo "== qwen logit ranking"; step $B/tests/unit/model/bench_model_ops --step qwen 60 64
echo "== timeline"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-exp/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl.txt 2>&1; echo "rc $?"; sed -n '/timeline over/,/lm_head      after/p' $OUT/tl.txt
t
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"
for d in build-exp/m0 $B; do echo "== hz-bench $d"; timeout 200 $d/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_$(basename $d).json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; print(json.load(open('$OUT/hb_$(basename $d).json'))['runs'][0]['pooled_decode_tok_s'])"; done
t
if [ $win -eq 2 ]; then
  m=olmoe
  timeout 300 scripts/bench --build $B --models $m --executors grouped --residencies 30,40,50,60,64 --transports threaded,threaded-whole,registered --transport-residency 30 --steps ceilings,peer,sweep,transports,table --peer-variants default --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
  tail -22 $OUT/bench_$m.txt; t
  tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt
fi
tar czf $OUT/tests.tgz -C $OUT rc.txt gemv.txt mg.txt pf.txt golden.txt; rm -rf $OUT/models
date
