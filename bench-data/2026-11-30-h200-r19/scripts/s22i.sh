#!/usr/bin/env bash
# Call 9 (temporary build: HZ_ATTN_TRIGGER, process: where the attention kernel releases the o GEMV:
# 0 after its wait (main), 1 after its chunks, 2 at its exit). Step and timeline per value.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date
for v in 0 1 2 0 1 2; do
  echo "== trigger $v"; HZ_ATTN_TRIGGER=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 .devcarry/bench_trig --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done
for v in 0 2; do
  echo "== timeline trigger $v"; HZ_ATTN_TRIGGER=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 .devcarry/tl_trig --step olmoe 64 64 > $OUT/tl_trig$v.txt 2>&1
  grep -E "^    (qkv|router|attention|o GEMV)|main-stream" $OUT/tl_trig$v.txt
done
date
