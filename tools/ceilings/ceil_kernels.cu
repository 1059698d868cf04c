// Kernels of hz-ceilings: the pattern fill and the read-only reduction that measures HBM read
// bandwidth (ceil_kernels.h).
#include "ceil_kernels.h"

namespace {

__global__ void fill_kernel(uint32_t *p, size_t n) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = ceil_pattern_word(i);
}

__device__ __forceinline__ unsigned long long words_of(uint4 v) {
    return (unsigned long long)v.x + v.y + v.z + v.w;
}

// One pass over n16 16-byte vectors. Four independent loads per iteration keep enough bytes in
// flight per thread for the memory system to run at its rate; the sum makes every load live, so the
// compiler cannot drop one, and the host checks it.
__global__ void sum_kernel(const uint4 *__restrict__ p, size_t n16, unsigned long long *out) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long acc = 0;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = __ldcs(p + i);
        uint4 b = __ldcs(p + i + stride);
        uint4 c = __ldcs(p + i + 2 * stride);
        uint4 d = __ldcs(p + i + 3 * stride);
        acc += words_of(a) + words_of(b) + words_of(c) + words_of(d);
    }
    for (; i < n16; i += stride) acc += words_of(__ldcs(p + i));

    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    __shared__ unsigned long long warp_sums[32];
    unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        unsigned nwarps = (blockDim.x + 31u) >> 5;
        acc = lane < nwarps ? warp_sums[lane] : 0ull;
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
        if (lane == 0) atomicAdd(out, acc);
    }
}

}  // namespace

extern "C" cudaError_t ceil_fill(uint32_t *dev, size_t n_words, cudaStream_t stream) {
    fill_kernel<<<1024, 256, 0, stream>>>(dev, n_words);
    return cudaGetLastError();
}

extern "C" cudaError_t ceil_sum(const void *dev, size_t n_bytes, unsigned blocks, unsigned threads,
                                unsigned long long *out, cudaStream_t stream) {
    if (n_bytes % 16u || ((uintptr_t)dev % 16u) || blocks == 0 || threads == 0 || threads > 1024 || threads % 32u)
        return cudaErrorInvalidValue;
    sum_kernel<<<blocks, threads, 0, stream>>>((const uint4 *)dev, n_bytes / 16u, out);
    return cudaGetLastError();
}
