#!/usr/bin/env bash
# Session 27 call 9: golden and prefill tests on the final code, then hz-bench OLMoE c64 with the down
# kernel's bulk-copy staging on / off alternating (the contract's measure).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
ls -la /tmp/hz-bench-work/ 2>&1 | head
if [ ! -f /tmp/hz-bench-work/olmoe.hzq ]; then timeout 150 scripts/bench --build $B --models olmoe --steps models --out $OUT/m > $OUT/models.txt 2>&1; echo "models rc $?"; fi
for i in 1 2; do for tma in 1 0; do
  HZ_W4A16_DN_TMA=$tma timeout 40 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/ab_tma${tma}_$i.json > $OUT/ab_tma${tma}_$i.txt 2>&1; echo "tma $tma rc $? $(grep -A1 '^resident' $OUT/ab_tma${tma}_$i.txt | tail -1)"
done; done
date
