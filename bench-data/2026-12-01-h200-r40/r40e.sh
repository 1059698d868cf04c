#!/bin/bash
# Prefetch of the heaviest predicted experts only (HZ_GPU_PREDICT_TOP=N, a probe): the spread OLMoE shape
# with random ids at c30 and c48, registered transport, without prefetch and with prefetch of the top 1,
# 2, 4 and all 8 predicted experts; threaded without and with the top 2. Carry build-bench and .devcarry.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
scripts/bench --build build-bench --models olmoe --embed-std 1 --steps models --out $OUT/m > /dev/null 2>&1
echo "models rc $? after $(( $(date +%s) - T0 )) s"
A=/tmp/hz-bench-work/embed-std-1/olmoe.hzq
run() { # name transport top(0 = no prefetch)
  local env=() pf=()
  [[ $3 != 0 ]] && pf=(--prefetch) && [[ $3 != all ]] && env=(HZ_GPU_PREDICT_TOP=$3)
  env "${env[@]}" build-bench/tools/hz-bench $A --device cuda:0 --executor grouped --resident 30,48 --blocks 1 \
    --transport $2 --feed random "${pf[@]}" --json $OUT/$1.json > $OUT/$1.txt 2>&1
  echo "== $1 (rc $?, $(( $(date +%s) - T0 )) s)"; grep -E '^c[0-9]|^prefetch' $OUT/$1.txt
}
run reg registered 0
for n in 1 2 4 all; do run reg-top$n registered $n; done
run thr threaded 0
run thr-top2 threaded 2
