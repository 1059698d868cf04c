#!/bin/bash
# Call 3: the offset expansion in the split two-pass expert kernels (HZ_W4A16_OFF: off1 = high nibbles
# raw, off2 = both raw; w4a16_device.cuh). Kernel tests of both (error/bound against the CPU reference,
# beside the fused kernel's old expansion in the same run), test_model_gpu (quick), then the OLMoE step
# alternating main (aa3a9cb), off1, off2, three rounds. Carry build-r47 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r47
for v in off1 off2; do
  timeout 150 $B/$v/test_gpu_w4a16 > $OUT/test_gpu_w4a16_$v.txt 2>&1; echo "test_gpu_w4a16 $v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -E '^case|grouped/pdl |grouped-2pass|FAIL' $OUT/test_gpu_w4a16_$v.txt | head -40; tail -1 $OUT/test_gpu_w4a16_$v.txt
  HZ_MODEL_GPU_QUICK=1 timeout 150 $B/$v/test_model_gpu > $OUT/test_model_gpu_$v.txt 2>&1; echo "test_model_gpu $v rc $? ($(( $(date +%s) - T0 )) s)"; grep -iE 'fail|err' $OUT/test_model_gpu_$v.txt | head -5; tail -1 $OUT/test_model_gpu_$v.txt
done
for r in 1 2 3; do for v in main off1 off2; do
  echo "== step olmoe $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done; done
cd $OUT && tar -czf r47c.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
