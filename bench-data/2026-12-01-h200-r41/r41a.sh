#!/bin/bash
# The routing's softmax sum by xor butterflies and each chosen id's place from a bit set (this round's
# change) against main (3a2b7b1): the router tests and test_model_gpu on the new build, then the step
# bench, OLMoE and Qwen layer shapes, processes alternating. Carry build-bench (main's build, with
# bench_model_ops_base), build-bench-new (the change) and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
N=build-bench-new
timeout 60 $N/t/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'FAIL' $OUT/rc.txt | head -3; tail -1 $OUT/rc.txt
timeout 150 $N/t/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'FAIL' $OUT/mg.txt | head -3; tail -1 $OUT/mg.txt
timeout 100 $N/t/test_prefill_gpu > $OUT/pg.txt 2>&1; echo "test_prefill_gpu rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'FAIL' $OUT/pg.txt | head -3; tail -1 $OUT/pg.txt
st() { b=$1 m=$2 c=$3; echo "== $b $m"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $b --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for r in 1 2 3; do
  for b in build-bench/bench_model_ops_base $N/bench_model_ops; do st $b olmoe 64; done
done
echo "olmoe done after $(( $(date +%s) - T0 )) s"
for r in 1 2; do
  for b in build-bench/bench_model_ops_base $N/bench_model_ops; do st $b qwen 60; done
done
echo "done after $(( $(date +%s) - T0 )) s"
