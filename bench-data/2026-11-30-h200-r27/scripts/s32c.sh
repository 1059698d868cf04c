#!/usr/bin/env bash
# Session 28 call 3: SM clock during a step bench; what cuda tools the machine has; OLMoE step main / all
# hinted (l2s) / experts only hinted (v1); Qwen timeline main / l2; the routing stopped after each of its
# steps (diagnostic timeline builds s1..s4).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date; ls /usr/local/cuda/bin | tr '\n' ' '; echo
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,clocks_throttle_reasons.active --format=csv,noheader -lms 200 > $OUT/clk.txt 2>&1 &
CK=$!
for i in 1 2; do for b in build-dev build-exp/build-l2s build-exp/build-v1; do
  echo "== olmoe step $b"; HZ_BENCH_GRAPH_ONLY=1 timeout 120 $b/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph|FAIL'
done; done
kill $CK; sort $OUT/clk.txt | uniq -c | sort -rn | head -8
for b in build-x build-exp/build-l2ts; do
  echo "== qwen timeline $b"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 $b/tests/unit/model/bench_model_ops --step qwen 60 64 > $OUT/tlq_$(basename $b).txt 2>&1; echo "rc $?"; sed -n '/timeline over/,$p' $OUT/tlq_$(basename $b).txt
done
for n in 1 2 3 4; do
  echo "== route stop $n"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-exp/build-s$n/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tls$n.txt 2>&1; echo "rc $?"; grep -E 'role  |router GEMV  ' $OUT/tls$n.txt | head -2
done
if [ -x /usr/local/cuda/bin/cuobjdump ]; then /usr/local/cuda/bin/cuobjdump -sass build-dev/libhorizon.so.0.1.0 | awk '/Function :/{p = /router_cluster/} p' > $OUT/router.sass 2>&1; echo "sass $(wc -l < $OUT/router.sass)"; fi
date
