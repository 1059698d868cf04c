#!/usr/bin/env bash
# Session 35 call 2 (build-exp/pg = branch wip/fused-tma rebased on main cd49656, release, slim; the knob
# HZ_W4A16_FUSED_TMA=1 stages the fused kernel's intermediate by one bulk copy, 0 = main's loads):
# kernel test and model test with the knob, compute-sanitizer memcheck + racecheck on the kernel test
# with the knob, Qwen step knob 0/1 alternating twice, then hz-bench Qwen c60 knob 0/1 alternating twice.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev P=build-exp/pg
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
for k in 1 0; do
  HZ_W4A16_FUSED_TMA=$k HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $P/cuda/test_gpu_w4a16 > $OUT/w4_$k.txt 2>&1; echo "test_gpu_w4a16 tma=$k rc $?"; tail -1 $OUT/w4_$k.txt
done
HZ_W4A16_FUSED_TMA=1 HZ_MODEL_GPU_PARTS=run timeout 150 $P/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu tma=1 rc $?"; tail -1 $OUT/mg.txt
for tool in memcheck racecheck; do
  extra=; [ $tool = memcheck ] && extra="--leak-check full"
  HZ_W4A16_FUSED_TMA=1 HZ_GPU_TEST_NO_FAULTS=1 HZ_GPU_TEST_TRIALS=1 timeout 120 compute-sanitizer --tool $tool $extra --error-exitcode 86 $P/cuda/test_gpu_w4a16 > $OUT/san_$tool.txt 2>&1
  echo "sanitizer $tool tma=1 rc $? $(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/san_$tool.txt)"
done; t
step() { HZ_BENCH_GRAPH_ONLY=1 timeout 150 "$@" 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; }
for i in 1 2; do for k in 0 1; do
  echo "== qwen tma=$k"; HZ_W4A16_FUSED_TMA=$k step $P/tests/unit/model/bench_model_ops --step qwen 60 64
done; done; t
scripts/bench --build $B --models qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
for k in 0 1 0 1; do echo "== hz-bench qwen c60 tma=$k"; HZ_W4A16_FUSED_TMA=$k timeout 90 $P/tools/hz-bench /tmp/hz-bench-work/qwen.hzq --device cuda:0 --executor grouped --resident 60 --transport threaded --blocks 1 --json $OUT/hb_$k.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb_$k.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; done
rm -rf $OUT/models; t
date
