#!/usr/bin/env bash
# Call 2 (carry build-dev, build-exp = slim timeline bench + the previous main's bench, .devcarry).
# The decode GEMV's shared-memory row slots (HZ_GPU_GEMV_SLOTS, 4 by default in this build; 0 = the
# previous row order): the new bit-exact GEMV test both ways, then the step A/B, alternating processes.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
timeout 120 $B/tests/unit/model/test_decode_gemv > $OUT/gemv4.txt 2>&1; echo "test_decode_gemv rc $?"; cat $OUT/gemv4.txt
timeout 120 $B/tests/unit/model/test_decode_gemv --no-slots > $OUT/gemv0.txt 2>&1; echo "test_decode_gemv --no-slots rc $?"; tail -2 $OUT/gemv0.txt
for i in 1 2; do
  for n in 4 0; do echo "== olmoe slots $n"; HZ_GPU_GEMV_SLOTS=$n HZ_BENCH_GRAPH_ONLY=1 timeout 120 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; done
  echo "== olmoe previous main"; HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-exp/old/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'
done
for n in 4 0 4 0; do echo "== qwen slots $n"; HZ_GPU_GEMV_SLOTS=$n HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; done
for n in 4 0; do
  echo "== timeline slots $n"; HZ_GPU_GEMV_SLOTS=$n HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-exp/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_$n.txt 2>&1; echo "rc $?"; sed -n '/timeline over/,$p' $OUT/tl_$n.txt
done
HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
date
