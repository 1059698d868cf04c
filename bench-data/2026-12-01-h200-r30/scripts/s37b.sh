#!/usr/bin/env bash
# Call 2 (wip/l2-pf): what the side branch costs without any prefetch (mode 3: launch only), with a
# full edge instead of the programmatic one, and with fewer / more blocks.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
step() { echo "== $*"; env "$@" HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror'; }
step HZ_GPU_L2_PF=0
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_MODE=3
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_MODE=3 HZ_GPU_L2_PF_EDGE=0
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_EDGE=0
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_BLOCKS=4
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_BLOCKS=132 HZ_GPU_L2_PF_PIECE=4096
step HZ_GPU_L2_PF=0
date
