#!/bin/bash
# Call 7: the decode GEMV's row sums over four (acc4) or two (acc2) FMA chains per lane instead of one
# (decode_gemv.cuh dot8x4 / sum_row; gemv_host_sum.h follows). Tests that compare with the host's sum
# bit for bit (test_decode_gemv, test_decode_screen), test_router_cluster, test_model_gpu (quick), then
# the OLMoE step alternating main (aa3a9cb), acc4, acc2, two rounds, and Qwen once each.
# Carry build-r47 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r47
for v in acc4 acc2; do for t in test_decode_gemv test_decode_screen test_router_cluster test_model_gpu; do
  HZ_MODEL_GPU_QUICK=1 timeout 120 $B/$v/$t > $OUT/${t}_$v.txt 2>&1; echo "$v $t rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/${t}_$v.txt)"
  grep -iE 'FAIL' $OUT/${t}_$v.txt | head -3
done; done
for r in 1 2; do for v in main acc4 acc2; do
  echo "== step olmoe $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done; done
for v in main acc4 acc2; do
  echo "== step qwen $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/$v/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
done
cd $OUT && tar -czf r47g.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
