#!/usr/bin/env bash
# Call 3 (wip/l2-pf): the prefetch spread wider (blocks, pieces), all rows, other fork points.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
step() { echo "== $*"; env "$@" HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror'; }
step HZ_GPU_L2_PF=0
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_BLOCKS=264 HZ_GPU_L2_PF_PIECE=2048
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_BLOCKS=528 HZ_GPU_L2_PF_PIECE=1024
step HZ_GPU_L2_PF=2 HZ_GPU_L2_PF_BLOCKS=264 HZ_GPU_L2_PF_PIECE=4096
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_BLOCKS=264 HZ_GPU_L2_PF_PIECE=2048 HZ_GPU_L2_PF_AT=1
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_BLOCKS=264 HZ_GPU_L2_PF_PIECE=2048 HZ_GPU_L2_PF_AT=3
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_BLOCKS=264 HZ_GPU_L2_PF_PIECE=2048 HZ_GPU_L2_PF_MODE=1
step HZ_GPU_L2_PF=1 HZ_GPU_L2_PF_BLOCKS=264 HZ_GPU_L2_PF_PIECE=2048 HZ_GPU_L2_PF_MODE=2
step HZ_GPU_L2_PF=0
date
