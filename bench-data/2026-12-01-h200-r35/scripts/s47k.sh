#!/usr/bin/env bash
# Call 13: the new "late" part of test_model_gpu (another thread's lease held past a gate's 10 s, then
# the session decodes again) with the fix in hold_end and without it (the same test binary built from the
# tree before the fix); then the whole model test (quick) on the fixed build.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
date
for b in fixed nofix; do
  s=$(date +%s)
  HZ_MODEL_GPU_PARTS=late timeout 150 .devcarry/late/tmg_$b > $OUT/late_$b.txt 2>&1
  echo "late $b rc $? ($(( $(date +%s) - s )) s)"; tail -4 $OUT/late_$b.txt | cut -c1-300
done
s=$(date +%s)
HZ_MODEL_GPU_QUICK=1 timeout 200 build-dev/tests/unit/model/test_model_gpu > $OUT/model_gpu_quick.txt 2>&1
echo "model_gpu quick rc $? ($(( $(date +%s) - s )) s)"; tail -2 $OUT/model_gpu_quick.txt
date
