#!/bin/bash
# The router cluster's routing parameters read before its wait and kept in registers (pin_param) against
# main (3a2b7b1): the router test and test_model_gpu, the kernel timeline once (compare routed@ with
# call 2's 4.56 us), then the step bench, processes alternating. Carry build-bench (main's build:
# bench_model_ops_base), build-bench-new (the change) and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s)
N=build-bench-new
timeout 60 $N/t/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
timeout 150 $N/t/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; grep FAIL $OUT/mg.txt | head -3; tail -1 $OUT/mg.txt
HZ_BENCH_GRAPH_ONLY=1 timeout 100 $N/bench_model_ops_tl --step olmoe 64 64 > $OUT/tl.txt 2>&1
sed -n '/timeline over/,/main-stream/p' $OUT/tl.txt
st() { b=$1 m=$2 c=$3; echo "== $b $m"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $b --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for r in 1 2 3; do
  for b in build-bench/bench_model_ops_base $N/bench_model_ops; do st $b olmoe 64; done
done
echo "done after $(( $(date +%s) - T0 )) s"
