#!/usr/bin/env bash
# Session 35 call 3 (build-dev = main cd49656): compute-sanitizer on the router as the twenty-eighth round
# left it (route_block: warp 0's maximum, exponentials and in-order sum beside the other warps' ranking),
# on the decode GEMV test, and on the decode / prefill model tests in their quick modes.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
san() { # name timeout tool binary [env...]
  local name=$1 to=$2 tool=$3 bin=$4; shift 4
  local extra=; [ $tool = memcheck ] && extra="--leak-check full"
  env "$@" timeout $to compute-sanitizer --tool $tool $extra --error-exitcode 86 $bin > $OUT/san_${name}_$tool.txt 2>&1
  echo "sanitizer $tool $name rc $? $(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/san_${name}_$tool.txt) | $(grep -v '^=====' $OUT/san_${name}_$tool.txt | tail -1)"
}
for tool in memcheck racecheck synccheck initcheck; do san router_cluster 60 $tool $B/tests/unit/model/test_router_cluster HZ_X=1; done; t
for tool in memcheck racecheck; do san decode_gemv 60 $tool $B/tests/unit/model/test_decode_gemv HZ_X=1; done; t
san model_gpu 150 memcheck $B/tests/unit/model/test_model_gpu HZ_MODEL_GPU_QUICK=1; t
san model_gpu 200 racecheck $B/tests/unit/model/test_model_gpu HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run; t
san prefill_gpu 120 memcheck $B/tests/unit/model/test_prefill_gpu HZ_MODEL_GPU_QUICK=1; t
date
