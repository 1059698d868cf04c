#!/usr/bin/env bash
# Call 16: compute-sanitizer memcheck on this round's code: test_model_gpu (quick; release build-dev) and
# the demo's decode with the debugoptimized build (the invariant checker's read_now on its own stream).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
date
s=$(date +%s)
HZ_MODEL_GPU_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 build-dev/tests/unit/model/test_model_gpu > $OUT/memcheck_model.txt 2>&1
echo "memcheck model_gpu rc $? ($(( $(date +%s) - s )) s)"; tail -2 $OUT/memcheck_model.txt
w=/tmp/demo; mkdir -p $w
build-dbg/tools/hz-mkmodel --arch olmoe --preset tiny --seed 1 $w/hf > /dev/null && build-dbg/tools/hz-pack $w/hf $w/model.hzq --quiet
s=$(date +%s)
timeout 120 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 build-dbg/examples/decode $w/model.hzq --device cuda:0 --resident 4 --tokens 24 --prompt 1,2,3,4,5,6,7,8 > $OUT/memcheck_demo.txt 2>&1
echo "memcheck demo (debugoptimized) rc $? ($(( $(date +%s) - s )) s)"; tail -3 $OUT/memcheck_demo.txt
date
