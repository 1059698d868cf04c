#!/usr/bin/env bash
# Call 3 (carry build-dev = main + the screen's inputs in registers (uncommitted; HZ_SCREEN_XREG=0: the
# shared-memory path of 173ccbb), .devcarry with a test binary whose bound is zeroed on purpose): the
# screen's kernel test, the broken binary (must fail), the model test's screen part, then the step with
# the screen off / shared-memory path / registers, alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 120 $B/tests/unit/model/test_decode_screen > $OUT/ds.txt 2>&1; echo "test_decode_screen rc $?"; tail -3 $OUT/ds.txt
HZ_SCREEN_XREG=0 timeout 120 $B/tests/unit/model/test_decode_screen > $OUT/ds0.txt 2>&1; echo "test_decode_screen (smem path) rc $?"; tail -1 $OUT/ds0.txt
timeout 120 .devcarry/test_decode_screen_broken > $OUT/ds_broken.txt 2>&1; echo "broken bound: rc $? (must be 1)"; grep -c FAIL $OUT/ds_broken.txt; grep FAIL $OUT/ds_broken.txt | head -5
HZ_MODEL_GPU_PARTS=screen timeout 200 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "screen|FAIL|model_gpu" $OUT/mg.txt | head
t
st() { m=$1 c=$2 sc=$3 xr=$4; echo "== $m screen=$sc xreg=$xr"; HZ_SCREEN_XREG=$xr HZ_GPU_LM_SCREEN=$sc HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for r in 1 2; do
  st olmoe 64 0 1; st olmoe 64 1 0; st olmoe 64 1 1
  st qwen 60 0 1; st qwen 60 1 0; st qwen 60 1 1
done; t
date
