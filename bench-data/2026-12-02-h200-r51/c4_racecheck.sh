#!/bin/bash
# Call 4: why racecheck stops on the one-pass attention (wattn_kernel) with an internal error. Main's
# build (build-r51/main, f1ecaa4's device code); test_model_gpu's long part (quick). Carry build-r51, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); N=build-r51/main
compute-sanitizer --version | tail -1
compute-sanitizer --help 2>&1 | grep -i -A1 "racecheck" | grep -- "--" | head -20
rc() { # name env... -- sanitizer args
  local name=$1; shift
  env "$@" timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $RC_ARGS $N/test_model_gpu > $OUT/$name.txt 2>&1
  echo "== $name rc $? ($(( $(date +%s) - T0 )) s): $(grep -E 'SUMMARY|Internal' $OUT/$name.txt | tr '\n' ' ')"
  grep -E "model_gpu:|FAIL" $OUT/$name.txt | head -2
}
export HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long
RC_ARGS="--kernel-name kns=dattn_kernel" rc chunked_g2 HZ_GPU_ATTN_WARP=0
RC_ARGS="--kernel-name kns=wattn_kernel --racecheck-memcpy-async no" rc wattn_noasync HZ_GPU_ATTN_WARP=1
RC_ARGS="--kernel-name kns=wattn_kernel --racecheck-memcpy-async no" rc wattn_fma_noasync HZ_GPU_ATTN_MMA=0
RC_ARGS="--kernel-name kns=wattn_kernel --racecheck-detect-level info" rc wattn_info HZ_GPU_ATTN_WARP=1
cd $OUT && tar -czf rc.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
