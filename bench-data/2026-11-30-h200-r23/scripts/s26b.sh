#!/usr/bin/env bash
# Call 2 (r23): why hz-bench's first ahead step failed in call 1. Tiny model through hz-bench, the
# sessions-in-threads test on cuda:0 (output), then the full-size OLMoE at c63 with variations.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
R=$OUT; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
W=/tmp/w; mkdir -p $W
$B/tools/hz-mkmodel --arch olmoe --preset tiny $W/tiny > /dev/null 2>&1 && $B/tools/hz-pack $W/tiny $W/tiny.hzq > /dev/null 2>&1; echo "tiny model rc $?"
for c in 2 4; do
  echo "== tiny hz-bench c$c"
  timeout 60 $B/tools/hz-bench $W/tiny.hzq --device cuda:0 --executor grouped --resident $c --blocks 1 --quick 2>&1 | tail -4
done
t
echo "== threads"
HZ_TEST_DEVICE=cuda:0 timeout 150 $B/tests/unit/model/test_model_sessions_threads 2>&1 | grep -v "^\[ RUN\|^\[       OK" | head -30; t
scripts/bench --build $B --models olmoe --executors grouped --steps models --blocks 1 --out $R/models > $R/bench_models.txt 2>&1; echo "bench models rc $?"; t
hb() { timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped \
    --resident 63 --transport threaded --blocks 1 --h2d-ceiling 52.9 "$@" 2>&1 | tail -3; }
echo "== c63 default"; hb
echo "== c63 serial transport"; timeout 60 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 63 --blocks 1 2>&1 | tail -3
echo "== c63 HZ_GPU_ROUTE_CLUSTER=0"; HZ_GPU_ROUTE_CLUSTER=0 hb
echo "== c63 HZ_W4A16_GU_PDL=0"; HZ_W4A16_GU_PDL=0 hb
t
date
