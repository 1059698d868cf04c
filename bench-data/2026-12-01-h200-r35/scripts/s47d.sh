#!/usr/bin/env bash
# Call 4: the boundaries alone (phases without rows), and the ring with 16 consumer warps.
set -u
date
cd .devcarry/probe
for b in ring_1_8_192 ring_1_16_192 ring_2_16_192; do echo "== $b"; ./$b 16 50 0; ./$b 16 50 1; done 2>&1 | tee $OUT/probe.txt
date
