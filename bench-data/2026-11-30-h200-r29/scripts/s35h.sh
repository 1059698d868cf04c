#!/usr/bin/env bash
# Session 35 call 8 (build-exp/rk1 = branch wip/route-keys16-nosum: the 32-bit ranking keys alone, rebased
# on main e99118b, with main's in-order sum; build-dev = main): which half of wip/route-keys16 slowed
# OLMoE's step in call 1. Router test, then OLMoE step main/keys alternating twice, Qwen once.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev R=build-exp/rk1
date
timeout 60 $R/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "keys test_router_cluster rc $?"; tail -1 $OUT/rc.txt
step() { HZ_BENCH_GRAPH_ONLY=1 timeout 100 "$@" 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; }
for i in 1 2; do
  echo "== olmoe main"; step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
  echo "== olmoe keys"; step $R/tests/unit/model/bench_model_ops --step olmoe 64 64
done
echo "== qwen main"; step $B/tests/unit/model/bench_model_ops --step qwen 60 64
echo "== qwen keys"; step $R/tests/unit/model/bench_model_ops --step qwen 60 64
date
