#!/bin/bash
# Call 9: call 8 again with cuBLAS's kernels left out (--kernel-name-exclude kns=nvjet: every hazard call 8
# displayed was inside cuBLAS's nvjet_sm90_hss_64x8_64x16_4x1_v_bz_TNT, the bench's reference GEMV), stdout
# line-buffered so that the bench's own lines survive. Carry build-r52, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
timeout 250 compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name-exclude kns=nvjet \
  stdbuf -oL build-r52/bmo_main 10 > $OUT/rc_ops2.txt 2>&1
echo "racecheck bench_model_ops 10 (cuBLAS excluded) rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "SUMMARY|Internal|Error|attention|FAIL|bench_model_ops" $OUT/rc_ops2.txt | sort | uniq -c | sort -rn | head -24
cd $OUT && gzip rc_ops2.txt
