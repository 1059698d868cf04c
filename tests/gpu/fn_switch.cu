/* See fn_switch.cuh. */
#include <cuda_runtime.h>

#include "fn_switch.cuh"
#include "launch.cuh"
#include "w4a16_device.cuh"

namespace {

constexpr int kFnBody = 1024; /* FMA + a compare per step: about 2,000 instructions */

/* The body is one dependent chain, so every instruction is fetched and issued in order; the constants
 * depend on ID, so no two functions share code. The result is stored only if it is impossible, which
 * the compiler cannot know. */
template <int ID>
__global__ void __launch_bounds__(256, 4) fn_kernel(uint32_t *sink) {
    hz_griddep_launch_dependents();
    hz_griddep_wait();
    float a = (float)threadIdx.x * 1e-3f;
#pragma unroll
    for (int i = 0; i < kFnBody; i++) {
        a = fmaf(a, 1.0f + (float)(i * 7 + ID) * 1e-7f, (float)(ID + 1) * 1e-4f);
        a = fminf(a, 1.0e30f + (float)i);
    }
    if (a == -1.0f) sink[blockIdx.x] = __float_as_uint(a);
}

__global__ void __launch_bounds__(512) stream_kernel(const uint4 *p, uint64_t chunks, uint32_t *sink) {
    hz_griddep_launch_dependents();
    hz_griddep_wait();
    uint32_t x = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint4 v = p[i];
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x12345678u) sink[blockIdx.x] = x;
}

typedef void (*fn_t)(uint32_t *);
const fn_t kFns[6] = {fn_kernel<0>, fn_kernel<1>, fn_kernel<2>, fn_kernel<3>, fn_kernel<4>, fn_kernel<5>};

} // namespace

extern "C" int hz_test_fn_switch(const int *seq, int seq_len, int count, const void *buf, uint64_t stream_bytes,
                                 uint32_t *sink, int sms, void *stream) {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    for (int i = 0; i < count; i++) {
        const int f = seq[i % seq_len];
        if (f < 0 || f > 5) return (int)cudaErrorInvalidValue;
        cudaError_t e = hz_launch_ex(kFns[f], dim3(4u * (unsigned)sms), dim3(256), 0, s, true, 0u, sink);
        if (e == cudaSuccess && stream_bytes)
            e = hz_launch_ex(stream_kernel, dim3(4u * (unsigned)sms), dim3(512), 0, s, true, 0u,
                             static_cast<const uint4 *>(buf), stream_bytes / 16u, sink);
        if (e != cudaSuccess) return (int)e;
    }
    return (int)cudaSuccess;
}
