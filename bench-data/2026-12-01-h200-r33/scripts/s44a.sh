#!/usr/bin/env bash
# Next session, call 1 (carry: build-dev = main; build-exp/rb = wip/route-batch: route_write reads the
# chosen ids and their exponentials eight ahead of the compares and adds; build-tl = main with
# -Dtimeline=true; build-exp/rbtl = rb with -Dtimeline=true; for each of the build-exp ones
# tools/hz-bench and libhorizon.so.0.1.0; of the timeline builds only tests/unit/model/bench_model_ops,
# which links the library statically: carry ["build-dev", ".devcarry", "build-tl/tests/unit/model/bench_model_ops",
# "build-exp/rbtl/tests/unit/model/bench_model_ops", "build-exp/rb/tools/hz-bench", "build-exp/rb/libhorizon.so.0.1.0"],
# about 38 MB; about 330 s with the models).
# Question: does the router's routing tail (timeline marks routed@ - route@, 1.71 us on main in the
# thirty-third round) get shorter, and is that visible in hz-bench? Tokens must not change.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
R=build-exp/rb; ln -sf libhorizon.so.0.1.0 $R/libhorizon.so.0
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
for i in 1 2; do for b in build-tl build-exp/rbtl; do
  echo "== timeline olmoe $b $i"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 $b/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl.txt 2>&1; echo "rc $?"; grep -E "router GEMV  |chain|pos 32" $OUT/tl.txt | grep -v "step 10"
done; done; t
scripts/bench --build build-dev --models olmoe,qwen --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
hb() { d=$1 m=$2 c=$3; shift 3; rm -f $OUT/hb.json; echo "== hz-bench $m c$c $d $*"; env "$@" timeout 120 $d/tools/hz-bench /tmp/hz-bench-work/$m.hzq --device cuda:0 --executor grouped --resident $c --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
for i in 1 2 3; do hb build-dev olmoe 64 X=0; hb $R olmoe 64 X=0; done
for i in 1 2; do hb build-dev qwen 60 X=0; hb $R qwen 60 X=0; done
t
rm -rf $OUT/models $OUT/hb.json $OUT/tl.txt
date
