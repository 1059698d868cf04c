#!/usr/bin/env bash
# Session 35 call 6 (build-dev = main + the read-ceiling+pdl row of bench_w4a16): the routed-expert layer
# alone against two read floors of the same bytes: the plain read kernel (each layer's grid launched after
# the previous one's end, as before) and the read kernel launched with PDL (placed early, reading after
# the previous grid's end). Two rounds, OLMoE then Qwen.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for i in 1 2; do
  HZ_BENCH_EXECUTORS=grouped+pdl,grouped-2p+pdl,read-ceiling,read-ceiling+pdl timeout 150 $B/cuda/bench_w4a16 200 olmoe 2>&1 | tee $OUT/bw_olmoe_$i.txt | grep -E "graph|ceiling|GB/s" ; t
done
HZ_BENCH_EXECUTORS=grouped+pdl,read-ceiling,read-ceiling+pdl timeout 150 $B/cuda/bench_w4a16 200 qwen 2>&1 | tee $OUT/bw_qwen.txt | grep -E "graph|ceiling|GB/s"; t
date
