#!/usr/bin/env bash
# Session 35 call 5 (build-exp/dl = branch wip/dn-late on main cd49656, release, slim): the two-pass down
# kernel's row copies issued after its wait (HZ_W4A16_DN_LATE=1) instead of before it (0 = main), so that
# the gate_up kernel's tiles do not share the HBM with them. Kernel and model tests with the knob, OLMoE
# step knob 0/1 alternating twice, then hz-bench OLMoE c64 knob 0/1 alternating twice.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev P=build-exp/dl
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
HZ_W4A16_DN_LATE=1 HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $P/cuda/test_gpu_w4a16 > $OUT/w4_late.txt 2>&1; echo "test_gpu_w4a16 late rc $?"; tail -1 $OUT/w4_late.txt
HZ_W4A16_DN_LATE=1 HZ_W4A16_DN_TMA=0 HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $P/cuda/test_gpu_w4a16 > $OUT/w4_late_notma.txt 2>&1; echo "test_gpu_w4a16 late, dn_tma 0 rc $?"; tail -1 $OUT/w4_late_notma.txt
HZ_W4A16_DN_LATE=1 HZ_MODEL_GPU_PARTS=run timeout 150 $P/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu late rc $?"; tail -1 $OUT/mg.txt
t
step() { HZ_BENCH_GRAPH_ONLY=1 timeout 150 "$@" 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; }
for i in 1 2; do for k in 0 1; do
  echo "== olmoe late=$k"; HZ_W4A16_DN_LATE=$k step $P/tests/unit/model/bench_model_ops --step olmoe 64 64
done; done; t
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
for k in 0 1 0 1; do echo "== hz-bench olmoe c64 late=$k"; HZ_W4A16_DN_LATE=$k timeout 60 $P/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_$k.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb_$k.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; done
rm -rf $OUT/models; t
date
