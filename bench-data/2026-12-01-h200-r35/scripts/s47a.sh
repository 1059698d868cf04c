#!/usr/bin/env bash
# Call 1: the phase-chain probe (kernel boundaries under PDL against a persistent kernel's barrier).
set -u
date; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv
cd .devcarry/probe
for b in chain2 chain4; do echo "== $b"; ./$b 16 50; ./$b 16 50; done 2>&1 | tee $OUT/probe.txt
date
