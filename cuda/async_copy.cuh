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

/* ---- L2 eviction priority of bytes read once per step ------------------------------------------ */

/* Weights stream through L2 once per step (about 1.2 GB for OLMoE-1B-7B against a 60 MB L2). Marked
 * evict-first, they are the first lines the L2 gives up, so what is read again soon keeps its place
 * (activations, the KV cache, the kernels' code and parameters).
 * Where it is used, measured on the H200 (bench_model_ops --step, hz-bench; doc/benchmarks.md, 27th
 * round): the two-pass expert kernels' bulk copies take it (OLMoE step 0.640 -> 0.633 ms at positions
 * 32-96, alternating runs; hz-bench c64 1,521 -> 1,535 tok/s with the GEMVs hinted too); the decode
 * GEMVs do not (no further gain for OLMoE, and Qwen's step 1.3% slower with them hinted); the fused
 * kernel's cp.async copies do not either: cp.async with an L2 cache hint there stopped the kernel
 * with cudaErrorIllegalInstruction on sm_90 (CUDA 13.0, driver 580), so cp_async16 has no hinted
 * twin. The register loads of the other W4A16 kernels were not measured with it and stay unhinted.
 * HZ_L2_STREAM_HINT=0 at build time turns the hint off. */
#ifndef HZ_L2_STREAM_HINT
#define HZ_L2_STREAM_HINT 1
#endif
#if HZ_L2_STREAM_HINT && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HZ_L2_HINTED 1
#else
#define HZ_L2_HINTED 0
#endif

__device__ __forceinline__ uint64_t l2_evict_first_policy() {
    uint64_t pol = 0;
#if HZ_L2_HINTED
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

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

/* bulk_copy for bytes read once per step (weights): evict-first in L2 (see above). */
__device__ __forceinline__ void bulk_copy_stream(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
#if HZ_L2_HINTED && __CUDA_ARCH__ >= 900
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
            smem_u32(dst)),
        "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(l2_evict_first_policy())
        : "memory");
#else
    bulk_copy(dst, src, bytes, bar);
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
