#!/bin/bash
# Call 4: where the two-pass expert kernels' math waits. ncu on one bulk_gate_up and one bulk_down launch
# of main's OLMoE step (build-r47/main, aa3a9cb), with per-instruction stall sampling (SourceCounters)
# and the memory, compute and warp-state sections; then the report's SASS page with its samples.
# Carry build-r47 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
ncu --version | tail -1
HZ_BENCH_GRAPH_ONLY=1 timeout 300 ncu --clock-control none --kernel-name regex:'bulk_(gate_up|down)' --launch-skip 40 --launch-count 2 \
  --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section InstructionStats --section SchedulerStats --section SpeedOfLight \
  -o $OUT/ex build-r47/main/bench_model_ops --step olmoe 64 8 > $OUT/ncu_run.txt 2>&1; echo "ncu rc $? ($(( $(date +%s) - T0 )) s)"
tail -3 $OUT/ncu_run.txt
ncu -i $OUT/ex.ncu-rep --page details > $OUT/details.txt 2>&1; echo "details rc $?"
ncu -i $OUT/ex.ncu-rep --page source --print-source sass --csv > $OUT/sass.csv 2>&1; echo "sass rc $? $(wc -l < $OUT/sass.csv) lines"
grep -E 'bulk_|Duration|Shared|Pipe|Stall|stall|Issue Slots|Executed Ipc|Warp Cycles Per Issued|L1/TEX Hit|Bank' $OUT/details.txt | head -60
ls -la $OUT
echo "done after $(( $(date +%s) - T0 )) s"
