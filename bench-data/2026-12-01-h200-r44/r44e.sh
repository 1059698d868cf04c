#!/bin/bash
# Call 5: compute-sanitizer memcheck and racecheck of test_model_gpu's long part (quick: 72 positions,
# the tiny models' head_dim 64, so the one-pass kernel by position) on main's kernel (build-r44/new,
# 501d745). Carry build-r44 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r44
export HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long
timeout 90 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/new/test_model_gpu > $OUT/memcheck.txt 2>&1; echo "memcheck rc $? ($(( $(date +%s) - T0 )) s)"; tail -3 $OUT/memcheck.txt
timeout 170 compute-sanitizer --tool racecheck --error-exitcode 9 $B/new/test_model_gpu > $OUT/racecheck.txt 2>&1; echo "racecheck rc $? ($(( $(date +%s) - T0 )) s)"; grep -c -i hazard $OUT/racecheck.txt; grep -E 'long context|OK|FAIL' $OUT/racecheck.txt | head; tail -2 $OUT/racecheck.txt
cd $OUT && tar -czf san.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
