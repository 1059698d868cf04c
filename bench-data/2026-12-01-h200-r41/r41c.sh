#!/bin/bash
# Where the routing's 1.7 us go with this round's change: clock64 per phase in block 0 of the router
# cluster (the timeline build plus route_clock2.patch, printf per routing; only the proportions count),
# OLMoE layer shapes. Carry build-bench-new (bench_model_ops_clk) and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
HZ_BENCH_GRAPH_ONLY=1 timeout 200 build-bench-new/bench_model_ops_clk --step olmoe 64 64 > $OUT/clk.txt 2>&1
echo "rc $?"; grep -v RCLK $OUT/clk.txt | tail -3
grep RCLK $OUT/clk.txt | awk '{n++; for(i=2;i<=6;i++){s[i]+=$i; if($i>mx[i])mx[i]=$i}} END{printf "n %d  load+sync %.0f  softmax(warp0) %.0f  rank(max warp) %.0f  to barrier %.0f  write %.0f (means, cycles)\n", n, s[2]/n, s[3]/n, s[4]/n, s[5]/n, s[6]/n}'
grep RCLK $OUT/clk.txt | awk '{print $2, $3, $4, $5, $6}' | sort -n -k4 | awk '{a[NR]=$0} END{print "median row by to-barrier:", a[int(NR/2)]}'
gzip -f $OUT/clk.txt
