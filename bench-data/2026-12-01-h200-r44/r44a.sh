#!/bin/bash
# Call 1: the ragged W4A16 shape (first run); the one-pass warp attention below 256 positions
# (bench_model_ops attention checks against FP64 and timings; test_model_gpu); OLMoE and Qwen step
# benches: old (9294a6e) / new / new with HZ_GPU_ATTN_WARP=0, alternating. Carry build-r44 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r44
timeout 120 $B/new/test_gpu_w4a16 > $OUT/test_gpu_w4a16.txt 2>&1; echo "test_gpu_w4a16 rc $? ($(( $(date +%s) - T0 )) s)"; grep -i -E 'ragged|FAIL' $OUT/test_gpu_w4a16.txt | head -5; tail -1 $OUT/test_gpu_w4a16.txt
timeout 150 $B/new/bench_model_ops 100 > $OUT/ops.txt 2>&1; echo "bench_model_ops rc $? ($(( $(date +%s) - T0 )) s)"; grep -E '^attention|groups 2|split \(|old  ' $OUT/ops.txt | head -60
timeout 150 $B/new/test_model_gpu > $OUT/test_model_gpu.txt 2>&1; echo "test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'long context|FAIL' $OUT/test_model_gpu.txt | head; tail -1 $OUT/test_model_gpu.txt
for r in 1 2; do
  for v in old new new0; do
    bin=$B/${v%0}/bench_model_ops; [ $v = new0 ] && export HZ_GPU_ATTN_WARP=0 || unset HZ_GPU_ATTN_WARP
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -3
  done
done
unset HZ_GPU_ATTN_WARP
for v in old new; do
  echo "== step qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -3
done
cd $OUT && tar -czf tests.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
