#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
date; lscpu | grep "Model name"
build-dev/tools/hz-ceilings --json $OUT/ceilings1.json > $OUT/ceilings1.txt 2>&1; echo "rc $?"; grep -E "staged|memcpy|olmoe_expert|qwen_expert|OK" $OUT/ceilings1.txt
build-dev/tools/hz-ceilings --repeats 30 --json $OUT/ceilings2.json > $OUT/ceilings2.txt 2>&1; echo "rc $?"; grep -E "staged|OK" $OUT/ceilings2.txt
date
