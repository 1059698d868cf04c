#!/usr/bin/env bash
# Call 11 (carry build-dev = main + the screen's codes in two register buffers used in turn (uncommitted),
# .devcarry/bench_model_ops_prev = f60991b's build): the kernel test, then --screen and the steps,
# previous / new alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
B=build-dev
date
timeout 100 $B/tests/unit/model/test_decode_screen > $OUT/ds.txt 2>&1; echo "test_decode_screen rc $?"; tail -1 $OUT/ds.txt
HZ_MODEL_GPU_PARTS=screen,run timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/mg.txt
for r in 1 2; do
  for b in .devcarry/bench_model_ops_prev $B/tests/unit/model/bench_model_ops; do
    echo "== $b"; timeout 60 $b --screen 200 2>&1 | grep -E "lm_head|FAIL" | cut -c1-200
  done
done
st() { local bin=$1 arch=$2 ne=$3; echo "== $bin $arch"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step $arch $ne 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for b in .devcarry/bench_model_ops_prev $B/tests/unit/model/bench_model_ops; do st $b olmoe 64; done
for b in .devcarry/bench_model_ops_prev $B/tests/unit/model/bench_model_ops; do st $b qwen 60; done
date
