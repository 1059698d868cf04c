#!/bin/bash
# Call 5: the pick (the screen's second pass) asking for its first tile of bounds and its first row beside
# x (build-r42/pick) against main 8e791b7 (build-r42/base): the GPU tests and golden fixtures on pick,
# compute-sanitizer on test_decode_screen, the screen alone alternating, one step bench each.
# Carry build-r42 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r42; N=$B/pick
for t in test_decode_screen test_model_gpu test_decode_gemv test_router_cluster test_prefill_gpu; do
  timeout 150 $N/$t > $OUT/$t.txt 2>&1; echo "$t rc $? ($(( $(date +%s) - T0 )) s)"; grep FAIL $OUT/$t.txt | head -3; tail -1 $OUT/$t.txt
done
grep -E 'OLMoE|tight' $OUT/test_decode_screen.txt | head -6
mkdir -p /tmp/gb && cp -r $N/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 100 $N/test_golden_gpu $N/tools/hz-mkmodel \
  $N/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -2
for tool in memcheck racecheck initcheck synccheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  timeout 150 compute-sanitizer --tool $tool $extra --error-exitcode 9 $N/test_decode_screen > $OUT/san_$tool.txt 2>&1
  echo "sanitizer $tool rc $? ($(( $(date +%s) - T0 )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' $OUT/san_$tool.txt | tail -1)"
done
for r in 1 2 3; do
  for v in base pick; do
    echo "== screen $v round $r"; timeout 60 $B/$v/bench_model_ops --screen 200 2>&1 | grep -E 'lm_head|FAIL' | sed 's/  */ /g; s/argmax GEMV.*| screen/screen/'
  done
done
st() { b=$1 m=$2 c=$3; echo "== $b $m"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$b/bench_model_ops --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror|FAIL' | sed 's/.*(graph)://'; }
for v in base pick; do st $v olmoe 64; done
for v in base pick; do st $v qwen 60; done
cd $OUT && tar -czf tests.tgz *.txt && rm -f *.txt; ls
echo "done after $(( $(date +%s) - T0 )) s"
