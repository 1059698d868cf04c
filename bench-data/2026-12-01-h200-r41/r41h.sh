#!/bin/bash
# The crafted-logit test broken on purpose (route_key16 without its -0 -> +0 step: must fail), the test as
# committed (must pass), then Qwen's step on main (3a2b7b1) and on f674433, alternating (its router keeps
# route_warp_select; only the sum's order and the bit set changed there). Carry build-bench,
# build-bench-new and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
N=build-bench-new
timeout 60 $N/t/test_router_cluster_broken > $OUT/broken.txt 2>&1; echo "broken build rc $? (want 1)"; grep -c FAIL $OUT/broken.txt; grep FAIL $OUT/broken.txt | head -3
timeout 60 $N/t/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
st() { b=$1 m=$2 c=$3; echo "== $b $m"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $b --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for r in 1 2 3; do
  for b in build-bench/bench_model_ops_base $N/t/bench_model_ops; do st $b qwen 60; done
done
