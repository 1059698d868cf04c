#!/bin/bash
# GPU tests on main as it closes this round (only host-side cache code changed since the r39 checks):
# test_decode_gemv (not run in the thirty-eighth round), test_model_gpu, test_decode_screen and the golden
# fixtures on cuda:0. Carry build-bench (tools, libhorizon.so, t/: the test binaries of build-dev) and
# .devcarry (lib/).
export LD_LIBRARY_PATH=$PWD/build-bench:$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
timeout 60 build-bench/t/test_decode_gemv > $OUT/dg.txt 2>&1; echo "test_decode_gemv rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'FAIL' $OUT/dg.txt | head -3; tail -1 $OUT/dg.txt
timeout 150 build-bench/t/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'FAIL' $OUT/mg.txt | head -3; tail -1 $OUT/mg.txt
timeout 40 build-bench/t/test_decode_screen > $OUT/ds.txt 2>&1; echo "test_decode_screen rc $? ($(( $(date +%s) - T0 )) s)"; tail -1 $OUT/ds.txt
mkdir -p /tmp/gb && cp -r build-bench/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 60 build-bench/t/test_golden_gpu build-bench/tools/hz-mkmodel \
  build-bench/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -3
