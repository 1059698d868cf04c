#!/usr/bin/env bash
# Session 35 call 7 (build-dev = main + read-ceiling+pdl with HZ_BENCH_READ_PDL_BLOCKS): the PDL read
# floor with 1, 2 and 4 blocks per SM, OLMoE and Qwen, beside the fused layer.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
for m in olmoe qwen; do for nb in 1 2 4 1; do
  echo "== $m read pdl blocks/SM $nb"
  HZ_BENCH_READ_PDL_BLOCKS=$nb HZ_BENCH_EXECUTORS=grouped+pdl,read-ceiling+pdl timeout 100 $B/cuda/bench_w4a16 200 $m 2>&1 | tee $OUT/bw_${m}_$nb.txt | grep -E "graph"
done; done
date
