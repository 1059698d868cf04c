#!/usr/bin/env bash
# Session 28 call 5: the block router with ranking keys (build-dev, working tree on 1ad160d) against
# 1ad160d (build-exp/old): router tests (and a build with the tie rule broken on purpose), model, prefill
# and golden tests, OLMoE step alternating, the timeline, hz-bench OLMoE c64 alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; grep -c 'bit-identical' $OUT/rc.txt; tail -1 $OUT/rc.txt
timeout 60 build-exp/brk/tests/unit/model/test_router_cluster > $OUT/rc_brk.txt 2>&1; echo "BROKEN test_router_cluster rc $? (want 1)"; grep FAIL $OUT/rc_brk.txt | head -4
HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu run rc $?"; tail -1 $OUT/mg.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
t
for i in 1 2; do for b in build-exp/old build-dev; do
  echo "== olmoe step $b"; HZ_BENCH_GRAPH_ONLY=1 timeout 120 $b/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
echo "== qwen step"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \(|FAIL'
t
echo "== timeline"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-exp/tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl.txt 2>&1; echo "rc $?"; sed -n '/timeline over/,/main-stream/p' $OUT/tl.txt
t
if [ ! -f /tmp/hz-bench-work/olmoe.hzq ]; then timeout 200 scripts/bench --build $B --models olmoe --steps models --out $OUT/m > $OUT/models.txt 2>&1; echo "models rc $?"; fi
for i in 1 2; do for b in build-exp/old build-dev; do
  n=$(basename $b); timeout 40 $b/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/ab_${n}_$i.json > $OUT/ab_${n}_$i.txt 2>&1; echo "$b rc $? $(grep -A1 '^resident' $OUT/ab_${n}_$i.txt | tail -1)"
done; done
t
tar czf $OUT/logs.tgz -C $OUT rc.txt rc_brk.txt mg.txt pf.txt golden.txt tl.txt; rm -f $OUT/rc.txt $OUT/rc_brk.txt $OUT/mg.txt $OUT/pf.txt $OUT/golden.txt $OUT/tl.txt; rm -rf $OUT/m
date
