#!/bin/bash
# HZ_TRANSPORT_AUTO on cuda:0: examples/decode's default (now auto) on a small generated OLMoE model at a
# partial and at full residency (the JSON names the transport chosen and the one requested), then
# hz-bench --transport auto against registered and threaded at c30 of the spread OLMoE shape with random
# ids, one call. Carry build-bench (tools, examples/decode, libhorizon.so) and .devcarry (lib/).
export LD_LIBRARY_PATH=$PWD/build-bench:$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
W=/tmp/r40f && mkdir -p $W
build-bench/tools/hz-mkmodel --arch olmoe --preset tiny --seed 3 $W/m > /dev/null && build-bench/tools/hz-pack $W/m $W/t.hzq --quiet
for r in 4 0; do
  build-bench/examples/decode $W/t.hzq --device cuda:0 --resident $r --tokens 24 --json > $W/d$r.txt 2>&1
  echo "decode --resident $r rc $?: $(tail -n 1 $W/d$r.txt | grep -o '"transport":"[a-z]*","transport_requested":"[a-z]*"') $(tail -n 1 $W/d$r.txt | grep -o '"tokens":\[[0-9,]*\]' | head -c 80)"
done
build-bench/examples/decode $W/t.hzq --device cuda:0 --resident 4 --tokens 24 --transport serial --json > $W/ds.txt 2>&1
echo "decode serial rc $?: $(tail -n 1 $W/ds.txt | grep -o '"tokens":\[[0-9,]*\]' | head -c 80)"
scripts/bench --build build-bench --models olmoe --embed-std 1 --steps models --out $OUT/m > /dev/null 2>&1
echo "models rc $? after $(( $(date +%s) - T0 )) s"
A=/tmp/hz-bench-work/embed-std-1/olmoe.hzq
for t in auto registered threaded; do
  build-bench/tools/hz-bench $A --device cuda:0 --executor grouped --resident 30 --blocks 1 --transport $t \
    --feed random --json $OUT/$t.json > $OUT/$t.txt 2>&1
  echo "== $t rc $? ($(( $(date +%s) - T0 )) s)"; grep -E '^c[0-9]|transport' $OUT/$t.txt | head -3
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; print('label transport', r['label']['transport'], 'tokens', r['generated_tokens_fnv1a64'])" $OUT/$t.json
done
rm -rf $OUT/m
