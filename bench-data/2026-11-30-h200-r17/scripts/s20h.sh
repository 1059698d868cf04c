#!/usr/bin/env bash
# Call 8 (main, final code): GPU checks, memcheck of the decode model test, Qwen step with the two-pass
# kernels for information, the OLMoE contract (c64, c30 with three transports).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $B/cuda/test_gpu_w4a16 > $OUT/chk/w4.txt 2>&1; echo "test_gpu_w4a16 rc $?"; tail -1 $OUT/chk/w4.txt
timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/chk/tmg.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/chk/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/chk/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/chk/golden.txt 2>&1; echo "golden rc $?"; grep -E "olmoe|qwen|vs dequant|golden" $OUT/chk/golden.txt | head -8; t
HZ_MODEL_GPU_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/chk/memcheck.txt 2>&1; echo "memcheck rc $?"; tail -2 $OUT/chk/memcheck.txt; t
for p in default twopass; do
  echo "== qwen $p"; if [ $p = twopass ]; then export HZ_W4A16_PATH=twopass; else unset HZ_W4A16_PATH; fi
  HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"
done
unset HZ_W4A16_PATH; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
m=olmoe
timeout 200 scripts/bench --build $B --models $m --executors grouped --residencies 30,64 --transports threaded,threaded-whole,registered --transport-residency 30 --steps models,ceilings,sweep,transports,table --blocks 1 --out $OUT/$m > $OUT/bench_$m.txt 2>&1; echo "bench $m rc $?"
for f in $OUT/$m/bench-*.json $OUT/$m/xport-*.json; do [ -f "$f" ] && { echo "$(basename $f)"; python3 .devcarry/hbsum.py $f; }; done
grep -E "pinned H2D .*x 8" $OUT/bench_$m.txt | head -2
tar czf $OUT/$m.tgz -C $OUT $m bench_$m.txt; rm -rf $OUT/$m $OUT/bench_$m.txt; t
date
