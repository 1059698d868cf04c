#!/bin/bash
# Prepared for the next session (not run in the thirty-eighth round: its device time was spent): the
# spread-routing OLMoE shape (hz-mkmodel --embed-std 1) with random token ids fed to every decode step
# (hz-bench --feed random, as llama-bench's decode test feeds them), so that partial residency sees the
# routing of distinct tokens, beside llama.cpp's -ncmoe run on the same checkpoint in the same call.
# Carry build-bench (hz-bench, hz-mkmodel, hz-pack, hz-ceilings, libhorizon.so of the commit) and
# .devcarry (lib/, llama-bin.tar.xz: llama-bench 3f545be built on the GPU machine in call 1).
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
mkdir -p /tmp/llama && tar -xJf .devcarry/llama-bin.tar.xz -C /tmp/llama
timeout $((${1:-570} - ($(date +%s) - T0))) scripts/bench --build build-bench --models olmoe --executors grouped \
  --residencies 30,64 --blocks 1 --embed-std 1 --feed random \
  --steps models,ceilings,llamacpp,sweep,table,report --llama-bench /tmp/llama/llama-bench --out $OUT/olmoe
echo "exit $? after $(( $(date +%s) - T0 )) s"
tar -cf $OUT/olmoe.tar -C $OUT olmoe && cp $OUT/olmoe/benchmarks-section.md $OUT/olmoe-section.md 2>/dev/null
rm -rf $OUT/olmoe
