#!/usr/bin/env bash
# Call 12: the GPU tests on this session's code (main at this call with the cache, transactor and backend
# changes; build-dev rebuilt, release): the kernel test (checks the backend interface version), the model
# test (quick), sessions on threads, prefill (quick), golden on cuda:0.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
date
t() { local name=$1; shift; local s=$(date +%s); timeout 300 "$@" > $OUT/$name.txt 2>&1; echo "$name rc $? ($(( $(date +%s) - s )) s)"; tail -2 $OUT/$name.txt | cut -c1-200; }
t w4a16 build-dev/cuda/test_gpu_w4a16
HZ_MODEL_GPU_QUICK=1 t model_gpu build-dev/tests/unit/model/test_model_gpu
HZ_TEST_DEVICE=cuda:0 t sessions_threads build-dev/tests/unit/model/test_model_sessions_threads
HZ_MODEL_GPU_QUICK=1 t prefill_gpu build-dev/tests/unit/model/test_prefill_gpu
HZ_GOLDEN_DEVICE=cuda:0 t golden_gpu build-dev/tests/golden/test_golden_gpu build-dev/tools/hz-mkmodel build-dev/tools/hz-pack tests/golden/fixtures
declare -A R; LOG=$OUT; eval "$(sed -n '/^DEMO_BUILD=/,/^fi$/p' scripts/gpu-check-model)"; echo "gpu-check-model's demo step: ${R[demo_build]:-not run}"
date
