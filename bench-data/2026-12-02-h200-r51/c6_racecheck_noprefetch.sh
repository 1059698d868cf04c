#!/bin/bash
# Call 6: racecheck of the decode attention kernels in a build whose prefetch_l2 is a no-op (build-r52/nopf,
# wip/probe-no-prefetch: the only prefetch.global.L2 in the tree is in decode_attn.cu).
# Carry build-r52, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); N=build-r52/nopf
rc() { # name kernel-filter env...
  local name=$1 filt=$2; shift 2
  env HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long "$@" timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
    --kernel-name kns=$filt $N/test_model_gpu > $OUT/$name.txt 2>&1
  echo "== $name rc $? ($(( $(date +%s) - T0 )) s): $(grep -E 'SUMMARY|Internal' $OUT/$name.txt | tr '\n' ' ')"
  grep -E "model_gpu:|FAIL|long context" $OUT/$name.txt | head -6
}
rc wattn_pdl wattn_kernel
rc wattn_fma wattn_kernel HZ_GPU_ATTN_MMA=0
rc dattn dattn_kernel HZ_GPU_ATTN_WARP=0
cd $OUT && tar -czf rc6.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
