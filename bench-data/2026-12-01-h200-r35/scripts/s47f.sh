#!/usr/bin/env bash
# Call 7: the chain phase by phase (each layer one phase type; mask bit p keeps phase p).
set -u
date
cd .devcarry/probe
for b in grid_2 grid_4; do for m in 1 2 4 8 16 31; do echo "== $b mask $m"; ./$b 16 50 0 $m; done; done 2>&1 | tee $OUT/probe.txt
date
