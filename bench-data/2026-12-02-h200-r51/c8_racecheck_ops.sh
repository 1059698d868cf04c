#!/bin/bash
# Call 8: racecheck, unfiltered, of bench_model_ops 10 (main's build, build-r52/bmo_main): every decode GEMV
# shape, then the attention at head_dim 128 (the full-size shapes') at 1/17/100/200 positions (the one-pass
# kernel on tensor-core tiles) and 256/1024/4096 (the chunked kernel). Carry build-r52, .devcarry/lib.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
timeout 420 compute-sanitizer --tool racecheck --error-exitcode 9 build-r52/bmo_main 10 > $OUT/rc_ops.txt 2>&1
echo "racecheck bench_model_ops 10 rc $? ($(( $(date +%s) - T0 )) s)"
grep -E "SUMMARY|Internal|attention|FAIL|bench_model_ops" $OUT/rc_ops.txt | tail -20
cd $OUT && gzip rc_ops.txt
