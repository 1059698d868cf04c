#!/bin/bash
# Speculative next-layer prefetch (HZ_PREFETCH_NEXT_LAYER) at partial residency on the spread-routing
# checkpoint with random token ids (the r40a.sh setting): where the token's own embedding dominates the
# hidden state, the next layer's router applied to this layer's MoE input may predict its experts.
# Transports threaded, threaded+prefetch, registered, registered+prefetch at one residency, one call.
# Usage: r40c.sh MODEL RESIDENCY [SECONDS]. Carry build-bench and .devcarry (lib/).
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
M=${1:?model} R=${2:?residency} LIMIT=${3:-570}
timeout $((LIMIT - ($(date +%s) - T0))) scripts/bench --build build-bench --models $M --executors grouped --blocks 1 \
  --embed-std 1 --feed random --transports threaded,threaded+prefetch,registered,registered+prefetch \
  --transport-residency $R --steps models,ceilings,transports,table,report --out $OUT/$M 2>&1 |
  grep -E '^\| grouped|DONE|FAIL|prefetch c'
echo "exit after $(( $(date +%s) - T0 )) s"
tar -cf $OUT/$M.tar -C $OUT $M && cp $OUT/$M/benchmarks-section.md $OUT/$M-section.md 2>/dev/null
rm -rf $OUT/$M
