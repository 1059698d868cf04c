#!/usr/bin/env bash
# Call 1 (r24, main cbaa9c9 in build-dev): the final code's GPU checks of the partial path: test_model_gpu
# (run part), the sessions-in-threads test on cuda:0, the tiny model through hz-bench at c2.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
date
HZ_MODEL_GPU_PARTS=run timeout 120 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"
grep -E "experts ahead|FAIL|model_gpu:" $OUT/mg.txt | head -12
HZ_TEST_DEVICE=cuda:0 timeout 120 $B/tests/unit/model/test_model_sessions_threads 2>&1 | grep -E "PASSED|FAILED|ERROR" | head -5
W=/tmp/w; mkdir -p $W
$B/tools/hz-mkmodel --arch olmoe --preset tiny $W/tiny > /dev/null 2>&1 && $B/tools/hz-pack $W/tiny $W/tiny.hzq > /dev/null 2>&1; echo "tiny model rc $?"
timeout 60 $B/tools/hz-bench $W/tiny.hzq --device cuda:0 --executor grouped --resident 2 --blocks 1 --quick --json $OUT/tiny.json 2>&1 | tail -2
python3 -c "import json; r=json.load(open('$OUT/tiny.json'))['runs'][0]; s=r['session_stats']; print('experts_queued', s.get('experts_queued'), 'gated', s.get('experts_gated'), 'stored', s.get('routing_stored'))"
rm -f $OUT/mg.txt $OUT/tiny.json
date
