#!/bin/bash
# Call 5: why the offset expansion (off1: high nibbles raw, offset_expansion.patch with HZ_W4A16_OFF 1)
# made the step slower though its loop is shorter: kernel timelines (-Dtimeline=true) of main (aa3a9cb)
# and off1, twice each, alternating. Carry build-r47 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r47
for r in 1 2; do for v in main off1; do
  HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tl_$v/bench_model_ops --step olmoe 64 64 > $OUT/tl_${v}_$r.txt 2>&1; echo "== timeline $v round $r rc $? ($(( $(date +%s) - T0 )) s)"
  grep -A30 -E '^ *role  ' $OUT/tl_${v}_$r.txt | grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain' | head -24
done; done
cd $OUT && tar -czf r47e.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
