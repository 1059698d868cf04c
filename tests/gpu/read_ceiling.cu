/* See read_ceiling.cuh. */
#include <cuda_runtime.h>

#include "launch.cuh"
#include "read_ceiling.cuh"
#include "w4a16_device.cuh"

namespace {

struct ReadParams {
    const uint4 *p[32];
    uint32_t n;
    uint64_t chunks; /* 16-byte pieces per range */
};

/* Grid-stride over the concatenation of the ranges; eight loads in flight per thread. kPdl: launched
 * with programmatic dependent launch, the grid lets the next one be placed at once and waits for the
 * previous grid's end before its first load, as an expert kernel waits for its router: its time per
 * layer is then the reads alone, from that end to the last byte, without the launch between kernels. */
template <bool kPdl>
__global__ void __launch_bounds__(512) read_kernel(const __grid_constant__ ReadParams rp, uint32_t *sink) {
    if (kPdl) {
        hz_griddep_launch_dependents();
        hz_griddep_wait();
    }
    const uint64_t total = rp.chunks * rp.n, stride = (uint64_t)gridDim.x * blockDim.x;
    uint32_t x = 0;
    for (uint64_t i0 = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i0 < total; i0 += 8u * stride) {
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint64_t i = i0 + k * stride;
            v[k] = make_uint4(0, 0, 0, 0);
            if (i < total) v[k] = __ldcs(rp.p[i / rp.chunks] + i % rp.chunks);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) x ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
    }
    for (int o = 16; o > 0; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31u) == 0) atomicXor(sink + blockIdx.x, x);
}

} // namespace

extern "C" int hz_test_launch_read(const void *const *ptrs, uint32_t n, uint64_t bytes, uint32_t *sink, int sms,
                                   int pdl_blocks, void *stream) {
    if (n == 0 || n > 32 || bytes % 16u || pdl_blocks > 4) return (int)cudaErrorInvalidValue; /* sink: 4 per SM */
    ReadParams rp;
    for (uint32_t i = 0; i < 32; i++) rp.p[i] = i < n ? static_cast<const uint4 *>(ptrs[i]) : nullptr;
    rp.n = n;
    rp.chunks = bytes / 16u;
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (pdl_blocks <= 0)
        return (int)hz_launch_ex(read_kernel<false>, dim3((unsigned)(4 * sms)), dim3(512), 0, s, false, 0u, rp, sink);
    /* pdl_blocks per SM (1 or 2 leave room for the next layer's grid beside this one while it waits;
     * 64 KB in flight per block). */
    return (int)hz_launch_ex(read_kernel<true>, dim3((unsigned)(pdl_blocks * sms)), dim3(512), 0, s, true, 0u, rp,
                             sink);
}
