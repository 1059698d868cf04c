#!/usr/bin/env bash
# Session 13, call 1: main (209002b) on the GPU, then the programmatic side edge (wip/side-pdl-edge).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
timeout 60 build-dev/tests/unit/model/test_model_gpu > $OUT/main_tmg.txt 2>&1; echo "main test_model_gpu rc $?"; tail -1 $OUT/main_tmg.txt
timeout 120 build-dev/tests/unit/model/test_prefill_gpu > $OUT/main_tpg.txt 2>&1; echo "main test_prefill_gpu rc $?"; tail -1 $OUT/main_tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 build-dev/tests/golden/test_golden_gpu build-dev/tools/hz-mkmodel build-dev/tools/hz-pack tests/golden/fixtures > $OUT/main_golden.txt 2>&1; echo "main golden rc $?"; tail -2 $OUT/main_golden.txt; t
bash .devcarry/s13a.sh
t
