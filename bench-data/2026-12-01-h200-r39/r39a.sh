#!/usr/bin/env bash
# Call 1 (carry build-dev = 744d736, .devcarry with llama.cpp's source subset): every GPU test of the model
# path on the committed code (last session's review fixes had only been compiled), compute-sanitizer on
# the screen's kernel test and on test_model_gpu's screen part; meanwhile llama.cpp (3f545be) is built
# with its FlashAttention kernels, and its static llama-bench comes back compressed for later calls.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
( mkdir -p /tmp/llfa/src && tar -xJf .devcarry/llama-src.tar.xz -C /tmp/llfa/src &&
  nice cmake -S /tmp/llfa/src -B /tmp/llfa/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90-real -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DGGML_NATIVE=OFF -DGGML_CUDA_NCCL=OFF -DLLAMA_BUILD_COMMIT=3f545bec \
    -DLLAMA_BUILD_NUMBER=0 > /tmp/llfa/cfg.log 2>&1 &&
  nice ninja -C /tmp/llfa/build -j14 llama-bench > /tmp/llfa/build.log 2>&1; echo "llama.cpp build rc $?" > /tmp/llfa/rc ) &
BP=$!
timeout 120 $B/tests/unit/model/test_decode_screen > $OUT/ds.txt 2>&1; echo "test_decode_screen rc $?"; grep -E "FAIL|tight|summed" $OUT/ds.txt | head -8; tail -1 $OUT/ds.txt
timeout 240 $B/tests/unit/model/test_model_gpu > $OUT/mg.txt 2>&1; echo "test_model_gpu rc $?"; grep -E "screen|FAIL" $OUT/mg.txt | head -8; tail -1 $OUT/mg.txt
timeout 120 $B/tests/unit/model/test_prefill_gpu > $OUT/pf.txt 2>&1; echo "test_prefill_gpu rc $?"; tail -1 $OUT/pf.txt
timeout 60 $B/tests/unit/model/test_decode_args > $OUT/da.txt 2>&1; echo "test_decode_args rc $?"; tail -1 $OUT/da.txt
timeout 60 $B/tests/unit/model/test_router_cluster > $OUT/rc.txt 2>&1; echo "test_router_cluster rc $?"; tail -1 $OUT/rc.txt
HZ_TEST_DEVICE=cuda:0 timeout 100 $B/tests/unit/model/test_model_sessions_threads > $OUT/th.txt 2>&1; echo "test_model_sessions_threads rc $?"; tail -1 $OUT/th.txt
HZ_BUILD_ROOT=$PWD/$B HZ_SOURCE_ROOT=$PWD HZ_GOLDEN_DEVICE=cuda:0 timeout 200 $B/tests/golden/test_golden_gpu $B/tools/hz-mkmodel $B/tools/hz-pack tests/golden/fixtures > $OUT/golden.txt 2>&1; echo "test_golden_gpu rc $?"; grep -E "top-1|OK|FAIL" $OUT/golden.txt | tail -3
t
for tool in memcheck racecheck; do
  extra=(); [[ $tool == memcheck ]] && extra=(--leak-check full)
  HZ_MODEL_GPU_QUICK=1 HZ_MODEL_GPU_PARTS=screen timeout 150 compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 86 $B/tests/unit/model/test_model_gpu > $OUT/san_mg_$tool.txt 2>&1
  echo "sanitizer $tool test_model_gpu(screen) rc $?"; grep -E "ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY|Hazard" $OUT/san_mg_$tool.txt | head -4
  timeout 200 compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 86 $B/tests/unit/model/test_decode_screen > $OUT/san_ds_$tool.txt 2>&1
  echo "sanitizer $tool test_decode_screen rc $?"; grep -E "ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY|Hazard|^OK|FAIL" $OUT/san_ds_$tool.txt | head -4
  t
done
wait $BP; cat /tmp/llfa/rc; tail -2 /tmp/llfa/build.log; t
if [ -x /tmp/llfa/build/bin/llama-bench ]; then
  ls -la /tmp/llfa/build/bin/llama-bench; strip -o /tmp/llama-bench /tmp/llfa/build/bin/llama-bench; ls -la /tmp/llama-bench
  tar -cJf /tmp/llama-bin.tar.xz -C /tmp llama-bench; ls -la /tmp/llama-bin.tar.xz
  split -b 15m -d /tmp/llama-bin.tar.xz $OUT/llama-bin.part; ls -la $OUT
fi
tar -czf $OUT/logs.tgz -C $OUT $(cd $OUT && ls *.txt) && rm -f $OUT/*.txt
t; date
