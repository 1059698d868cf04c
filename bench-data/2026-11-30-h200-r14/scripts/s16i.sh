#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date; lscpu | grep "Model name"
timeout 60 $B/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/tmg.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/golden.txt
scripts/bench --build $B --models olmoe --executors grouped --residencies 30 --steps models,ceilings,sweep,table --blocks 1 --out $OUT/olmoe > $OUT/bench_olmoe.txt 2>&1; echo "bench olmoe rc $?"
for f in $OUT/olmoe/bench-*.json; do echo "$f"; python3 .devcarry/hbsum.py $f; done
python3 -c "
import json; j=json.load(open('$OUT/olmoe/bench-olmoe-grouped-threaded-b1.json')); c=j['runs'][0]['cache']['stats_end']; print({k:c[k] for k in ('staging_threads','staging_streaming','staging_gbps','miss_transfer_gbps')})"
date
cd $OUT && tar czf final.tgz olmoe bench_olmoe.txt *.txt && rm -rf olmoe
