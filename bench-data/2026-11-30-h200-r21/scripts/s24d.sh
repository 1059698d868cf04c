#!/usr/bin/env bash
# Call 4 (r21): the q/k/v GEMV's second rows staged in shared memory before its wait (HZ_GEMV_STAGE2).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
for v in main stage2 main stage2 "stage2 0"; do
  set -- $v; echo "== olmoe $v"; HZ_GEMV_STAGE2=${2:-1} HZ_BENCH_GRAPH_ONLY=1 timeout 40 .devcarry/v/$1 --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done
for v in main stage2 main stage2; do
  echo "== qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 50 .devcarry/v/$v --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
done
date
