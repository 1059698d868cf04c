#!/usr/bin/env bash
# Call 5: the kernels' and the persistent kernel's grids at 1, 2 and 4 blocks per SM (16 warps per SM).
set -u
date
cd .devcarry/probe
for b in grid_1 grid_2 grid_4; do echo "== $b"; ./$b 16 50 0; ./$b 16 50 1; done 2>&1 | tee $OUT/probe.txt
date
