#!/usr/bin/env bash
# Session 28 call 2: wip/l2-stream with the fused kernel's copies unhinted: kernel tests, model test, Qwen
# step alternating, the router's routing run twice (timeline, diagnostic build), hz-bench OLMoE c64 A/B.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date
HZ_GPU_TEST_NO_FAULTS=1 timeout 120 build-l2s/cuda/test_gpu_w4a16 > $OUT/w4_l2.txt 2>&1; echo "l2 test_gpu_w4a16 rc $?"; grep -E 'FAIL' $OUT/w4_l2.txt | head -5; tail -1 $OUT/w4_l2.txt
HZ_W4A16_GU_SPLIT=1 HZ_W4A16_DN_SPLIT=2 HZ_GPU_TEST_NO_FAULTS=1 timeout 120 build-l2s/cuda/test_gpu_w4a16 > $OUT/w4s_l2.txt 2>&1; echo "l2 test_gpu_w4a16 splits rc $?"; tail -1 $OUT/w4s_l2.txt
echo "== l2 test_model_gpu"; HZ_MODEL_GPU_PARTS=run timeout 150 build-l2s/tests/unit/model/test_model_gpu > $OUT/mg_l2.txt 2>&1; echo "rc $?"; grep FAIL $OUT/mg_l2.txt | head -3
for i in 1 2; do for b in build-dev build-l2s; do
  echo "== qwen step $b"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 $b/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph|FAIL'
done; done
echo "== timeline route twice"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-l2td/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_twice.txt 2>&1; echo "rc $?"; sed -n '/timeline over/,/main-stream/p' $OUT/tl_twice.txt
if [ ! -f /tmp/hz-bench-work/olmoe.hzq ]; then timeout 200 scripts/bench --build build-dev --models olmoe --steps models --out $OUT/m > $OUT/models.txt 2>&1; echo "models rc $?"; fi
for i in 1 2; do for b in build-dev build-l2s; do
  timeout 40 $b/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/ab_${b}_$i.json > $OUT/ab_${b}_$i.txt 2>&1; echo "$b rc $? $(grep -A1 '^resident' $OUT/ab_${b}_$i.txt | tail -1)"
done; done
date
