#!/bin/bash
# Call 1 (forty-first round): the lm_head screen's INT8 pass on the integer path (x quantized to levels per
# step, dp2a; build-r42/scr3 at three blocks per SM, scr4 at four), and the router tail's GEMV at three
# blocks per SM (build-r42/minb3), against main (build-r42/main, 5b91319). The screen test first, then the
# screen alone at both shapes, then the step benches alternating. Carry build-r42 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r42
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date
timeout 120 $B/scr3/test_decode_screen > $OUT/test_decode_screen.txt 2>&1; echo "test_decode_screen rc $? ($(( $(date +%s) - T0 )) s)"
grep -E 'FAIL|tight|OLMoE|OK|FAILED' $OUT/test_decode_screen.txt | head -12
for r in 1 2; do
  for v in main scr3 scr4; do
    echo "== screen $v round $r"; timeout 60 $B/$v/bench_model_ops --screen 200 2>&1 | grep -E 'lm_head|FAIL|copy:' | sed 's/  */ /g'
  done
done
echo "screens done ($(( $(date +%s) - T0 )) s)"
st() { b=$1 m=$2 c=$3; echo "== $b $m"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$b/bench_model_ops --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror|FAIL' | sed 's/.*(graph)://'; }
for r in 1 2; do
  for v in main scr3; do st $v olmoe 64; done
done
echo "olmoe done ($(( $(date +%s) - T0 )) s)"
for r in 1 2; do
  for v in main scr3 minb3; do st $v qwen 60; done
done
echo "done after $(( $(date +%s) - T0 )) s"
