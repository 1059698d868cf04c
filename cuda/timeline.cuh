/* Device side of the kernel timeline (timeline.h): HZ_TL_SCOPE at the top of a kernel (every thread
 * of the block must reach it: it holds one barrier; HZ_TL_SCOPE0 records from thread 0 alone), HZ_TL_WAITED after the grid-dependency wait, and
 * HZ_TL_HOST(name) once per translation unit for its arm/take functions. Without HZ_TIMELINE all three
 * expand to nothing. */
#ifndef HZ_CUDA_TIMELINE_CUH
#define HZ_CUDA_TIMELINE_CUH

#include "timeline.h"

#ifdef HZ_TIMELINE
#include <cuda_runtime.h>

namespace {

constexpr unsigned kTlMax = 1u << 16;
__device__ hz_tl_rec tl_buf[kTlMax];
__device__ unsigned tl_n;
__device__ int tl_on;

__device__ __forceinline__ uint64_t tl_now() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* ALL: every warp's lane 0 stamps the exit (the record's index goes through shared memory); without
 * it, thread 0 alone records, and no shared memory is added (kernels sized to the limit). */
template <bool ALL>
struct TlScope {
    unsigned i;
    __device__ static unsigned open(unsigned kind, uint64_t tag, unsigned info, unsigned info2) {
        unsigned k = ~0u;
        if (*(volatile int *)&tl_on) {
            k = atomicAdd(&tl_n, 1u);
            if (k < kTlMax) {
                hz_tl_rec r = {tag, tl_now(), 0, 0, {0, 0, 0}, kind, blockIdx.x + blockIdx.y * gridDim.x, info, info2};
                tl_buf[k] = r;
            } else {
                k = ~0u;
            }
        }
        return k;
    }
    __device__ TlScope(unsigned kind, uint64_t tag, unsigned info, unsigned info2) {
        if (ALL) {
            __shared__ unsigned si;
            if (threadIdx.x == 0) si = open(kind, tag, info, info2);
            __syncthreads();
            i = si;
        } else {
            i = threadIdx.x == 0 ? open(kind, tag, info, info2) : ~0u;
        }
    }
    __device__ void waited() const {
        if (threadIdx.x == 0 && i != ~0u) tl_buf[i].t_wait = tl_now();
    }
    /* by whichever thread reaches point n first (a later one overwrites: call it from one thread) */
    __device__ void mark(int n) const {
        if (i != ~0u) tl_buf[i].t_mark[n] = tl_now();
    }
    /* point n at a time taken earlier (tl_now), e.g. the latest of the block's warps */
    __device__ void mark_at(int n, uint64_t t) const {
        if (i != ~0u) tl_buf[i].t_mark[n] = t;
    }
    __device__ ~TlScope() {
        if ((threadIdx.x & 31u) == 0 && i != ~0u)
            atomicMax(reinterpret_cast<unsigned long long *>(&tl_buf[i].t_exit), (unsigned long long)tl_now());
    }
};

} // namespace

#define HZ_TL_SCOPE(kind, tag, info, info2) const TlScope<true> tl_scope_((kind), (uint64_t)(uintptr_t)(tag), (info), (info2))
#define HZ_TL_SCOPE0(kind, tag, info, info2) const TlScope<false> tl_scope_((kind), (uint64_t)(uintptr_t)(tag), (info), (info2))
#define HZ_TL_WAITED() tl_scope_.waited()
#define HZ_TL_MARK(n) tl_scope_.mark(n)
#define HZ_TL_MARK_AT(n, t) tl_scope_.mark_at((n), (t))
#define HZ_TL_NOW() tl_now()
#define HZ_TL_HOST(name)                                                                                   \
    extern "C" void hz_tl_arm_##name(int on) {                                                             \
        unsigned z = 0;                                                                                    \
        (void)cudaDeviceSynchronize();                                                                     \
        (void)cudaMemcpyToSymbol(tl_n, &z, sizeof z);                                                      \
        (void)cudaMemcpyToSymbol(tl_on, &on, sizeof on);                                                   \
    }                                                                                                      \
    extern "C" unsigned hz_tl_take_##name(hz_tl_rec *out, unsigned max) {                                  \
        unsigned n = 0;                                                                                    \
        (void)cudaDeviceSynchronize();                                                                     \
        (void)cudaMemcpyFromSymbol(&n, tl_n, sizeof n);                                                    \
        if (n > kTlMax) n = kTlMax;                                                                        \
        if (n > max) n = max;                                                                              \
        if (n) (void)cudaMemcpyFromSymbol(out, tl_buf, n * sizeof *out);                                   \
        return n;                                                                                          \
    }
#else
#define HZ_TL_SCOPE(kind, tag, info, info2) ((void)0)
#define HZ_TL_SCOPE0(kind, tag, info, info2) ((void)0)
#define HZ_TL_WAITED() ((void)0)
#define HZ_TL_MARK(n) ((void)0)
#define HZ_TL_MARK_AT(n, t) ((void)0)
#define HZ_TL_HOST(name)
#endif

#endif
