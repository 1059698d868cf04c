#!/usr/bin/env bash
# Call 3 (carry build-dev = the slots build with HZ_GPU_GEMV_SLOT_LATE, build-exp: tl = its timeline bench,
# m0 = main at bf3f2a7 (bench_model_ops, hz-bench, libhorizon), .devcarry).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
step() { HZ_BENCH_GRAPH_ONLY=1 timeout 120 "$@" 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'; }
for i in 1 2; do
  echo "== olmoe main bf3f2a7"; step build-exp/m0/tests/unit/model/bench_model_ops --step olmoe 64 64
  echo "== olmoe slots 0"; HZ_GPU_GEMV_SLOTS=0 step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
  echo "== olmoe slots 4 late"; HZ_GPU_GEMV_SLOT_LATE=1 step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
  echo "== olmoe slots 1"; HZ_GPU_GEMV_SLOTS=1 step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
  echo "== olmoe slots 1 late"; HZ_GPU_GEMV_SLOTS=1 HZ_GPU_GEMV_SLOT_LATE=1 step $B/tests/unit/model/bench_model_ops --step olmoe 64 64
done
for i in 1 2; do
  echo "== qwen main bf3f2a7"; HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-exp/m0/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'
  echo "== qwen slots 0"; HZ_GPU_GEMV_SLOTS=0 HZ_BENCH_GRAPH_ONLY=1 timeout 150 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL'
done
echo "== timeline slots 4 late"; HZ_GPU_GEMV_SLOT_LATE=1 HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-exp/tl/bench_model_ops --step olmoe 64 64 > $OUT/tl_late.txt 2>&1; echo "rc $?"; sed -n '/timeline over/,/lm_head      after/p' $OUT/tl_late.txt
date
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; ls /tmp/hz-bench-work/ 2>&1 | head
for i in 1 2; do
  echo "== hz-bench main bf3f2a7"; timeout 200 build-exp/m0/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_m0_$i.json 2>&1 | grep -i -E 'pooled|tok/s' | head -3
  echo "== hz-bench slots 0"; HZ_GPU_GEMV_SLOTS=0 timeout 200 $B/tools/hz-bench /tmp/hz-bench-work/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb_s0_$i.json 2>&1 | grep -i -E 'pooled|tok/s' | head -3
done
date
