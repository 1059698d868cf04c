#!/bin/bash
# Call 3: wip/h-down with the residual add as an instantiation of its own (hd2; its kernels without the
# add are main's, byte for byte) against main and the first wip/h-down build (hd: one kernel, 64
# registers): OLMoE step alternating main, hd, hd2 (knob on), hd2_0 (HZ_GPU_RES_IN_DOWN=0), three rounds;
# hd2's test_gpu_w4a16 and test_model_gpu. Carry build-r46 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r46
for t in test_gpu_w4a16 test_model_gpu; do
  timeout 150 $B/hd2/$t > $OUT/$t.txt 2>&1; echo "$t rc $? ($(( $(date +%s) - T0 )) s)"; grep -E 'acc/h|FAIL|fail' $OUT/$t.txt | head -6; tail -1 $OUT/$t.txt
done
run() { # variant model batch
  local v=$1 bin; unset HZ_GPU_RES_IN_DOWN
  case $v in main) bin=$B/main/bench_model_ops;; hd) bin=$B/hd/bench_model_ops;; *) bin=$B/hd2/bench_model_ops;; esac
  [ $v = hd2_0 ] && export HZ_GPU_RES_IN_DOWN=0
  echo "== step $2 $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step $2 $3 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
}
for r in 1 2 3; do for v in main hd hd2 hd2_0; do run $v olmoe 64; done; done
echo "steps done ($(( $(date +%s) - T0 )) s)"
cd $OUT && tar -czf r46c.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
