#!/usr/bin/env bash
# Call 1 (r22): variants in .devcarry/v2 (main = 93bec10; dnh = down kernel stages through
# hz_load_act_pairs; attn512 = wip/attn-512, wide blocks with HZ_GPU_ATTN_THREADS=512).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
V=.devcarry/v2
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
HZ_GPU_TEST_NO_FAULTS=1 timeout 90 $V/tw4_dnh > $OUT/w4_dnh.txt 2>&1; echo "test_gpu_w4a16 (dnh) rc $?"; tail -1 $OUT/w4_dnh.txt
HZ_GPU_ATTN_THREADS=512 timeout 150 $V/tmg_attn512 > $OUT/mg_attn512.txt 2>&1; echo "test_model_gpu (attn512, wide) rc $?"; tail -1 $OUT/mg_attn512.txt
for r in 1 2; do for v in main attn512 dnh; do
  e=; [[ $v == attn512 ]] && e=512
  echo "== olmoe $v"; HZ_GPU_ATTN_THREADS=$e HZ_BENCH_GRAPH_ONLY=1 timeout 40 $V/$v --step olmoe 64 64 2>&1 | grep -E "graph\)|FAIL|tokens"
done; done
for r in 1 2; do for v in main attn512; do
  e=; [[ $v == attn512 ]] && e=512
  echo "== qwen $v"; HZ_GPU_ATTN_THREADS=$e HZ_BENCH_GRAPH_ONLY=1 timeout 50 $V/$v --step qwen 60 64 2>&1 | grep -E "graph\)|FAIL|tokens"
done; done
for r in 1 2; do for v in w4_main w4_dnh; do
  echo "== layer $v"; HZ_BENCH_EXECUTORS=grouped-2p+pdl timeout 40 $V/$v 200 olmoe 2>&1 | grep -E "grouped|FAIL" | tail -3
done; done
date
