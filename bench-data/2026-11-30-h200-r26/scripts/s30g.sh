#!/usr/bin/env bash
# Session 27 call 7: the two-pass expert kernels in the kernel timeline (build-x = build-tl's bench), the
# gate_up split both ways; then the fused kernel against the two-pass pair in the plain step bench.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date
for sp in 2 1; do
  echo "== timeline gu split $sp"; HZ_W4A16_GU_SPLIT=$sp HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-x/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_gu$sp.txt 2>&1; echo "rc $?"; sed -n '/step 10, launch/,$p' $OUT/tl_gu$sp.txt
done
for i in 1 2; do for path in twopass fused; do
  echo "== step $path"; HZ_W4A16_PATH=$path HZ_BENCH_GRAPH_ONLY=1 timeout 120 build-dev/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
date
