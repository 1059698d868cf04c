#!/bin/bash
# Call 10: the attention at head_dim 128 (bench_model_ops --attention-check: 1-4,096 positions, every split and
# group setting, checks only, no cuBLAS; build-r52/bmo_check = main + that mode) plain, then under racecheck
# unfiltered. Carry build-r52, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
timeout 60 build-r52/bmo_check --attention-check > $OUT/plain.txt 2>&1; echo "plain rc $? ($(( $(date +%s) - T0 )) s): $(grep -c ' ok$' $OUT/plain.txt) ok, $(tail -1 $OUT/plain.txt)"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 stdbuf -oL build-r52/bmo_check --attention-check > $OUT/rc.txt 2>&1
echo "racecheck rc $? ($(( $(date +%s) - T0 )) s): $(grep -c ' ok$' $OUT/rc.txt) ok"; grep -E "SUMMARY|Internal|FAIL|bench_model_ops" $OUT/rc.txt | sort | uniq -c | head
cd $OUT && tar -czf c10.tgz *.txt && rm -f *.txt
