#!/usr/bin/env bash
# Call 3 (r21): the subnormal expansion, block sums from the staging loops (8-lane shuffles).
# bench (main's bench_w4a16 against the new one), the step bench alternating main / sub.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; grep -E "error/bound|FAIL|OK" $OUT/w4.txt | head -30
timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -3 $OUT/mg.txt
for v in main sub main sub; do
  echo "== layer $v"; HZ_BENCH_EXECUTORS=grouped-2p+pdl,grouped:gate_up timeout 60 .devcarry/v/w4_$v 200 olmoe 2>&1 | grep -E "grouped|ceiling" | head -6
done
for v in main sub main sub main sub; do
  echo "== olmoe $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 40 .devcarry/v/$v --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done
date
