#!/bin/bash
# 2026-12-01 r37 call: OLMoE c64 hz-bench beside llama.cpp's llama-bench on the same checkpoint.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
M=${1:-olmoe} RES=${2:-64}
mkdir -p /tmp/llama && tar -xJf .devcarry/llama-bin.tar.xz -C /tmp/llama
ls -la /tmp/llama; ldd /tmp/llama/llama-bench | grep -i 'not found\|cublas\|gomp'
nproc; free -g | head -2; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
/tmp/llama/llama-bench --help 2>&1 | head -3
scripts/bench --build build-bench --models $M --executors grouped --residencies $RES --blocks 1 \
  --steps models,ceilings,${STEPS_PEER:-}llamacpp,sweep,table,report --peer-variants default --llama-bench /tmp/llama/llama-bench --out $OUT/$M
echo "exit $?"
# the device tool brings back only a few files: one archive of the folder
tar -cf $OUT/$M.tar -C $OUT $M && cp $OUT/$M/benchmarks-section.md $OUT/$M-section.md && rm -rf $OUT/$M
