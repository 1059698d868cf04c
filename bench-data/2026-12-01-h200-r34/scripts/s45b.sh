#!/usr/bin/env bash
# Session 35, call 3: the correctness half of scripts/gpu-check and scripts/gpu-check-model on main
# (9ecc76c, code of dc6ae47), without their benchmarks and the prefill test's sanitizers (too long for
# what was left of the session's device time). Carry ["build-dev", ".devcarry"].
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
B=build-dev; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
r() { n=$1; shift; timeout "$@" > $OUT/$n.txt 2>&1; rc=$?; echo "== $n rc $rc"; tail -n 2 $OUT/$n.txt | cut -c1-200; t; }
date
r kernels 120 $B/cuda/test_gpu_w4a16
HZ_W4A16_GU_SPLIT=1 HZ_W4A16_DN_SPLIT=1 r kernels_splits 120 $B/cuda/test_gpu_w4a16
r lost 60 $B/cuda/test_gpu_w4a16 --lost
HZ_GPU_TEST_NO_FAULTS=1 HZ_GPU_TEST_TRIALS=1 r kernels_memcheck 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 $B/cuda/test_gpu_w4a16
HZ_GPU_TEST_NO_FAULTS=1 HZ_GPU_TEST_TRIALS=1 r kernels_racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 86 $B/cuda/test_gpu_w4a16
r model_gpu 120 $B/tests/unit/model/test_model_gpu
HZ_TEST_DEVICE=cuda:0 r sessions_threads 150 $B/tests/unit/model/test_model_sessions_threads
r router_cluster 60 $B/tests/unit/model/test_router_cluster
HZ_GOLDEN_DEVICE=cuda:0 r golden_gpu 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures
r prefill_gpu 300 $B/tests/unit/model/test_prefill_gpu
HZ_MODEL_GPU_QUICK=1 r model_memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 86 $B/tests/unit/model/test_model_gpu
date
