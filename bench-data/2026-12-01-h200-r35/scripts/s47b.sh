#!/usr/bin/env bash
# Call 2: the phase-chain probe with the ring variant.
set -u
date; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
cd .devcarry/probe
for i in 1 2; do ./chain2 16 50; done 2>&1 | tee $OUT/probe.txt
date
