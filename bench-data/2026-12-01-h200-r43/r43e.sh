#!/bin/bash
# Call 6: act = gudn + the down kernels' staged intermediate swizzled (16-byte units of chunk c at
# i ^ ((c >> 1) & 1)) in the two-pass down kernel and the fused kernel (Qwen's path). Executor tests and
# test_model_gpu on act; the layer alone; OLMoE and Qwen step benches alternating old / act.
# Carry build-r43 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r43
timeout 200 $B/act/test_gpu_w4a16 > $OUT/test_gpu_w4a16.txt 2>&1; echo "test_gpu_w4a16 act rc $?"; tail -1 $OUT/test_gpu_w4a16.txt
timeout 200 $B/act/test_model_gpu > $OUT/test_model_gpu.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/test_model_gpu.txt
for v in old act; do echo "== layer $v"; timeout 60 $B/$v/bench_w4a16 200 olmoe 2>&1 | grep -E '^olmoe  grouped' | head -4; timeout 60 $B/$v/bench_w4a16 200 qwen 2>&1 | grep -E '^qwen  *grouped' | head -3; done
for r in 1 2; do
  for v in old act; do
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -4
  done
done
for r in 1 2; do
  for v in old act; do
    echo "== step qwen $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -4
  done
done
cd $OUT && tar -czf tests.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
