#!/usr/bin/env bash
# Prepared for the next session (carry ["build-dev", ".devcarry"]; build-dev rebuilt from main as it
# landed): racecheck of test_model_gpu's other part (run,modes,queued; about 380 s on 2026-11-30),
# the one sanitizer run of gpu-check-model not repeated on the current kernels. Then the contract as
# before (bench-data/2026-12-01-h200-r31/scripts/s38a.sh, s38b.sh), whose tables now carry the
# response time, the H2D bytes and the RSS peak.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
date
HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=run,modes,queued timeout 540 stdbuf -oL compute-sanitizer --tool racecheck \
    --error-exitcode 86 build-dev/tests/unit/model/test_model_gpu > $OUT/model_racecheck_run.txt 2>&1
echo "rc $?"; tail -3 $OUT/model_racecheck_run.txt | cut -c1-240
date
