#!/usr/bin/env bash
# Call 3: the two-pass expert kernels chosen for models without a shared expert (OLMoE): tests, step.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
echo "== test_model_gpu"; timeout 200 $B/tests/unit/model/test_model_gpu 2>&1 | grep -E "FAIL|OK|graph\+pdl|twopass" | tail -8
echo "== test_prefill_gpu"; timeout 200 $B/tests/unit/model/test_prefill_gpu 2>&1 | tail -2
echo "== golden gpu"; HZ_GOLDEN_DEVICE=cuda:0 timeout 200 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures 2>&1 | tail -6
for i in 1 2; do
  for p in default fused; do
    echo "== olmoe $p $i"
    if [ $p = fused ]; then export HZ_W4A16_PATH=fused; else unset HZ_W4A16_PATH; fi
    HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
  done
done
unset HZ_W4A16_PATH
echo "== qwen default"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
