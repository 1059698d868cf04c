#!/usr/bin/env bash
# Call 1 (carry build-dev = main, build-exp/px/tests/unit/model/bench_model_ops = wip/probe-x, .devcarry): upper bounds of the q/k/v
# GEMV's residual-norm prologue. HZ_PROBE_X: 1 = q/k/v x from h_in only (no FP32 acc read), 2 = q/k/v x
# read plain from xn (no norm at all), 4 = the router's h without o's output. Timing only (values wrong).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
st() { b=$1 m=$2 c=$3 px=$4; echo "== $b $m probe=$px"; HZ_PROBE_X=$px HZ_BENCH_GRAPH_ONLY=1 timeout 100 $b/tests/unit/model/bench_model_ops --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)' | sed 's/.*(graph)://'; }
for r in 1 2; do
  st build-dev olmoe 64 0
  for px in 0 1 2 4 5; do st build-exp/px olmoe 64 $px; done
done; t
for px in 0 1; do st build-exp/px qwen 60 $px; done; t
date
