#!/usr/bin/env bash
# Call 4 (wip/attn-groups, carry build-dev .devcarry): decode attention with two groups of 256 threads
# per block (HZ_ATTN_GROUPS=2; HZ_ATTN_SOLO = chunks kept in one block). Correctness first, then the step.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
for v in "HZ_ATTN_GROUPS=2" "HZ_ATTN_GROUPS=2 HZ_ATTN_SOLO=1"; do
  echo "== test_model_gpu $v"; env $v timeout 150 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "rc $?"
  grep -iE "attention|rel err|FAIL|PASSED|passed" $OUT/mg.txt | head -8; tail -2 $OUT/mg.txt
done
echo "== golden gpu G=2"; HZ_ATTN_GROUPS=2 timeout 100 $B/tests/golden/test_golden_gpu 2>&1 | tail -3
date
step() { m=$1; shift; echo "== $m $*"; env "$@" HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror'; }
step "olmoe 64" HZ_ATTN_GROUPS=1
step "olmoe 64" HZ_ATTN_GROUPS=2
step "olmoe 64" HZ_ATTN_GROUPS=2 HZ_ATTN_SOLO=2
step "olmoe 64" HZ_ATTN_GROUPS=2 HZ_ATTN_SOLO=8
step "olmoe 64" HZ_ATTN_GROUPS=1
step "olmoe 64" HZ_ATTN_GROUPS=2
step "qwen 60" HZ_ATTN_GROUPS=1
step "qwen 60" HZ_ATTN_GROUPS=2
date
