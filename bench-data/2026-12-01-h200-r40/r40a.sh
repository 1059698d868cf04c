#!/bin/bash
# Uniform-end routing at partial residency: the spread-routing checkpoint (hz-mkmodel --embed-std 1) with
# random token ids fed to every decode step (hz-bench --feed random, as llama-bench's tg test feeds them),
# beside llama.cpp -ncmoe on the same checkpoint in the same call; the registered transport at the
# smallest residency too. Usage: r40a.sh MODEL RESIDENCIES [SECONDS]
# Carry build-bench (tools + libhorizon.so of the commit) and .devcarry (lib/, llama-bin.tar.xz).
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
M=${1:?model} R=${2:?residencies}
mkdir -p /tmp/llama && tar -xJf .devcarry/llama-bin.tar.xz -C /tmp/llama
timeout $((${3:-570} - ($(date +%s) - T0))) scripts/bench --build build-bench --models $M --executors grouped \
  --residencies $R --blocks 1 --embed-std 1 --feed random --transports registered \
  --steps models,ceilings,llamacpp,sweep,transports,table,report --llama-bench /tmp/llama/llama-bench --out $OUT/$M
echo "exit $? after $(( $(date +%s) - T0 )) s"
tar -cf $OUT/$M.tar -C $OUT $M && cp $OUT/$M/benchmarks-section.md $OUT/$M-section.md 2>/dev/null
rm -rf $OUT/$M
