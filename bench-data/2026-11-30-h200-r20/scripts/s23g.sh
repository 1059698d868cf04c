#!/usr/bin/env bash
# Call 8: the K parts with the segment loop nested per part (no per-segment test): test_gpu_w4a16
# (4 parts), then main (old/bench_head) against the new build with 1 and 4 parts, one process each.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
HZ_GPU_TEST_NO_FAULTS=1 timeout 60 $B/cuda/test_gpu_w4a16 > $OUT/w4_p4.txt 2>&1; echo "test_gpu_w4a16 parts 4 rc $?"; tail -1 $OUT/w4_p4.txt
for r in "old 1" "new 1" "new 4" "old 1" "new 4"; do
  set -- $r; X=$B/tests/unit/model/bench_model_ops; [ $1 = old ] && X=.devcarry/old/bench_head
  echo "== $1 HZ_W4A16_GU_PARTS=$2"
  HZ_W4A16_GU_PARTS=$2 HZ_GPU_ATTN_CLUSTER=0 HZ_BENCH_GRAPH_ONLY=1 timeout 40 $X --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done
date
