#!/bin/bash
# Prepared for the next session, not run: the routing guessed by a fourth segment of the q/k/v GEMV (the
# router rows folded onto its input) and the two-pass gate_up kernel copying the guessed tiles before its
# wait, with no side stream (wip/guess-qkv, HZ_GPU_GUESS bits: 1 guess, 2 the router cluster releases the
# experts once its x is built, 4 count right guesses); and call 7's script (r49g.sh) on wip/l2-predict.
# build-r49/guess release, build-r49/guesstl -Dtimeline=true (both wip/guess-qkv), build-r49/pred
# (wip/l2-predict), build-r49/main (main's device code). Carry build-r49 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r49
HZ_GPU_TEST_TRIALS=2 timeout 150 $B/guess/test_gpu_w4a16 > $OUT/w4a16_guess.txt 2>&1; echo "test_gpu_w4a16 rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/w4a16_guess.txt)"
grep -E "guess" $OUT/w4a16_guess.txt | head -8
for v in 1 3; do
  HZ_GPU_GUESS=$v HZ_MODEL_GPU_QUICK=1 timeout 100 $B/guess/test_model_gpu > $OUT/model_g$v.txt 2>&1; echo "test_model_gpu guess=$v rc $? ($(( $(date +%s) - T0 )) s): $(tail -1 $OUT/model_g$v.txt)"
done
step() { echo "== step $1 $2 [$3]"; env $3 HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/$2/bench_model_ops --step $1 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror|guess' | head -4; }
step "olmoe 64 64" guess "HZ_GPU_GUESS=5"
for r in 1 2; do
  step "olmoe 64 64" main ""
  step "olmoe 64 64" guess ""
  step "olmoe 64 64" guess "HZ_GPU_GUESS=1"
  step "olmoe 64 64" guess "HZ_GPU_GUESS=3"
  step "olmoe 64 64" guess "HZ_GPU_GUESS=2"
done
step "qwen 60 64" main ""
step "qwen 60 64" guess "HZ_GPU_GUESS=3"
for v in 0 1 3; do
  HZ_GPU_GUESS=$v HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/guesstl/bench_model_ops --step olmoe 64 64 > $OUT/tl_g$v.txt 2>&1; echo "== timeline guess=$v rc $?"
  grep -A40 'timeline over' $OUT/tl_g$v.txt | grep -E '^    (qkv GEMV|attention|o GEMV|router|gate_up|down) |chain' | head -8
done
cd $OUT && tar -czf guess.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
