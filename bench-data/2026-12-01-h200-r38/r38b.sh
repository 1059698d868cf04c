#!/usr/bin/env bash
# Call 2 (carry build-dev = main + the lm_head screen (uncommitted), .devcarry): the screen's kernel test,
# the model tests (screen, run, modes, queued), then the step with HZ_GPU_LM_SCREEN 0 / 1 alternating.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 120 $B/tests/unit/model/test_decode_screen > $OUT/ds.txt 2>&1; echo "test_decode_screen rc $?"; cat $OUT/ds.txt | tail -30
timeout 60 $B/tests/unit/model/test_decode_gemv > $OUT/dg.txt 2>&1; echo "test_decode_gemv rc $?"; tail -1 $OUT/dg.txt
HZ_MODEL_GPU_PARTS=screen,run,modes,queued timeout 200 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "screen|FAIL|bit-identical|model_gpu" $OUT/mg.txt | head -40
t
st() { m=$1 c=$2 sc=$3; echo "== $m screen=$sc"; HZ_GPU_LM_SCREEN=$sc HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/tests/unit/model/bench_model_ops --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for r in 1 2; do
  for sc in 0 1; do st olmoe 64 $sc; done
  for sc in 0 1; do st qwen 60 $sc; done
done; t
date
