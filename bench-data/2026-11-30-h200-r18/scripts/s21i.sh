#!/usr/bin/env bash
# Call 9 (main, route_count_above refactor): the GPU tests on the final code and the step (same tokens).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
mkdir -p $OUT/chk
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/chk/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/chk/rc.txt
timeout 90 $B/tests/unit/model/test_model_gpu > $OUT/chk/tmg.txt 2>&1; echo "test_model_gpu rc $?"; tail -1 $OUT/chk/tmg.txt
timeout 90 $B/tests/unit/model/test_prefill_gpu > $OUT/chk/tpg.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/chk/tpg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 90 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/chk/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/chk/golden.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 86 $B/tests/unit/model/test_router_cluster > $OUT/chk/rk_rc.txt 2>&1; echo "racecheck router_cluster rc $?"; tail -1 $OUT/chk/rk_rc.txt; t
HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL"
HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL"; t
tar czf $OUT/chk.tgz -C $OUT chk; rm -rf $OUT/chk
date
