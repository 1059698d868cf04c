#!/bin/bash
# Call 3: new2 (gate_up releases the down kernel only after its copies are all asked for) against old
# (main) and new (call 2's build), OLMoE step bench alternating; then new2's kernel timeline (build-r43/tl),
# and new2's executor tests. Carry build-r43 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); B=build-r43
for r in 1 2; do
  for v in old new2; do
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -4
  done
done
for v in old new2; do echo "== layer $v"; timeout 60 $B/$v/bench_w4a16 200 olmoe 2>&1 | grep -E '^olmoe' | head -4; done
HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_1.txt 2>&1; echo "tl rc $?"
grep -E 'role|mark|qkv GEMV|attention|o GEMV|router|gate_up|down|chain|graph \+ pdl  \(graph\)' $OUT/tl_1.txt | grep -v 'step 10' | head -40
timeout 200 $B/new2/test_gpu_w4a16 > $OUT/test_gpu_w4a16.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/test_gpu_w4a16.txt
cd $OUT && tar -czf tests.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
