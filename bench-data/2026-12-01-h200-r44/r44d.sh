#!/bin/bash
# Call 4: the one-pass attention on tensor cores (build-r44/mma, tlmma: 31beaf2 + the MMA tile) against
# 501d745 (build-r44/new, the scalar tile): FP64 checks and timings (bench_model_ops), test_model_gpu,
# OLMoE / Qwen step benches alternating, the timeline, then compute-sanitizer memcheck and racecheck of
# test_model_gpu's long part (quick). Carry build-r44 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r44
timeout 120 $B/mma/bench_model_ops 100 > $OUT/ops.txt 2>&1; echo "bench_model_ops rc $? ($(( $(date +%s) - T0 )) s)"; grep -E '^attention.*groups 2|FAIL|groups 2  ' $OUT/ops.txt | head -40
timeout 120 $B/mma/test_model_gpu > $OUT/test_model_gpu.txt 2>&1; echo "test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'long context.*by position|FAIL' $OUT/test_model_gpu.txt | head; tail -1 $OUT/test_model_gpu.txt
for r in 1 2; do
  for v in new mma; do
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -3
  done
done
for v in new mma; do
  echo "== step qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -3
done
HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tlmma/bench_model_ops --step olmoe 64 64 > $OUT/tl_mma.txt 2>&1; echo "timeline rc $? ($(( $(date +%s) - T0 )) s)"
grep -E 'role|attention|chain|graph \+ pdl  \(graph\)' $OUT/tl_mma.txt | grep -v 'step 10' | head -5
export HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=long
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/mma/test_model_gpu > $OUT/memcheck.txt 2>&1; echo "memcheck rc $? ($(( $(date +%s) - T0 )) s)"; tail -3 $OUT/memcheck.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/mma/test_model_gpu > $OUT/racecheck.txt 2>&1; echo "racecheck rc $? ($(( $(date +%s) - T0 )) s)"; grep -c -i hazard $OUT/racecheck.txt; tail -3 $OUT/racecheck.txt
cd $OUT && tar -czf out.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
