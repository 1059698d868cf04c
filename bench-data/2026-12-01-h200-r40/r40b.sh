#!/bin/bash
# LRU against LFU eviction (HZ_EVICT_LFU, new) at partial residency, on the spread-routing checkpoint with
# random token ids (the r40a.sh setting), both in one call: scripts/bench's sweep with each policy (threaded,
# three residencies) and the registered transport at c30, then hz-bench with LFU half-lives 64 and 1024 at
# c30 (threaded). Usage: r40b.sh MODEL RESIDENCIES [SECONDS]
# Carry build-bench (tools + libhorizon.so of the commit) and .devcarry (lib/).
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
M=${1:?model} R=${2:?residencies}
LIMIT=${3:-570}
left() { echo $((LIMIT - ($(date +%s) - T0))); }
for ev in lru lfu; do
  timeout $(left) scripts/bench --build build-bench --models $M --executors grouped --residencies $R --blocks 1 \
    --embed-std 1 --feed random --eviction $ev --transports registered --transport-residency 30 \
    --steps models,ceilings,sweep,transports,table,report --out $OUT/$M 2>&1 | grep -E '^\| grouped|DONE|FAIL|hit'
done
for hl in 64 1024; do
  HZ_LFU_HALF_LIFE=$hl timeout $(left) build-bench/tools/hz-bench /tmp/hz-bench-work/embed-std-1/$M.hzq --device cuda:0 \
    --executor grouped --resident 30 --blocks 1 --transport threaded --feed random --eviction lfu \
    --json $OUT/$M/hl$hl.json > $OUT/$M/hl$hl.txt 2>&1; tail -3 $OUT/$M/hl$hl.txt
done
echo "exit after $(( $(date +%s) - T0 )) s"
tar -cf $OUT/$M.tar -C $OUT $M && cp $OUT/$M/benchmarks-section.md $OUT/$M-section.md 2>/dev/null
rm -rf $OUT/$M
