#!/bin/bash
# 2026-12-01 r39: hz-bench at a partial and the full residency beside llama.cpp's llama-bench on the same
# checkpoint, llama.cpp with every expert on the GPU and with the experts of N layers on the host (-ncmoe),
# N from the same residency (scripts/bench_llamacpp.py). llama-bench: 3f545be, built on this GPU machine
# with its FlashAttention kernels in call 1, carried compressed.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
M=${1:-olmoe} RES=${2:-30,64} LIM=${3:-560}
T0=$(date +%s)
[ -n "${CLEAN:-}" ] && scripts/bench --build build-bench --models $CLEAN --steps clean --out /tmp/clean-out; df -h /tmp | tail -1
mkdir -p /tmp/llama && tar -xJf .devcarry/llama-bin.tar.xz -C /tmp/llama
ldd /tmp/llama/llama-bench | grep -i 'not found'; nproc; free -g | head -2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout $((LIM - ($(date +%s) - T0))) scripts/bench --build build-bench --models $M --executors grouped --residencies $RES --blocks 1 \
  --steps models,ceilings,llamacpp,sweep,table,report --llama-bench /tmp/llama/llama-bench --out $OUT/$M
echo "exit $? after $(( $(date +%s) - T0 )) s"
tar -cf $OUT/$M.tar -C $OUT $M && cp $OUT/$M/benchmarks-section.md $OUT/$M-section.md 2>/dev/null; rm -rf $OUT/$M
date
