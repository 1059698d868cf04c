#!/usr/bin/env bash
# Call 9 (r24): the sessions-in-threads test on cuda:0, eight times, saying the failing session's message.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
for i in 1 2 3 4 5 6 7 8; do
  HZ_TEST_DEVICE=cuda:0 timeout 60 $B/tests/unit/model/test_model_sessions_threads > $OUT/t.txt 2>&1; echo "run $i rc $?"
  grep -E "session:|ERROR|FAILED  \] test|PASSED" $OUT/t.txt | head -4
done
rm -f $OUT/t.txt
