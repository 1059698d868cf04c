#!/bin/bash
# Call 1: the two-pass expert kernels' tiles asked for by one thread in order (HZ_W4A16_GU_ORDER, on in
# the candidate; HZ_W4A16_DN_ORDER for the down kernel, off unless set). Kernel tests of the candidate,
# then the OLMoE step alternating main (aa3a9cb), new (gate_up ordered), new_0 (GU_ORDER=0), new_d (both
# ordered), new_s1 (ordered, HZ_W4A16_GU_SPLIT=1), two rounds; timelines of new and new_0.
# Carry build-r47 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r47
timeout 150 $B/new/test_gpu_w4a16 > $OUT/test_gpu_w4a16.txt 2>&1; echo "test_gpu_w4a16 rc $? ($(( $(date +%s) - T0 )) s)"; grep -iE 'FAIL' $OUT/test_gpu_w4a16.txt | head -5; tail -1 $OUT/test_gpu_w4a16.txt
HZ_W4A16_DN_ORDER=1 timeout 150 $B/new/test_gpu_w4a16 > $OUT/test_gpu_w4a16_d.txt 2>&1; echo "test_gpu_w4a16 (DN_ORDER=1) rc $? ($(( $(date +%s) - T0 )) s)"; tail -1 $OUT/test_gpu_w4a16_d.txt
HZ_MODEL_GPU_QUICK=1 timeout 150 $B/new/test_model_gpu > $OUT/test_model_gpu.txt 2>&1; echo "test_model_gpu rc $? ($(( $(date +%s) - T0 )) s)"; tail -1 $OUT/test_model_gpu.txt
run() { # variant
  local v=$1 bin=$B/new/bench_model_ops; unset HZ_W4A16_GU_ORDER HZ_W4A16_DN_ORDER HZ_W4A16_GU_SPLIT
  case $v in main) bin=$B/main/bench_model_ops;; new_0) export HZ_W4A16_GU_ORDER=0;; new_d) export HZ_W4A16_DN_ORDER=1;;
    new_s1) export HZ_W4A16_GU_SPLIT=1;; esac
  echo "== step olmoe $v"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $bin --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
}
for r in 1 2; do for v in main new new_0 new_d new_s1; do run $v; done; done
unset HZ_W4A16_GU_ORDER HZ_W4A16_DN_ORDER HZ_W4A16_GU_SPLIT
echo "steps done ($(( $(date +%s) - T0 )) s)"
for v in new new_0; do
  [ $v = new_0 ] && export HZ_W4A16_GU_ORDER=0
  HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_$v.txt 2>&1; echo "== timeline $v rc $? ($(( $(date +%s) - T0 )) s)"
  grep -A30 -E '^ *role  ' $OUT/tl_$v.txt | grep -E 'role|qkv GEMV|attention|o GEMV|router GEMV|gate_up|down|chain' | head -24
done
cd $OUT && tar -czf r47a.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
