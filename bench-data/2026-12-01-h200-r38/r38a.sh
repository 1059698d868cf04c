#!/usr/bin/env bash
# Call 1 (carry build-dev = wip/probe-fold, .devcarry): what the step would gain with the router's rows
# inside the o GEMV (HZ_PROBE_FOLD bit 1; bit 4: route tags) and with lm_head reading half its rows
# (bit 2). Timing only: the values computed are wrong.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
st() { m=$1 c=$2 pf=$3; echo "== $m fold=$pf"; HZ_PROBE_FOLD=$pf HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for r in 1 2; do
  for pf in 0 1 5 2 3 7; do st olmoe 64 $pf; done
done; t
date
