#!/bin/bash
# Call 4: the router cluster's x built by every warp in registers (wx: warp_resnorm, no block barrier
# before the row; HZ_GPU_ROUTER_WARPX=0 keeps the block's x): test_router_cluster (bit-identical to the
# GEMV + route), test_model_gpu, OLMoE step against main alternating, the timeline.
# Carry build-r45 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r45
for t in test_router_cluster test_model_gpu; do
  timeout 150 $B/wx/$t > $OUT/$t.txt 2>&1; echo "$t rc $? ($(( $(date +%s) - T0 )) s)"; grep -E "FAIL|fail" $OUT/$t.txt | head -5; tail -1 $OUT/$t.txt
done
for r in 1 2; do
  for v in main wx wx0; do
    [ $v = wx0 ] && export HZ_GPU_ROUTER_WARPX=0 || unset HZ_GPU_ROUTER_WARPX
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/${v%0}/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
  done
done
unset HZ_GPU_ROUTER_WARPX
HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/wxtl/bench_model_ops --step olmoe 64 64 > $OUT/tl_wx.txt 2>&1; echo "== timeline wx rc $? ($(( $(date +%s) - T0 )) s)"
grep -A30 -E '^ *role  ' $OUT/tl_wx.txt | grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain' | head -24
cd $OUT && tar -czf r45d.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
