#!/bin/bash
# Call 2: the screen test with the tight-levels rows rebuilt (x below half a level but one input), on the
# integer path (build-r42/scr3) and on a build whose bound drops the level term (build-r42/broken: must
# fail); test_model_gpu and the GPU golden fixtures on scr3; the INT8 pass with the next row's codes asked
# for before the current row's sums (db2: two blocks per SM, db3: three) against scr3, alone at both
# shapes. Carry build-r42 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r42
for v in scr3 broken; do
  timeout 120 $B/$v/test_decode_screen > $OUT/test_decode_screen_$v.txt 2>&1; echo "test_decode_screen $v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -E 'FAIL|tight|OLMoE|^OK|FAILED' $OUT/test_decode_screen_$v.txt | head -8
done
timeout 200 $B/scr3/test_model_gpu > $OUT/test_model_gpu.txt 2>&1; echo "test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; grep FAIL $OUT/test_model_gpu.txt | head -3; tail -1 $OUT/test_model_gpu.txt
mkdir -p /tmp/gb && cp -r $B/scr3/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 100 $B/scr3/test_golden_gpu $B/scr3/tools/hz-mkmodel \
  $B/scr3/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -2
for r in 1 2; do
  for v in scr3 db2 db3; do
    echo "== screen $v round $r"; timeout 60 $B/$v/bench_model_ops --screen 200 2>&1 | grep -E 'lm_head|FAIL' | sed 's/  */ /g; s/argmax GEMV.*| screen/screen/'
  done
done
cd $OUT && tar -czf tests.tgz *.txt && rm -f *.txt; ls
echo "done after $(( $(date +%s) - T0 )) s"
