#!/bin/bash
# Call 2: (1) the host-copy microbenchmark hostcopy2 (bench-data/2026-12-02-h200-r47/hostcopy2.c, built
# on the build machine, carried as build-r47/hostcopy2): one OLMoE blob per round, 12 and 8 threads,
# libc / streaming / memcpy+CLWB / memcpy+CLDEMOTE / memcpy+CLFLUSHOPT, 1, 2 and 4 waves; (2) main's run-time
# knobs re-measured on main (aa3a9cb): OLMoE step with each of HZ_W4A16_DN_TMA=0, HZ_W4A16_DN_SPLIT=1,
# HZ_GEMV_DEEP=0, HZ_W4A16_GU_PDL=0 against none, two rounds. Carry build-r47 and .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib
T0=$(date +%s); B=build-r47
lscpu | grep -E 'Model name|L1d|L2|L3|NUMA node\(s\)|^CPU\(s\)'
grep -o -w -E 'cldemote|clwb|clflushopt|avx512f|movdir64b' /proc/cpuinfo | sort | uniq -c
timeout 200 $B/hostcopy2 > $OUT/hostcopy2.txt 2>&1; echo "hostcopy2 rc $? ($(( $(date +%s) - T0 )) s)"; cat $OUT/hostcopy2.txt
run() { # knob
  unset HZ_W4A16_DN_TMA HZ_W4A16_DN_SPLIT HZ_GEMV_DEEP HZ_W4A16_GU_PDL
  case $1 in tma0) export HZ_W4A16_DN_TMA=0;; dn1) export HZ_W4A16_DN_SPLIT=1;; deep0) export HZ_GEMV_DEEP=0;; pdl0) export HZ_W4A16_GU_PDL=0;; esac
  echo "== step olmoe $1"; HZ_BENCH_GRAPH_ONLY=1 timeout 100 $B/main/bench_model_ops --step olmoe 64 64 2>&1 | grep -E 'graph \+ pdl  \(|FAIL|rror' | head -3
}
for r in 1 2; do for v in base tma0 dn1 deep0 pdl0; do run $v; done; done
cd $OUT && tar -czf r47b.tgz *.txt && rm -f *.txt
echo "done after $(( $(date +%s) - T0 )) s"
