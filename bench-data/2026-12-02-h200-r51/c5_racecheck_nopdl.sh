#!/bin/bash
# Call 5: racecheck of the decode attention kernels with the long part's graph launched without
# programmatic dependent launch (HZ_MODEL_GPU_NO_PDL=1, build-r52/nopdl: main + that switch);
# the same with PDL (main's default) for contrast. Carry build-r52, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); N=build-r52/nopdl
rc() { # name kernel-filter env...
  local name=$1 filt=$2; shift 2
  env HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long "$@" timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
    --kernel-name kns=$filt $N/test_model_gpu > $OUT/$name.txt 2>&1
  echo "== $name rc $? ($(( $(date +%s) - T0 )) s): $(grep -E 'SUMMARY|Internal' $OUT/$name.txt | tr '\n' ' ')"
  grep -E "model_gpu:|FAIL|long context" $OUT/$name.txt | head -6
}
rc wattn_pdl wattn_kernel
rc wattn_nopdl wattn_kernel HZ_MODEL_GPU_NO_PDL=1
rc wattn_fma_nopdl wattn_kernel HZ_MODEL_GPU_NO_PDL=1 HZ_GPU_ATTN_MMA=0
rc dattn_nopdl dattn_kernel HZ_MODEL_GPU_NO_PDL=1
cd $OUT && tar -czf rc5.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
