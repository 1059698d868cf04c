#!/bin/bash
# Call 2: the router cluster's first cluster wait before the dependency wait (cw) against main: OLMoE
# step alternating, test_router_cluster, test_model_gpu; clock64 probes (wip/router-clock) of the router
# cluster's phases (block 0) and of the q/k/v GEMV's x build (block 0 and the last block).
# Carry build-r45 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r45
for r in 1 2 3; do
  for v in main cw; do
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
  done
done
for t in test_router_cluster test_model_gpu; do
  timeout 120 $B/cw/$t > $OUT/$t.txt 2>&1; echo "$t rc $? ($(( $(date +%s) - T0 )) s)"; tail -2 $OUT/$t.txt
done
HZ_BENCH_GRAPH_ONLY=1 timeout 120 $B/rc/bench_model_ops --step olmoe 64 16 > $OUT/clk.txt 2>&1; echo "clock probe rc $? ($(( $(date +%s) - T0 )) s)"
grep -c RCLK $OUT/clk.txt; grep -c QCLK $OUT/clk.txt
echo "RCLK columns: loads reduce norm+zero sync cw1 rows cw2 keys rank softmax write (cycles)"
grep '^RCLK' $OUT/clk.txt | awk '{for(i=2;i<=NF;i++){s[i]+=$i}; n++} END {printf "mean"; for(i=2;i<=12;i++) printf " %d", s[i]/n; printf "  (n %d)\n", n}'
for c in 2 3 4 5 6 7 8 9 10 11 12; do grep '^RCLK' $OUT/clk.txt | awk -v c=$c '{print $c}' | sort -n | awk '{a[NR]=$1} END {printf "%d ", a[int(NR/2)]}'; done; echo " (medians)"
echo "QCLK: block loads reduce norm+sync"
for b in first last; do
  grep '^QCLK' $OUT/clk.txt | awk -v b=$b '(b=="first" && $2==0) || (b=="last" && $2!=0) {s3+=$3; s4+=$4; s5+=$5; n++} END {if (n) printf "%s mean %d %d %d (n %d)\n", b, s3/n, s4/n, s5/n, n}'
done
grep -E 'graph \+ pdl  \(' $OUT/clk.txt | head -2
cd $OUT && grep -v -E '^(R|Q)CLK' clk.txt > clk_rest.txt; grep -E '^(R|Q)CLK' clk.txt | head -20000 > clk_lines.txt; rm clk.txt; tar -czf r45b.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
