#!/usr/bin/env bash
# Call 9: the chain with the expert stand-ins (phases 3, 4) loading nothing before their wait, as
# routed experts must; whole layers and the two phases alone.
set -u
date
cd .devcarry/probe
for args in "0 31 0" "0 31 24" "0 31 31" "0 8 0" "0 8 8" "0 16 0" "0 16 16" "0 1 0" "0 1 1"; do echo "== grid_2 $args"; ./grid_2 16 50 $args; done 2>&1 | tee $OUT/probe.txt
date
