#!/bin/bash
# Call 6: where the router cluster's row phase goes (router_row_clock.patch on main, build-r47/rclk):
# block 0 thread 0's clock64 after the cluster wait, before and after sum_row, after warp_sum, after
# the logit's stores, after the cluster barrier; printed per launch (the printf slows the step: only
# the proportions count), means over the launches after the first 2,000. Carry build-r47, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s)
HZ_BENCH_GRAPH_ONLY=1 timeout 200 build-r47/rclk/bench_model_ops --step olmoe 64 64 > $OUT/rclk.txt 2>&1; echo "rc $? ($(( $(date +%s) - T0 )) s)"
grep -c RROW $OUT/rclk.txt
grep RROW $OUT/rclk.txt | awk 'NR>2000 {n++; for (i=2;i<=6;i++) s[i]+=$i} END {printf "launches %d: to row start %.0f, sum_row %.0f, warp_sum %.0f, stores %.0f, cluster barrier %.0f cycles\n", n, s[2]/n, s[3]/n, s[4]/n, s[5]/n, s[6]/n}'
grep RROW $OUT/rclk.txt | awk 'NR>2000 {print $3}' | sort -n | awk '{a[NR]=$1} END {printf "sum_row percentiles: 10%% %d, 50%% %d, 90%% %d\n", a[int(NR*0.1)], a[int(NR*0.5)], a[int(NR*0.9)]}'
grep -v RROW $OUT/rclk.txt | tail -3
grep RROW $OUT/rclk.txt | tail -20000 > $OUT/rrow_tail.txt; grep -v RROW $OUT/rclk.txt > $OUT/rclk_console.txt; rm $OUT/rclk.txt
cd $OUT && tar -czf r47f.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
