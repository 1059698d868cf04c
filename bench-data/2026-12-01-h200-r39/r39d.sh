#!/bin/bash
# 2026-12-01 r39 call 8: the OLMoE shape with spread routing (hz-mkmodel --embed-std 1: each token's
# experts follow its id, so an LRU cache of R of E experts hits about R/E of the time), hz-bench at c30
# (threaded, then registered) and c64, then llama.cpp's tg128 on the same checkpoint with every expert on
# the GPU and with 8 layers' experts on the host.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); W=/tmp/spread; mkdir -p $W; t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
mkdir -p /tmp/llama && tar -xJf .devcarry/llama-bin.tar.xz -C /tmp/llama &
build-bench/tools/hz-mkmodel --arch olmoe --preset olmoe-1b-7b --seed 1 --embed-std 1 $W/ck 2>&1 | tail -1; t
build-bench/tools/hz-pack $W/ck $W/m.hzq --threads 16 > $W/pack.txt 2>&1 || tail -3 $W/pack.txt; t
build-bench/tools/hz-bench $W/m.hzq --device cuda:0 --resident 30,64 --blocks 1 --transport threaded --h2d-ceiling 52.5 --json $OUT/spread-threaded.json 2>&1 | grep -E "^c[0-9]|resident"; t
build-bench/tools/hz-bench $W/m.hzq --device cuda:0 --resident 30 --blocks 1 --transport registered --h2d-ceiling 52.5 --json $OUT/spread-registered.json 2>&1 | grep -E "^c[0-9]"; t
wait
python3 scripts/bench_llamacpp.py --checkpoint $W/ck --work $W/gguf --out /tmp/gg.json --gguf-only --variants experts-q4_0 2>&1 | tail -1; t
/tmp/llama/llama-bench -m $W/gguf/olmoe-experts-q4_0.gguf -ngl 99 -p 0 -n 128 -d 64 -r 3 -ncmoe 0,8 -o json > $OUT/spread-llama.json 2>/tmp/ll.err || tail -3 /tmp/ll.err
python3 bench-data/2026-12-01-h200-r39/llrows.py $OUT/spread-llama.json; t
