#!/bin/bash
# route_warp64 with the products rounded before the renormalising sum (no FMA, both router paths), inlined
# and as a called function (_ni), against main (3a2b7b1): the router test, the timeline of each, then the
# step bench, processes alternating. Carry build-bench, build-bench-new and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s)
N=build-bench-new
timeout 60 $N/t/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; grep FAIL $OUT/rc.txt | head -3; tail -1 $OUT/rc.txt
for v in tl tl_ni; do
  HZ_BENCH_GRAPH_ONLY=1 timeout 100 $N/bench_model_ops_$v --step olmoe 64 64 > $OUT/$v.txt 2>&1
  echo "== timeline $v"; sed -n '/timeline over/,/main-stream/p' $OUT/$v.txt | grep -E 'router|gate_up|main-stream'
done
st() { b=$1 m=$2 c=$3; echo "== $b $m"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $b --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for r in 1 2 3; do
  for b in build-bench/bench_model_ops_base $N/bench_model_ops $N/bench_model_ops_ni; do st $b olmoe 64; done
done
echo "done after $(( $(date +%s) - T0 )) s"
