#!/bin/bash
# 2026-12-01 r39 call 9: the spread-routing OLMoE shape (hz-mkmodel --embed-std 1) with random token ids
# fed one at a time through the decode step (bench_prefill_gpu's token path), at c30 of 64: decode
# without the greedy output's repetition, the routing near uniform.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); W=/tmp/spread; mkdir -p $W; t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
build-bench/tools/hz-mkmodel --arch olmoe --preset olmoe-1b-7b --seed 1 --embed-std 1 $W/ck 2>&1 | tail -1; t
build-bench/tools/hz-pack $W/ck $W/m.hzq --threads 16 > $W/pack.txt 2>&1 || tail -3 $W/pack.txt; t
for tr in threaded registered; do
  build-bench/bench_prefill_gpu $W/m.hzq --tokens 256 --reps 1 --token-reps 1 --capacity 30 --transport $tr 2>&1 | tee -a $OUT/token-path.txt; t
done
build-bench/bench_prefill_gpu $W/m.hzq --tokens 256 --reps 1 --token-reps 1 --capacity 0 2>&1 | tee -a $OUT/token-path.txt; t
