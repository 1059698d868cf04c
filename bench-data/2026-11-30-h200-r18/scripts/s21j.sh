#!/usr/bin/env bash
# Call 10: the new checks broken on purpose (block 0's shared-memory copy of each logit has its last
# bit flipped; .devcarry/broken/ was built from aaf6f43 with that one change): both tests must fail.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date
timeout 60 .devcarry/broken/test_router_cluster > $OUT/rc.txt 2>&1; echo "broken test_router_cluster rc $? (expected 1)"; grep -E "FAIL" $OUT/rc.txt | head -4; tail -1 $OUT/rc.txt
timeout 90 .devcarry/broken/test_model_gpu > $OUT/tmg.txt 2>&1; echo "broken test_model_gpu rc $? (expected 1)"; grep -E "FAIL" $OUT/tmg.txt | head -4; tail -1 $OUT/tmg.txt
date
