#!/usr/bin/env bash
# Session 27 call 10: the down kernel releasing the next q/k/v GEMV after its wait (HZ_W4A16_DN_RELEASE=late)
# against at its start: step A/B alternating, then test_model_gpu run part with it.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
for i in 1 2; do for r in late early; do
  echo "== step release $r"; HZ_W4A16_DN_RELEASE=$r HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
echo "== test_model_gpu late"; HZ_W4A16_DN_RELEASE=late HZ_MODEL_GPU_PARTS=run timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "rc $?"; grep FAIL $OUT/mg.txt | head -3
date
