#!/bin/bash
# Call 2: an upper bound for taking the router off the layer's chain (wip/probe-router, HZ_PROBE_ROUTER
# bits: 1 the router cluster skips the residual norm, 2 skips its rows and routes on the previous logits;
# tokens change, the figures are timings only). build-r50/probe release, build-r50/probetl timeline.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s)
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 60 $2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
for r in 1 2; do
  step "olmoe 64 64" build-r49/main ""
  for v in 0 1 2 3; do step "olmoe 64 64" build-r50/probe "HZ_PROBE_ROUTER=$v"; done
done
for v in 0 3; do
  HZ_PROBE_ROUTER=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-r50/probetl/bench_model_ops --step olmoe 64 64 > $OUT/tl_p$v.txt 2>&1; echo "== timeline probe=$v rc $?"
  grep -A8 'timeline over' $OUT/tl_p$v.txt | grep -E '^    (qkv GEMV|attention|o GEMV|router|gate_up|down) |chain' | head -8
done
cd $OUT && tar -czf probe.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
