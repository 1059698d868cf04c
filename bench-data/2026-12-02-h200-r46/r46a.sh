#!/bin/bash
# Call 1: the two prepared branches. Kernel tests of wip/h-handover (test_gpu_w4a16 with its new
# grouped-2pass/acc/h variant, test_decode_gemv, test_router_cluster, test_model_gpu); OLMoE step
# alternating main (d2acec0), wip/down-preload (dp), wip/h-handover with both knobs on (hh), o only
# (hh_o: HZ_GPU_RES_IN_DOWN=0), down only (hh_d: HZ_GPU_RES_IN_O=0), both off (hh_0); Qwen step main
# against hh; timelines of main and hh (-Dtimeline=true builds). Carry build-r46 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r46
for t in test_gpu_w4a16 test_decode_gemv test_router_cluster test_model_gpu; do
  timeout 150 $B/hh/$t > $OUT/$t.txt 2>&1; echo "$t rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'acc/h|FAIL|fail' $OUT/$t.txt | head -6; tail -2 $OUT/$t.txt
done
run() { # variant model batch
  local v=$1 bin; unset HZ_GPU_RES_IN_O HZ_GPU_RES_IN_DOWN
  case $v in main) bin=$B/main/bench_model_ops;; dp) bin=$B/dp/bench_model_ops;; *) bin=$B/hh/bench_model_ops;; esac
  case $v in hh_o) export HZ_GPU_RES_IN_DOWN=0;; hh_d) export HZ_GPU_RES_IN_O=0;; hh_0) export HZ_GPU_RES_IN_O=0 HZ_GPU_RES_IN_DOWN=0;; esac
  echo "== step $2 $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step $2 $3 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
}
for r in 1 2; do for v in main dp hh hh_o hh_d hh_0; do run $v olmoe 64; done; done
for v in main hh main hh; do run $v qwen 60; done
echo "steps done ($(( $(date +%s) - T0 )) s)"
unset HZ_GPU_RES_IN_O HZ_GPU_RES_IN_DOWN
for v in maintl hhtl; do
  HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/$v/bench_model_ops --step olmoe 64 64 > $OUT/tl_$v.txt 2>&1; echo "== timeline $v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -A30 -E '^ *role  ' $OUT/tl_$v.txt | grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain' | head -24
done
cd $OUT && tar -czf r46a.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
