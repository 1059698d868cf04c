#!/usr/bin/env bash
# Call 5: OLMoE step timeline (build-tl, main's code) with the two-pass expert kernels (default) and
# with the fused kernel; the layer's parts alone (bench_w4a16, build-dev).
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
for p in twopass fused; do
  echo "== timeline olmoe $p"; HZ_W4A16_PATH=$p HZ_BENCH_GRAPH_ONLY=1 timeout 150 build-tl/tests/unit/model/bench_model_ops --step olmoe 64 64 > $OUT/tl_$p.txt 2>&1; echo rc $?
done
echo "== layer parts"; HZ_BENCH_EXECUTORS=grouped+pdl,grouped-2p+pdl,grouped:gate_up,grouped:down,read-ceiling,read:g_u,read:down timeout 150 build-dev/cuda/bench_w4a16 200 olmoe > $OUT/parts.txt 2>&1; echo rc $?
tar czf $OUT/tl.tgz -C $OUT tl_twopass.txt tl_fused.txt parts.txt
grep -E "us|GB/s" $OUT/parts.txt | tail -12
