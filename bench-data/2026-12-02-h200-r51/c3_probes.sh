#!/bin/bash
# Call 3: two timing probes of the one-pass attention (values wrong), against main's build in the same call:
# own = each block reads only its head's q/k rows after the wait (OLMoE's q/k norm sums then wrong);
# nokv = no earlier K/V rows staged before the wait. Carry build-r52 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s)
step() { echo "== step $1 $2"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 build-r52/$2 --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -4; }
for r in 1 2; do for b in bmo_main bmo_own bmo_nokv; do step "olmoe 64 64" $b; done; done
for b in bmo_main bmo_own bmo_nokv; do echo "== alone $b"; timeout 60 build-r52/$b 100 2>&1 | grep -iE "attn|attention" | head -12; done
echo "done after $(( $(date +%s) - T0 )) s"
