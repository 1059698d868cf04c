#!/bin/bash
# route_warp64 also in the decode GEMV's router tail (Qwen's router with the shared expert's rows, E = 60),
# after call 11 found Qwen's step 0.6% slower with the butterfly route_warp_select: the router tests,
# test_model_gpu, test_decode_gemv, test_prefill_gpu, then Qwen's step, main (3a2b7b1) against this build,
# alternating. Carry build-bench, build-bench-new and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
N=build-bench-new; T0=$(date +%s)
for t in test_router_cluster test_decode_gemv test_model_gpu test_prefill_gpu; do
  timeout 150 $N/t/$t > $OUT/$t.txt 2>&1; echo "$t rc $? ($(( $(date +%s) - T0 )) s)"; grep FAIL $OUT/$t.txt | head -3; tail -1 $OUT/$t.txt
done
st() { b=$1 m=$2 c=$3; echo "== $b $m"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $b --step $m $c 64 2>&1 | grep -E 'graph \+ pdl  \(graph\)|rror' | sed 's/.*(graph)://'; }
for r in 1 2; do
  for b in build-bench/bench_model_ops_base $N/t/bench_model_ops; do st $b qwen 60; done
done
echo "done after $(( $(date +%s) - T0 )) s"
