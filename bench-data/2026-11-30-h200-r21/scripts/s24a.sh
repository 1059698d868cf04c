#!/usr/bin/env bash
# Call 1 (r21): build-dev = gu-bounds + dn-pairs + route_write guard. Its GPU tests, then the step
# bench of five binaries (main, gub, dnp, both, all), alternating, one process each.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/w4.txt
timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
for v in main gub dnp both all main all both gub dnp; do
  echo "== olmoe $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 40 .devcarry/v/$v --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
done
for v in main all main all; do
  echo "== qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 50 .devcarry/v/$v --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
done
date
