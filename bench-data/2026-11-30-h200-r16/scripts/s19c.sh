#!/usr/bin/env bash
# Call 3: the fused kernel's parts (temporary HZ_FUSED_DBG knobs: 1 no x staging, 2 no gate_up math, 4 no
# grid barrier, 8 no down staging or math, 16 return after gate_up), and its copy stages (HZ_FUSED_STAGES).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
run() { echo "== $*"; env "$@" HZ_BENCH_EXECUTORS=grouped+pdl,read-ceiling timeout 60 $B/cuda/bench_w4a16 200 olmoe 2>&1 | grep -E "^olmoe  "; }
for r in 1 2; do
  for d in 0 1 2 4 8 16 18 12 3; do run HZ_FUSED_DBG=$d; done
  for st in 2 6 8 4; do run HZ_FUSED_STAGES=$st; done
done
