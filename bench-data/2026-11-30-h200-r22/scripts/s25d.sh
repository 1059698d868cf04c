#!/usr/bin/env bash
# Call 4 (r22): main + HZ_MODEL_GPU_PARTS. compute-sanitizer memcheck (leak check) and initcheck of
# test_model_gpu (quick mode, two pieces each), memcheck of test_prefill_gpu (quick), all side by side
# on one GPU; in front, the lost-device test (sticky error, own process).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s)
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
san() { # name tool binary [env...]
  local name=$1 tool=$2 bin=$3; shift 3
  local extra=(); [[ $tool == memcheck ]] && extra=(--leak-check full)
  ( env HZ_MODEL_GPU_QUICK=1 "$@" timeout 470 compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 86 $bin \
      > $OUT/$name.txt 2>&1; echo "$name rc $? at $(( $(date +%s) - T0 )) s" ) &
}
san memcheck_model_run memcheck $B/tests/unit/model/test_model_gpu HZ_MODEL_GPU_PARTS=run,modes,queued
san memcheck_model_long memcheck $B/tests/unit/model/test_model_gpu HZ_MODEL_GPU_PARTS=long
san initcheck_model_run initcheck $B/tests/unit/model/test_model_gpu HZ_MODEL_GPU_PARTS=run,modes,queued
san initcheck_model_long initcheck $B/tests/unit/model/test_model_gpu HZ_MODEL_GPU_PARTS=long
san memcheck_prefill memcheck $B/tests/unit/model/test_prefill_gpu
timeout 60 $B/cuda/test_gpu_w4a16 --lost > $OUT/lost.txt 2>&1; echo "test_gpu_w4a16 --lost rc $?"; tail -2 $OUT/lost.txt
wait
for f in $OUT/*check*.txt; do echo "== $f"; tail -n 2 $f; done
date
