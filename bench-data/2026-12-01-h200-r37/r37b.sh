#!/bin/bash
# 2026-12-01 r37: llama.cpp (ngxson/llama.cpp 3f545be, 2026-08-22) built HERE with its default
# FlashAttention kernels (the build machine's build had them off), then the OLMoE llama.cpp peer.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s)
if [ ! -x /tmp/llfa/build/bin/llama-bench ]; then
  mkdir -p /tmp/llfa/src && tar -xJf .devcarry/llama-src.tar.xz -C /tmp/llfa/src
  cmake -S /tmp/llfa/src -B /tmp/llfa/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90-real -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DGGML_NATIVE=OFF -DGGML_CUDA_NCCL=OFF -DLLAMA_BUILD_COMMIT=3f545bec \
    -DLLAMA_BUILD_NUMBER=0 > /tmp/llfa/cfg.log 2>&1 || { tail -20 /tmp/llfa/cfg.log; exit 1; }
fi
timeout $((${1:-560} - ($(date +%s) - T0))) ninja -C /tmp/llfa/build -j16 llama-bench > /tmp/llfa/build.log 2>&1
echo "ninja rc $? after $(( $(date +%s) - T0 )) s"; tail -2 /tmp/llfa/build.log
