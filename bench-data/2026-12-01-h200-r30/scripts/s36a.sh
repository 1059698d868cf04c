#!/usr/bin/env bash
# Next session, call 1 (carry build-dev = main, build-exp = ac: slim release build of the diagnostic branch
# wip/attn-clock, .devcarry). Where the decode attention's cycles go: head 0's first split prints
# "ACLK pos chunks nact | waited->qkv-read, ->normed | per chunk (two at most): visible, scores,
# sc-barrier, max, values | values-parked, parked-barrier, merged" (cycles from the previous landmark;
# 0 for the second chunk where only one ran; chunks past the second count in values-parked). Main's step beside it for the diagnostic's own cost.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev A=build-exp/ac
date
step() { HZ_BENCH_GRAPH_ONLY=1 timeout 150 "$@" 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; }
echo "== olmoe main"; step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
HZ_BENCH_GRAPH_ONLY=1 timeout 200 $A/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/aclk_olmoe.txt 2>&1; echo "diag olmoe rc $?"
grep -E 'graph \+ pdl  \(' $OUT/aclk_olmoe.txt
for c in 1 2; do
  grep '^ACLK' $OUT/aclk_olmoe.txt | awk -v c=$c '$3 == c && $4 == 1 {n++; for (i = 6; i <= 23; i++) if ($i != "|") s[i] += $i}
    END {if (n) {printf "ACLK olmoe solo, %d chunk(s), n %d, mean cycles:", c, n; for (i = 6; i <= 23; i++) if (i in s) printf " %.0f", s[i] / n; else printf " |"; printf "\n"}}'
done
grep '^ACLK' $OUT/aclk_olmoe.txt | awk '$4 > 1 {n++; for (i = 6; i <= 23; i++) if ($i != "|") s[i] += $i}
  END {if (n) {printf "ACLK olmoe split (nact > 1), n %d, mean cycles:", n; for (i = 6; i <= 23; i++) if (i in s) printf " %.0f", s[i] / n; else printf " |"; printf "\n"}}'
grep -c '^ACLK' $OUT/aclk_olmoe.txt
gzip -f $OUT/aclk_olmoe.txt
date
