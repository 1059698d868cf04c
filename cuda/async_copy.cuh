/* Asynchronous copies into shared memory, shared by the W4A16 kernels and the decode kernels:
 * cp.async (LDGSTS, sm_80+: 16 bytes per thread, completion per thread through commit/wait groups)
 * and the bulk-copy engine (cp.async.bulk, sm_90: any multiple of 16 bytes issued by one thread,
 * completion counted in bytes on an mbarrier). Below sm_80 / sm_90 the cp.async helpers copy
 * directly and the bulk helpers do nothing (their callers check the architecture first). CUDA only;
 * internal to each translation unit (anonymous namespace). */
#ifndef HZ_CUDA_ASYNC_COPY_CUH
#define HZ_CUDA_ASYNC_COPY_CUH

#include <cuda_runtime.h>

#include <cstdint>

namespace {

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

/* ---- cp.async ---------------------------------------------------------------------------------- */

/* 16 bytes global -> shared through L2 only; completion is per thread (cp_async_wait), and a barrier
 * then publishes it to the block. */
__device__ __forceinline__ void cp_async16(void *dst, const void *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
#else
    *static_cast<uint4 *>(dst) = __ldcg(static_cast<const uint4 *>(src));
#endif
}
/* 8 bytes global -> shared (through L1); completion as cp_async16's. */
__device__ __forceinline__ void cp_async8(void *dst, const void *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
#else
    *static_cast<uint2 *>(dst) = *static_cast<const uint2 *>(src);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/* ---- bulk copies and mbarriers (sm_90) ----------------------------------------------------------- */

__device__ __forceinline__ void mbar_init(uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)) : "memory");
    /* Makes the initialised barrier visible to the bulk-copy engine (the async proxy). */
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

/* Arrives on the barrier (count 1) and tells it how many bytes the copies will deliver. */
__device__ __forceinline__ void mbar_expect(uint64_t *bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
#endif
}

/* global -> shared, `bytes` a multiple of 16, both addresses 16-byte aligned; completion counted on bar. */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
#endif
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done = 0;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(smem_u32(bar)), "r"(parity)
                     : "memory");
    } while (!done);
#endif
}

} // namespace

#endif
