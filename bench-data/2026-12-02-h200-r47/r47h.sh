#!/bin/bash
# Call 8: hz-bench A/B in one call, on one artifact (scripts/bench models, sweep, table; OLMoE c64,
# grouped, threaded, 1 block): old = main before this round (build-r46/new, 585cc2e, the device code of
# aa3a9cb), new = the row sums over two FMA chains, one round each. Carry build-r47 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s)
for r in 1; do for b in old new; do
  timeout 120 scripts/bench --build build-r47/$b --work /tmp/hzw --models olmoe --executors grouped --residencies 64 \
    --blocks 1 --steps models,sweep,table --out $OUT/$b$r > $OUT/bench_$b$r.txt 2>&1
  echo "== $b round $r rc $? ($(( $(date +%s) - T0 )) s)"
  grep -h -o -E '"pooled_decode_tok_s": *[0-9.]+' $OUT/$b$r/bench-*.json 2>/dev/null | head -1
  sed -n '/bench summary/,$p' $OUT/bench_$b$r.txt | tail -2
done; done
cd $OUT && tar -czf r47h.tgz old1 new1 bench_*.txt && rm -rf old1 new1 bench_*.txt
echo "done after $(( $(date +%s) - T0 )) s"
