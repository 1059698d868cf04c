#!/bin/bash
# Call 8: how gate_up's math after its last tile scales with warps: the timeline with HZ_W4A16_GU_SPLIT=1
# (one warp per tile: 8 warps per block, each all of K) against the default (two), and ncu's scheduler
# and warp-state sections for one gate_up launch of the step (build-r42/pick/bench_model_ops, main's
# kernels). Carry build-r42 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
for sp in 1 2; do
  echo "== HZ_W4A16_GU_SPLIT=$sp"
  HZ_W4A16_GU_SPLIT=$sp HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-r42/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_split$sp.txt 2>&1; echo "rc $?"
  grep -E '^    (role|gate_up|down|qkv GEMV) |chain|graph \+ pdl  \(graph\)' $OUT/tl_split$sp.txt | head -12
done
which ncu || ls /usr/local/cuda/bin | grep -i ncu
HZ_BENCH_GRAPH_ONLY=1 timeout 240 ncu --clock-control none --kernel-name regex:bulk_gate_up --launch-skip 40 --launch-count 1 \
  --section SchedulerStats --section WarpStateStats --section LaunchStats --section Occupancy \
  build-r42/pick/bench_model_ops --step olmoe 64 8 > $OUT/ncu_gate_up.txt 2>&1; echo "ncu rc $?"
grep -E 'Duration|Issued|Eligible|Active Warps|No Eligible|Stall|Warp Cycles|Registers|Achieved|Theoretical' $OUT/ncu_gate_up.txt | head -40
