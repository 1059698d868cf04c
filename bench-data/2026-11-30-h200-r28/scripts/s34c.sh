#!/usr/bin/env bash
# Call 4 (carry build-dev = slots default 0 + HZ_GPU_GEMV_NW_SMEM, build-exp: tl, m0 = main at bf3f2a7, .devcarry).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
timeout 120 $B/tests/unit/model/test_decode_gemv > $OUT/gemv.txt 2>&1; echo "test_decode_gemv rc $?"; tail -1 $OUT/gemv.txt
timeout 120 $B/tests/unit/model/test_decode_gemv --slots > $OUT/gemv4.txt 2>&1; echo "test_decode_gemv --slots rc $?"; tail -1 $OUT/gemv4.txt
step() { HZ_BENCH_GRAPH_ONLY=1 timeout 150 "$@" 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; }
for i in 1 2; do
  echo "== olmoe main bf3f2a7"; step build-exp/m0/tests/unit/model/bench_model_ops --step olmoe 64 64
  echo "== olmoe default"; step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
  echo "== olmoe nw_smem"; HZ_GPU_GEMV_NW_SMEM=1 step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
done
for i in 1 2; do
  echo "== qwen main bf3f2a7"; step build-exp/m0/tests/unit/model/bench_model_ops --step qwen 60 64
  echo "== qwen default"; step $B/tests/unit/model/bench_model_ops --step qwen 60 64
  echo "== qwen nw_smem"; HZ_GPU_GEMV_NW_SMEM=1 step $B/tests/unit/model/bench_model_ops --step qwen 60 64
done
echo "== timeline nw_smem"; HZ_GPU_GEMV_NW_SMEM=1 HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-exp/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_nw.txt 2>&1; echo "rc $?"; sed -n '/timeline over/,/lm_head      after/p' $OUT/tl_nw.txt
HZ_GPU_GEMV_NW_SMEM=1 HZ_MODEL_GPU_PARTS=run timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu nw_smem rc $?"; tail -1 $OUT/mg.txt
for d in build-exp/m0 $B; do n=$(basename $d)
  cuobjdump -sass $d/libhorizon.so.0.1.0 2>/dev/null | awk '/Function : /{p = ($0 ~ /dgemv_kernelILb1ELb0ELi8ELi4E/)} p' > $OUT/sass_$n.txt; wc -l $OUT/sass_$n.txt
done
date
