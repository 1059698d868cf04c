#!/bin/bash
# Call 6: racecheck (and synccheck) on the one-pass attention alone (compute-sanitizer --kernel-name
# kns=wattn_kernel: only that kernel instrumented), test_model_gpu's long part (quick), build-r50/new.
# Call 5's racecheck over every kernel ran past its 110 s.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); N=build-r50/new
for tool in racecheck synccheck; do
  HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long timeout 100 compute-sanitizer --tool $tool --kernel-name kns=wattn_kernel \
    --error-exitcode 9 $N/test_model_gpu > $OUT/${tool}_wattn.txt 2>&1
  echo "$tool (wattn_kernel) test_model_gpu long quick rc $? ($(( $(date +%s) - T0 )) s)"
  grep -E "SUMMARY|model_gpu|rror|groups by position" $OUT/${tool}_wattn.txt | tail -4
done
cd $OUT && tar -czf sanit.tgz *.txt && rm -f *.txt
