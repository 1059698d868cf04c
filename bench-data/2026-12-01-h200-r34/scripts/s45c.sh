#!/usr/bin/env bash
# Session 35, call 4: the sanitizers of scripts/gpu-check-model left out of call 3 (router cluster:
# memcheck, racecheck, initcheck; prefill test, quick: memcheck, racecheck), on main (9ecc76c).
# Carry ["build-dev", ".devcarry"].
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
B=build-dev/tests/unit/model; T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
r() { n=$1; shift; timeout "$@" > $OUT/$n.txt 2>&1; rc=$?; echo "== $n rc $rc"; grep -E "SUMMARY|OK|FAIL" $OUT/$n.txt | tail -n 3 | cut -c1-200; t; }
date
for tool in memcheck racecheck initcheck; do r router_$tool 100 compute-sanitizer --tool $tool --error-exitcode 86 $B/test_router_cluster; done
HZ_MODEL_GPU_QUICK=1 r prefill_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 86 $B/test_prefill_gpu
HZ_MODEL_GPU_QUICK=1 r prefill_racecheck 230 compute-sanitizer --tool racecheck --error-exitcode 86 $B/test_prefill_gpu
date
