#!/bin/bash
# Call 7: timing probes, values wrong (one build, lib/model/forward_cuda.c reads HZ_PROBE_QH / HZ_PROBE_RH
# at capture): the q/k/v GEMV's x built from h alone (no FP32 expert sum: 4 KB read per block instead of
# 12) and the router's from h_in alone (no o output: 4 KB instead of 8). OLMoE step, two rounds.
# Carry build-r45 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r45
for r in 1 2; do
  for v in none qh rh qhrh; do
    unset HZ_PROBE_QH HZ_PROBE_RH
    case $v in qh) export HZ_PROBE_QH=1;; rh) export HZ_PROBE_RH=1;; qhrh) export HZ_PROBE_QH=1 HZ_PROBE_RH=1;; esac
    echo "== step olmoe $v round $r"; HZ_BENCH_GRAPH_ONLY=1 timeout 60 $B/pq/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
  done
done
echo "done after $(( $(date +%s) - T0 )) s"
