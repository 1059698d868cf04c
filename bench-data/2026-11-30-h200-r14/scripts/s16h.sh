#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date; lscpu | grep "Model name"
scripts/bench --build $B --models olmoe --executors grouped --steps models,ceilings --blocks 1 --out $OUT/olmoe-ab > $OUT/bench_models.txt 2>&1; echo "bench models rc $?"
H2D=$(python3 -c "
import json
j=json.load(open('$OUT/olmoe-ab/ceilings.json'))
print(round([x for x in j['h2d_pinned'] if x['label']=='olmoe_expert'][0]['gbps'],2))")
echo "h2d ceiling: $H2D"; [ -z "$H2D" ] && H2D=52.5
run() { local name=$1 envs=$2; shift 2; echo "== $name ($envs $*)"; env $envs timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 30 --transport threaded --blocks 1 --h2d-ceiling $H2D --json $OUT/olmoe-ab/hb_$name.json "$@" > $OUT/olmoe-ab/hb_$name.txt 2>&1; echo "rc $?"; python3 .devcarry/hbsum.py $OUT/olmoe-ab/hb_$name.json; }
run sse2a HZ_X=1
run avx512a HZ_TXN_STREAM=2
run sse2b HZ_X=1
run avx512b HZ_TXN_STREAM=2
date
rm -f /tmp/hz-bench-work/olmoe*.hzq
scripts/bench --build $B --models qwen --executors grouped --residencies 30,60 --transports threaded,registered --transport-residency 30 --steps models,ceilings,sweep,transports,table --blocks 1 --out $OUT/qwen > $OUT/bench_qwen.txt 2>&1; echo "bench qwen rc $?"
for f in $OUT/qwen/*.json; do case $f in *ceilings*|*env*|*model-*) continue;; esac; echo "$f"; python3 .devcarry/hbsum.py $f; done
date
cd $OUT && tar czf r14.tgz olmoe-ab qwen bench_models.txt bench_qwen.txt && rm -rf olmoe-ab qwen bench_models.txt bench_qwen.txt
