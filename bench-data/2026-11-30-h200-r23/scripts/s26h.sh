#!/usr/bin/env bash
# Call 8 (r23): the full-residency OLMoE step run graph + PDL, eager + PDL and eager (bench_model_ops
# --step): how much of partial residency's remaining gap is eager execution rather than the round trip.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
timeout 150 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -vE "^ +[a-z_/ ]+ x ?[0-9]" | head -40
t
date
