#!/usr/bin/env bash
# Call 8: (1) test_router_cluster built with route_block broken on purpose (each lane keeps its own
# maximum: .devcarry/trc_broken) must fail; (2) the attention's marks moved (.devcarry/tl_marks2, a
# build-tl bench_model_ops): chunk 0's scores published, thread 0 done with chunk 0 and its chunk-1
# copies in, chunk 1 in (barrier).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date
timeout 60 .devcarry/trc_broken > $OUT/trc_broken.txt 2>&1; echo "test_router_cluster (broken) rc $?"; grep -c FAIL $OUT/trc_broken.txt; grep FAIL $OUT/trc_broken.txt | head -3; tail -1 $OUT/trc_broken.txt
HZ_BENCH_GRAPH_ONLY=1 timeout 60 .devcarry/tl_marks2 --step olmoe 64 64 > $OUT/tl_marks2.txt 2>&1
grep -E "^    (qkv|router|attention|o GEMV)|main-stream|graph\)" $OUT/tl_marks2.txt
date
