#!/usr/bin/env bash
# Next session, call 1 (prepared 2026-11-30, fifteenth session): the threaded transport without a mutex
# per piece (main 38cbc5f) against the one before it (.devcarry/oldtxn/libhorizon.so.0, built from
# e80056c's transact.c in build-dev); piecewise H2D again with the lock-free hand-over.
# If lib/ changed after 38cbc5f, rebuild the old library the same way first: put e80056c's
# lib/transact/transact.c in place, ninja -C build-dev libhorizon.so.0.1.0, copy it to
# .devcarry/oldtxn/libhorizon.so.0, put the current file back, rebuild build-dev.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; lscpu | grep -E "Model name"
timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/tmg.txt
timeout 60 $B/tests/unit/model/test_prefill_gpu > $OUT/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/tpg.txt
timeout 90 $B/tests/unit/cache/test_prefetch_gpu > $OUT/tpfg.txt 2>&1; echo "test_prefetch_gpu rc $?"; tail -1 $OUT/tpfg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/golden.txt; t
scripts/bench --build $B --models olmoe --executors grouped --steps models,ceilings --blocks 1 --out $OUT/olmoe > $OUT/bench_models.txt 2>&1; echo "bench models rc $?"
H2D=$(python3 -c "
import json
j=json.load(open('$OUT/olmoe/ceilings.json'))
print(round([x for x in j['h2d_pinned'] if x['label']=='olmoe_expert'][0]['gbps'],2))")
echo "h2d ceiling: $H2D"; [ -z "$H2D" ] && H2D=52.5
python3 -c "
import json
j=json.load(open('$OUT/olmoe/ceilings.json'))
for x in j.get('staged_round', []): print('staged round', x['label'], x['stores'], round(x['gbps'], 2))
for x in j.get('staged_pipelined', []): print('pipelined round', x['label'], x['waves'], 'waves', round(x['gbps'], 2))"; t
run() { local name=$1 lib=$2 envs=$3; shift 3; echo "== $name ($lib; $envs $*)"; env LD_LIBRARY_PATH=$lib:$PWD/.devcarry/lib $envs timeout 100 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 30 --transport threaded --blocks 1 --h2d-ceiling $H2D --json $OUT/hb_$name.json "$@" > $OUT/hb_$name.txt 2>&1; echo "rc $?"; python3 .devcarry/hbsum.py $OUT/hb_$name.json; }
NEW=$PWD/$B OLD=$PWD/.devcarry/oldtxn
run new1 $NEW HZ_X=1
run old1 $OLD HZ_X=1
run new2 $NEW HZ_X=1
run old2 $OLD HZ_X=1; t
run new_pw2 $NEW "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=2"
run new_pw4 $NEW "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=4"
run new_pw8 $NEW "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=8"
run old_pw4 $OLD "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=4"
run new_t13 $NEW HZ_X=1 --staging-threads 13
run new_pw4_t13 $NEW "HZ_TXN_PIECEWISE=1 HZ_TXN_WAVES=4" --staging-threads 13
run new3 $NEW HZ_X=1; t
timeout 120 $B/cuda/bench_w4a16 300 > $OUT/bench_w4a16.txt 2>&1; echo "bench_w4a16 rc $?"; tail -25 $OUT/bench_w4a16.txt; t
date
