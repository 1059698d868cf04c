#!/bin/bash
# 2026-12-01 r39: a 512-token prompt at full and partial residency, Horizon's batched prefill
# (bench_prefill_gpu; threaded, and registered at the partial residency) beside llama.cpp's pp512 from position 0 on the same checkpoint,
# with every expert on the GPU and with the experts of N layers on the host (-ncmoe N), one model after
# the other in one call. Arguments: model:resident:N ...
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); W=/tmp/hz-bench-work
mkdir -p /tmp/llama && tar -xJf .devcarry/llama-bin.tar.xz -C /tmp/llama
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date
for spec in "$@"; do
  IFS=: read -r M R N <<< "$spec"
  echo "=== $M: resident $R, llama.cpp -ncmoe $N  [$(( $(date +%s) - T0 )) s]"
  scripts/bench --build build-bench --models $M --residencies $R --steps models --keep-checkpoints --out /tmp/out-$M > /tmp/models-$M.txt 2>&1 || { tail -5 /tmp/models-$M.txt; continue; }
  python3 scripts/bench_llamacpp.py --checkpoint $W/$M-ckpt --work $W/gguf --out /tmp/gg-$M.json --gguf-only 2>&1 | tail -2
  echo "  [$(( $(date +%s) - T0 )) s]"
  for ct in 0:threaded $R:threaded $R:registered; do build-bench/bench_prefill_gpu $W/$M.hzq --tokens 512 --reps 5 --token-reps 0 --capacity ${ct%:*} --transport ${ct#*:}; done 2>&1 | tee -a $OUT/prefill.txt
  echo "  [$(( $(date +%s) - T0 )) s]"
  for g in $W/gguf/*.gguf; do
    echo "--- llama-bench $(basename $g)"
    /tmp/llama/llama-bench -m $g -ngl 99 -p 512 -n 0 -d 0 -r 5 -ncmoe 0,$N -o json > $OUT/ll-$M-$(basename $g .gguf).json 2>/tmp/ll.err || tail -3 /tmp/ll.err
    python3 bench-data/2026-12-01-h200-r39/llrows.py $OUT/ll-$M-$(basename $g .gguf).json | tee -a $OUT/llama.txt
  done
  echo "  [$(( $(date +%s) - T0 )) s]"
  rm -rf $W/$M-ckpt $W/$M.hzq $W/gguf/*.gguf
done
date
