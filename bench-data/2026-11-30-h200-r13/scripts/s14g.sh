#!/usr/bin/env bash
# Session 13, call 7: final code: tests, memcheck, contract Qwen c60 + OLMoE c64
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
timeout 60 build-dev/tests/unit/model/test_model_gpu > $OUT/tmg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "FAIL" $OUT/tmg.txt | head -5; tail -1 $OUT/tmg.txt
HZ_GOLDEN_DEVICE=cuda:0 timeout 120 build-dev/tests/golden/test_golden_gpu build-dev/tools/hz-mkmodel build-dev/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "golden rc $?"; tail -1 $OUT/golden.txt; t
scripts/bench --build build-dev --models qwen --executors grouped --residencies 60 --steps models,ceilings,sweep,table --blocks 1 --out $OUT/qwen > $OUT/qwen.log 2>&1; echo "qwen contract rc $?"; tail -4 $OUT/qwen.log; t
scripts/bench --build build-dev --models olmoe --executors grouped --residencies 64 --steps models,ceilings,sweep,table --blocks 1 --out $OUT/olmoe > $OUT/olmoe.log 2>&1; echo "olmoe contract rc $?"; tail -4 $OUT/olmoe.log; t
HZ_MODEL_GPU_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 build-dev/tests/unit/model/test_model_gpu > $OUT/memcheck.txt 2>&1; echo "memcheck rc $?"; tail -3 $OUT/memcheck.txt; t
cd $OUT && tar czf contract.tgz qwen olmoe 2>/dev/null; ls -la $OUT | head
