#!/usr/bin/env bash
# Call 6 (the norm weights' first chunk loaded before the GEMV's dependency wait): tests, step A/B
# against .devcarry/old/bench_split (00b70c7), OLMoE and Qwen, timeline.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/chk/rc.txt
timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/chk/tmg.txt; t
for m in "olmoe 64" "qwen 60"; do for i in 1 2; do
  echo "== $m previous"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 .devcarry/old/bench_split --step $m 64 2>&1 | grep -E "graph\)|FAIL"
  echo "== $m norm_w first"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m 64 2>&1 | grep -E "graph\)|FAIL"
done; done; t
HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/chk/tl.txt 2>&1; echo "timeline rc $?"
sed -n '/means per launch/,/tokens/p' $OUT/chk/tl.txt; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
