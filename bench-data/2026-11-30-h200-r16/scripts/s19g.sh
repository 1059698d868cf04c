#!/usr/bin/env bash
# Call 12 (main): Qwen and OLMoE steps with the grouped executor's two-pass bulk-copy path
# (HZ_W4A16_PATH=twopass) against the default fused kernel, alternating processes.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for m in "qwen 60" "olmoe 64"; do
  for i in 1 2; do
    for p in default twopass; do
      echo "== $m $p $i"; HZ_W4A16_PATH=$p HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m 64 2>&1 | grep -E "graph\)|FAIL"
    done
  done
done
HZ_BENCH_EXECUTORS=grouped+pdl,grouped-2p+pdl,read-ceiling timeout 60 $B/cuda/bench_w4a16 200 2>&1 | grep -E "^(olmoe|qwen)  "
