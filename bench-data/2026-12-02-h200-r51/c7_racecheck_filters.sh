#!/bin/bash
# Call 7: is it the filter? racecheck of test_model_gpu's long part (quick) on main's build
# (build-r52/nopdl: main + the NO_PDL switch, unset here) with --kernel-name filters that match no kernel,
# the decode GEMV, the router cluster, and the attention by exact name prefix; then unfiltered for 240 s.
# Carry build-r52, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); N=build-r52/nopdl
rc() { # name limit sanitizer-args...
  local name=$1 lim=$2; shift 2
  env HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long timeout $lim compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$@" $N/test_model_gpu > $OUT/$name.txt 2>&1
  echo "== $name rc $? ($(( $(date +%s) - T0 )) s): $(grep -E 'SUMMARY|Internal' $OUT/$name.txt | tr '\n' ' ')"
  grep -E "model_gpu:|FAIL|long context" $OUT/$name.txt | head -3
}
rc none 60 --kernel-name kns=no_such_kernel_anywhere
rc gemv 90 --kernel-name kns=dgemv_kernel
rc router 90 --kernel-name kns=router_cluster
rc all 240
cd $OUT && tar -czf rc7.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
