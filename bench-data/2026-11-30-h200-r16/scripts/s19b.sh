#!/usr/bin/env bash
# Call 2: where the sliced kernel's time goes (temporary HZ_SLICED_DBG knobs: 1 contiguous down source,
# 2 no reduction, 4 no down math, 8 no grid barrier and no reduction).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for r in 1 2; do
for d in 0 1 2 4 8 3 9 13 12; do
  echo "== dbg $d"; HZ_SLICED_DBG=$d HZ_BENCH_EXECUTORS=grouped-fused+pdl,grouped-sliced+pdl,read-ceiling timeout 60 $B/cuda/bench_w4a16 200 olmoe 2>&1 | grep -E "^olmoe  grouped-(fused|sliced)|^olmoe  read-ceiling"
done
done
