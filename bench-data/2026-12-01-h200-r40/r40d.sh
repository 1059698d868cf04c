#!/bin/bash
# The next-layer prediction stored by its GEMV (beside the stored routing), so that prefetch runs with the
# experts ahead, the hits on the device and the captured partial step: test_prefetch_gpu (prefetch on ==
# off bit for bit on tiny models, predictions through the slots), compute-sanitizer memcheck on it, then
# r40c.sh's comparison (threaded / registered, with and without prefetch, c30 of the spread OLMoE shape,
# random ids). Carry build-bench (tools, libhorizon.so, test_prefetch_gpu of an invariants build) and
# .devcarry (lib/).
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
timeout 150 build-bench/test_prefetch_gpu > $OUT/pf.txt 2>&1; echo "test_prefetch_gpu rc $? after $(( $(date +%s) - T0 )) s"
grep -E 'identical|predictions|FAIL|miss path' $OUT/pf.txt | head -30; tail -2 $OUT/pf.txt
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 86 build-bench/test_prefetch_gpu > $OUT/pf_memcheck.txt 2>&1
echo "memcheck rc $? after $(( $(date +%s) - T0 )) s"; grep -E 'ERROR SUMMARY|FAIL' $OUT/pf_memcheck.txt | head -5
bench-data/2026-12-01-h200-r40/r40c.sh olmoe 30 $((570 - ($(date +%s) - T0)))
