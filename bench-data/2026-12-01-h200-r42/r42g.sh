#!/bin/bash
# Call 9: gate_up with claimed parts (branch wip/gu-claim, build-r42/claim; HZ_W4A16_GU_PARTS=4 or 8
# switches to it, unset = main's split kernel): the kernel test under each, test_model_gpu with 4, the
# step bench alternating, the timeline with 4. Carry build-r42 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); C=build-r42/claim
for v in 4 8; do
  HZ_W4A16_GU_PARTS=$v timeout 120 $C/test_gpu_w4a16 > $OUT/w4a16_$v.txt 2>&1; echo "test_gpu_w4a16 parts $v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -E 'FAIL' $OUT/w4a16_$v.txt | head -3; tail -1 $OUT/w4a16_$v.txt
done
HZ_W4A16_GU_PARTS=4 timeout 150 $C/test_model_gpu > $OUT/model_gpu_4.txt 2>&1; echo "test_model_gpu parts 4 rc $?"; tail -1 $OUT/model_gpu_4.txt
st() { v=$1; echo "== parts ${v:-main}"; HZ_W4A16_GU_PARTS=$v HZ_BENCH_GRAPH_ONLY=1 timeout 100 $C/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror|FAIL' | sed 's/.*(graph)://'; }
for r in 1 2; do for v in "" 4 8; do st "$v"; done; done
HZ_W4A16_GU_PARTS=4 HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-r42/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_parts4.txt 2>&1
grep -E '^    (role|gate_up|down|qkv GEMV) |chain' $OUT/tl_parts4.txt | head -10
echo "done after $(( $(date +%s) - T0 )) s"
