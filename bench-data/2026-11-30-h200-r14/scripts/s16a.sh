#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date; git log -1 --format=%h 2>/dev/null
timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -2 $OUT/tmg.txt
HZ_GPU_CARVEOUT=100 timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg100.txt 2>&1; echo "test_model_gpu carve100 rc $?"; tail -2 $OUT/tmg100.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -2 $OUT/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -2 $OUT/golden.txt
for v in def 100 def 100; do
  if [ $v = def ]; then unset HZ_GPU_CARVEOUT; else export HZ_GPU_CARVEOUT=$v; fi
  echo "olmoe carve=$v"; HZ_BENCH_GRAPH_ONLY=1 timeout 70 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph|FAIL|token"
done
for v in def 100; do
  if [ $v = def ]; then unset HZ_GPU_CARVEOUT; else export HZ_GPU_CARVEOUT=$v; fi
  echo "qwen carve=$v"; HZ_BENCH_GRAPH_ONLY=1 timeout 90 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph|FAIL|token"
done
unset HZ_GPU_CARVEOUT
date
timeout 150 .devcarry/hostcopy > $OUT/hostcopy.txt 2>&1; echo "hostcopy rc $?"; cat $OUT/hostcopy.txt
date
