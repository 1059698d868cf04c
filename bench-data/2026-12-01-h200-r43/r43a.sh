#!/bin/bash
# Call 2: gate_up's bytes asked for by one warp in tile order (build-r43/new) against main (build-r43/old):
# the executor tests and test_model_gpu on new; the layer alone (bench_w4a16 200 olmoe) and the step
# bench (OLMoE c64, Qwen c60) alternating old/new. Carry build-r43 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r43
timeout 200 $B/new/test_gpu_w4a16 > $OUT/test_gpu_w4a16.txt 2>&1; echo "test_gpu_w4a16 rc $? ($(( $(date +%s) - T0 )) s)"; grep -ciE 'fail' $OUT/test_gpu_w4a16.txt; tail -2 $OUT/test_gpu_w4a16.txt
timeout 200 $B/new/test_model_gpu > $OUT/test_model_gpu.txt 2>&1; echo "test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; grep FAIL $OUT/test_model_gpu.txt | head -3; tail -1 $OUT/test_model_gpu.txt
for v in old new; do echo "== layer $v"; timeout 60 $B/$v/bench_w4a16 200 olmoe 2>&1 | grep -E 'grouped-2p\+pdl|grouped ' | head -4; done
for r in 1 2; do
  for v in old new; do
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl|tokens|FAIL' | head -4
  done
done
for v in old new; do
  echo "== step qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl|tokens|FAIL' | head -4
done
cd $OUT && tar -czf tests.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
