#!/bin/bash
# Call 3: the GPU tests' host sum broken on purpose (tests/unit/model/gemv_host_sum.h with one
# accumulator instead of the kernel's two, build-r50/mut): test_decode_gemv and test_decode_screen must
# fail; main's builds of the same tests (build-r49/main) must pass.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
for t in test_decode_gemv test_decode_screen; do
  for b in build-r49/main build-r50/mut; do
    timeout 120 $b/$t > $OUT/${t}_$(basename $b).txt 2>&1; echo "== $b/$t rc $?"
    grep -iE "fail|mismatch|differ|OK" $OUT/${t}_$(basename $b).txt | head -4
    tail -1 $OUT/${t}_$(basename $b).txt
  done
done
cd $OUT && tar -czf mut.tgz *.txt && rm -f *.txt
