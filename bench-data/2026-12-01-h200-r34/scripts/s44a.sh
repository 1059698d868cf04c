#!/usr/bin/env bash
# Next session, call 1. Carry ["build-dev", ".devcarry"] (about 44 MB). Built on 2026-12-01 from main
# dc6ae47 (build-dev, build-tl) and two probe branches, staged under .devcarry/exp (rebuild all of them
# if main has moved: the A/B is only fair between builds of the same main):
#   exp/rb = wip/route-batch (route_batch.patch): route_write reads the chosen ids and their exponentials
#     eight ahead of the compares and adds; question: is the router's routing tail (timeline routed@ -
#     route@, 1.71 us on main) shorter, and does hz-bench see it?
#   exp/gl = wip/gu-ldg (gu_ldg.patch): the two-pass gate_up copies its tiles with the fused kernel's
#     staged LDGSTS instead of bulk copies (HZ_W4A16_GU_COPY=ldg2: four stages, two ahead of the math;
#     ldg4: all four at once; unset: the bulk copies, main's kernel); question: do its early stages land
#     first, so that the math overlaps the copies (timeline gate_up landmarks: first tile in 5.56 us,
#     end 9.47 on main)?
#   exp/tl/{main,rb,gl}/bench_model_ops: the timeline builds (-Dtimeline=true) of main, rb and gl.
# About 410 s with both models.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
X=.devcarry/exp; for d in rb gl; do ln -sf libhorizon.so.0.1.0 $X/$d/libhorizon.so.0; done
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for v in ldg2 ldg4; do echo "== test_gpu_w4a16 (gl) GU_COPY=$v"; HZ_W4A16_GU_COPY=$v timeout 120 $X/gl/cuda/test_gpu_w4a16 > $OUT/tw_$v.txt 2>&1; echo "rc $?"; grep -E "2pass|OK|FAIL" $OUT/tw_$v.txt | tail -3; done
for v in bulk ldg2 ldg4; do echo "== bench_w4a16 olmoe grouped-2p+pdl GU_COPY=$v"; HZ_W4A16_GU_COPY=$v HZ_BENCH_EXECUTORS=grouped-2p+pdl timeout 100 $X/gl/cuda/bench_w4a16 200 olmoe 2>&1 | tee $OUT/bw_$v.txt | grep -E "graph"; done; t
tl() { n=$1; shift; echo "== timeline olmoe $n $*"; env "$@" HZ_BENCH_GRAPH_ONLY=1 timeout 150 $X/tl/$n/bench_model_ops --step olmoe 64 64 > $OUT/tl_$n.txt 2>&1; echo "rc $?"; grep -E "^    (router GEMV|gate_up|down) |chain|pos 32" $OUT/tl_$n.txt | grep -v "step 10"; }
tl main X=0; tl rb X=0; tl gl HZ_W4A16_GU_COPY=ldg2; tl gl HZ_W4A16_GU_COPY=ldg4; tl main X=0; t
scripts/bench --build build-dev --models olmoe,qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; shift 3; rm -f $OUT/hb.json; echo "== hz-bench $m c$c $d $*"; env "$@" timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2 3; do
  hb build-dev olmoe 64 X=0; hb $X/rb olmoe 64 X=0; hb $X/gl olmoe 64 HZ_W4A16_GU_COPY=ldg2; hb $X/gl olmoe 64 HZ_W4A16_GU_COPY=ldg4
done
hb $X/gl olmoe 64 X=0
t
for i in 1 2; do hb build-dev qwen 60 X=0; hb $X/rb qwen 60 X=0; done
hb $X/gl qwen 60 HZ_W4A16_PATH=twopass
hb $X/gl qwen 60 HZ_W4A16_PATH=twopass HZ_W4A16_GU_COPY=ldg2
hb $X/gl qwen 60 HZ_W4A16_PATH=twopass HZ_W4A16_GU_COPY=ldg4
t
rm -rf $OUT/models $OUT/hb.json
date
