#!/bin/bash
# Main with route_warp64 (f674433, build-bench-new) as the round closes: the GPU tests and golden fixtures,
# the contract's OLMoE c64 row (scripts/bench: models, ceilings, sweep, table, report; no peer), then
# hz-bench c64 on the same artifact, main before the change (3a2b7b1, build-bench) and after, alternating.
# Carry build-bench, build-bench-new and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); N=build-bench-new
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date
for t in test_router_cluster test_decode_gemv test_model_gpu test_prefill_gpu test_decode_screen; do
  timeout 150 $N/t/$t > $OUT/$t.txt 2>&1; echo "$t rc $? ($(( $(date +%s) - T0 )) s)"; grep FAIL $OUT/$t.txt | head -3; tail -1 $OUT/$t.txt
done
mkdir -p /tmp/gb && cp -r $N/tools /tmp/gb/
HZ_BUILD_ROOT=/tmp/gb HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 100 $N/t/test_golden_gpu $N/tools/hz-mkmodel \
  $N/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "max rel|OK|FAIL" $OUT/golden.txt | tail -2
timeout 300 scripts/bench --build $N --models olmoe --executors grouped --residencies 64 --blocks 1 \
  --steps models,ceilings,sweep,table,report --out $OUT/olmoe > $OUT/bench.txt 2>&1
echo "scripts/bench rc $? ($(( $(date +%s) - T0 )) s)"; grep -E '^\| *c64|tok/s' $OUT/bench.txt | head -5
A=/tmp/hz-bench-work/olmoe.hzq
for r in 1 2; do
  for b in build-bench $N; do
    timeout 60 $b/tools/hz-bench $A --device cuda:0 --executor grouped --resident 64 --blocks 1 --transport threaded \
      --json $OUT/ab_$(basename $b)_$r.json > $OUT/ab_$(basename $b)_$r.txt 2>&1
    echo "== $b round $r rc $?: $(grep -E '^c64/' $OUT/ab_$(basename $b)_$r.txt | head -1)"
  done
done
tar -cf $OUT/olmoe.tar -C $OUT olmoe && cp $OUT/olmoe/benchmarks-section.md $OUT/section.md 2>/dev/null; rm -rf $OUT/olmoe
cd $OUT && tar -czf tests.tgz *.txt *.json && rm -f *.txt *.json; ls
echo "done after $(( $(date +%s) - T0 )) s"
