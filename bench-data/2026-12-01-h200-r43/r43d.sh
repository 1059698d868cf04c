#!/bin/bash
# Call 5: the two-pass expert kernels' shared-memory bank conflicts. gu: gate_up's up codes 64 bytes off
# a 128-byte boundary, odd-row lanes taking the up row as MMA row g; gudn: the same in the down kernel
# (rows 8-15 64 bytes off). Executor tests and test_model_gpu on gudn; the layer alone and the OLMoE step
# bench alternating old / gu / gudn. Carry build-r43 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r43
timeout 200 $B/gudn/test_gpu_w4a16 > $OUT/test_gpu_w4a16.txt 2>&1; echo "test_gpu_w4a16 gudn rc $?"; tail -1 $OUT/test_gpu_w4a16.txt
timeout 200 $B/gu/test_gpu_w4a16 > $OUT/test_gpu_w4a16_gu.txt 2>&1; echo "test_gpu_w4a16 gu rc $?"; tail -1 $OUT/test_gpu_w4a16_gu.txt
timeout 200 $B/gudn/test_model_gpu > $OUT/test_model_gpu.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/test_model_gpu.txt
for v in old gu gudn; do echo "== layer $v"; timeout 60 $B/$v/bench_w4a16 200 olmoe 2>&1 | grep -E '^olmoe  grouped' | head -6; done
for r in 1 2; do
  for v in old gu gudn; do
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -4
  done
done
cd $OUT && tar -czf tests.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
