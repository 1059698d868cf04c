#!/usr/bin/env bash
# Call 3: the ring variant by slot size and consumer warps.
set -u
date
cd .devcarry/probe
for b in ring_1_8_192 ring_2_8_192 ring_4_8_192 ring_2_16_192 ring_4_16_192 ring_8_16_192; do echo "== $b"; ./$b 16 50; done 2>&1 | tee $OUT/probe.txt
date
