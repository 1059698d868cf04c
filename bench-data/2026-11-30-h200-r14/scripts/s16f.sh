#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
t() { date +%T; }
date; git log -1 --format=%h 2>/dev/null; lscpu | grep "Model name"
timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/tmg.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/golden.txt
t
HZ_MODEL_GPU_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/memcheck.txt 2>&1; echo "memcheck rc $?"; tail -2 $OUT/memcheck.txt
t
HZ_BENCH_GRAPH_ONLY=1 timeout 70 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph \+ pdl  \(graph\)"
timeout 90 .devcarry/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_o.txt 2>&1; echo "tl olmoe rc $?"; sed -n '/timeline over/,/graph + pdl  (graph)/p' $OUT/tl_o.txt | head -60
t
scripts/bench --build $B --models olmoe --executors grouped --residencies 30,64 --transports threaded,registered --transport-residency 30 --steps models,ceilings,sweep,transports,table --blocks 1 --out $OUT/olmoe > $OUT/bench_olmoe.txt 2>&1; echo "bench olmoe rc $?"
for f in $OUT/olmoe/bench-*.json; do echo "$f"; python3 .devcarry/hbsum.py $f; done
t
cd $OUT && tar czf contract-olmoe.tgz olmoe bench_olmoe.txt && rm -rf olmoe
