#!/bin/bash
# Call 2: wip/h-down = main + the down kernel's residual add alone (acc and h_in read together after the
# sums, no preload; no o GEMV residual). Kernel tests; OLMoE step alternating main, hd (knob on) and hd0
# (HZ_GPU_RES_IN_DOWN=0), three rounds; Qwen step main against hd; timeline of hd.
# Carry build-r46 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r46
for t in test_gpu_w4a16 test_model_gpu; do
  timeout 150 $B/hd/$t > $OUT/$t.txt 2>&1; echo "$t rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'acc/h|FAIL|fail' $OUT/$t.txt | head -6; tail -2 $OUT/$t.txt
done
run() { # variant model batch
  local v=$1 bin; unset HZ_GPU_RES_IN_DOWN
  case $v in main) bin=$B/main/bench_model_ops;; *) bin=$B/hd/bench_model_ops;; esac
  [ $v = hd0 ] && export HZ_GPU_RES_IN_DOWN=0
  echo "== step $2 $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step $2 $3 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
}
for r in 1 2 3; do for v in main hd hd0; do run $v olmoe 64; done; done
for v in main hd; do run $v qwen 60; done
echo "steps done ($(( $(date +%s) - T0 )) s)"
unset HZ_GPU_RES_IN_DOWN
for v in hdtl; do
  HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/$v/bench_model_ops --step olmoe 64 64 > $OUT/tl_$v.txt 2>&1; echo "== timeline $v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -A30 -E '^ *role  ' $OUT/tl_$v.txt | grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain' | head -24
done
cd $OUT && tar -czf r46b.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
