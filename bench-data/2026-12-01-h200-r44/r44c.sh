#!/bin/bash
# Call 3: the one-pass attention's dry pass before the wait (HZ_GPU_ATTN_WARM=1; build-r44/warm and
# tlwarm are 501d745 + the pass loop, 96 registers) against 501d745 (build-r44/new, 80 registers):
# timeline of warm=0 / warm=1, then OLMoE step benches alternating. Carry build-r44 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r44
for w in 0 1; do
  HZ_GPU_ATTN_WARM=$w HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tlwarm/bench_model_ops --step olmoe 64 64 > $OUT/tl_warm$w.txt 2>&1; echo "timeline warm=$w rc $? ($(( $(date +%s) - T0 )) s)"
  grep -E 'role|attention|o GEMV|chain|graph \+ pdl  \(graph\)' $OUT/tl_warm$w.txt | grep -v 'step 10' | head -8
done
for r in 1 2; do
  for v in new warm0 warm1; do
    case $v in new) bin=$B/new/bench_model_ops; unset HZ_GPU_ATTN_WARM;; warm0) bin=$B/warm/bench_model_ops; export HZ_GPU_ATTN_WARM=0;; warm1) bin=$B/warm/bench_model_ops; export HZ_GPU_ATTN_WARM=1;; esac
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL' | head -3
  done
done
cd $OUT && tar -czf tl.tgz tl_*.txt && rm -f tl_*.txt
echo "done after $(( $(date +%s) - T0 )) s"
