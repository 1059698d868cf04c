#!/bin/bash
# Call 6: the kernel timeline (build-r42/tl: main 2be9a05 configured -Dtimeline=true, with two new
# gate_up marks: the block's last tile in (mark 1, column route@) and its sums done (mark 2, routed@)),
# OLMoE step bench, twice. Carry build-r42 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
for r in 1 2; do
  HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-r42/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_$r.txt 2>&1; echo "run $r rc $?"
  grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain|graph \+ pdl  \(graph\)' $OUT/tl_$r.txt | grep -v 'step 10' | head -24
done
