#!/usr/bin/env bash
# Session 34 call 2: where a step's time goes on main (b949c41): the kernel timeline (build-tl).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for i in 1 2; do
echo "== timeline olmoe $i"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_olmoe_$i.txt 2>&1; echo "rc $?"; cat $OUT/tl_olmoe_$i.txt
done
echo "== timeline qwen"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-tl/tests/unit/model/bench_model_ops --step qwen 60 64 > $OUT/tl_qwen.txt 2>&1; echo "rc $?"; cat $OUT/tl_qwen.txt
date
