#!/bin/bash
# Call 5: wx with x's inputs read past L1 (ld.global.cg; wxcg) against main and the first wx build;
# test_router_cluster. Carry build-r45 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r45
timeout 100 $B/wxcg/test_router_cluster > $OUT/trc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/trc.txt
for r in 1 2; do
  for v in main wxcg wxcg0; do
    [ $v = wxcg0 ] && export HZ_GPU_ROUTER_WARPX=0 || unset HZ_GPU_ROUTER_WARPX
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/${v%0}/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
  done
done
echo "done after $(( $(date +%s) - T0 )) s"
