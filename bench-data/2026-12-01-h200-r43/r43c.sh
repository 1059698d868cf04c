#!/bin/bash
# Call 4: v3 (gate_up work items in landing order: K parts per tile, HZ_W4A16_GU_PARTS 2/4/8) against
# old (main): executor tests and test_model_gpu on v3 (default 8 parts, then 4), the OLMoE step bench
# alternating, the layer alone, and v3's timeline (8 parts). Carry build-r43 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r43
timeout 200 $B/v3/test_gpu_w4a16 > $OUT/test_gpu_w4a16.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/test_gpu_w4a16.txt
HZ_W4A16_GU_PARTS=4 timeout 200 $B/v3/test_gpu_w4a16 > $OUT/test_gpu_w4a16_p4.txt 2>&1; echo "test_gpu_w4a16 p4 rc $?"; tail -1 $OUT/test_gpu_w4a16_p4.txt
timeout 200 $B/v3/test_model_gpu > $OUT/test_model_gpu.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/test_model_gpu.txt
for r in 1 2; do
  for v in old p2 p4 p8; do
    b=$v; [ $v != old ] && b=v3
    echo "== step olmoe $v round $r"; HZ_W4A16_GU_PARTS=${v#p} HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$b/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -4
  done
done
for v in old p2 p8; do b=$v; [ $v != old ] && b=v3; echo "== layer $v"; HZ_W4A16_GU_PARTS=${v#p} timeout 60 $B/$b/bench_w4a16 200 olmoe 2>&1 | grep -E '^olmoe  grouped' | head -4; done
HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_1.txt 2>&1; echo "tl rc $?"
grep -E 'role|qkv GEMV|attention|o GEMV|router|gate_up|down|chain|graph \+ pdl  \(graph\)' $OUT/tl_1.txt | grep -v 'step 10' | head -24
cd $OUT && tar -czf tests.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
