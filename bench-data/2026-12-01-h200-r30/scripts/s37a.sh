#!/usr/bin/env bash
# Call 1 (wip/l2-pf, carry build-dev .devcarry): the next layer's q/k/v rows asked of L2 from a side
# stream (HZ_GPU_L2_PF 1 = rows loaded after the GEMV's wait, 2 = all; _AT 0 after o, 1 after attention,
# 2 after qkv, 3 after router; _MODE 0 bulk, 1 lines, 2 bulk evict-last), OLMoE step, alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
step() { echo "== $*"; env "$@" HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror'; }
step HZ_GPU_L2_PF=0
step HZ_GPU_L2_PF=1
step HZ_GPU_L2_PF=2
step HZ_GPU_L2_PF=0
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_AT=3
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_AT=2
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_MODE=2
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_MODE=1
step HZ_GPU_L2_PF=0
date
