/* Host and device helpers shared by the decode-step translation units (decode_ops.cu, decode_attn.cu):
 * the CUDA-error-to-status conversion, the launcher with optional programmatic dependent launch, and
 * the L2 prefetch of byte ranges that later kernels of the step will read. Internal to each
 * translation unit (anonymous namespace). */
#ifndef HZ_CUDA_MODEL_DECODE_LAUNCH_CUH
#define HZ_CUDA_MODEL_DECODE_LAUNCH_CUH

#include <cuda_runtime.h>

#include <cstdint>

#include "decode_ops.cuh"

extern "C" {
#include "core/core.h"
}

namespace {

inline int cuda_fail(cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* the next, unrelated check must not see this one */
    return hz_error(HZ_EDEVICE, "decode: %s failed: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Launches `kern` with or without programmatic dependent launch (the stream's previous kernel may
 * then still be running while this one issues the loads that do not depend on it). */
template <typename P>
cudaError_t launch(void (*kern)(P), unsigned grid_x, unsigned grid_y, unsigned threads, size_t smem,
                   const hz_klaunch *k, const P &params) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid_x, grid_y);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = static_cast<cudaStream_t>(k->stream);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = k->pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kern, params);
}

inline bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/* Prefetch ranges: 16-byte aligned starts, any length (the tail past the last whole 16 bytes is
 * skipped). Checked on the host so the kernels can trust them. */
inline bool l2pf_valid(const hz_l2pf *pf) {
    for (int i = 0; i < HZ_L2PF_MAX; i++)
        if (pf[i].bytes && (!pf[i].p || !aligned16(pf[i].p))) return false;
    return true;
}

constexpr uint32_t kL2pfPiece = 32u << 10; /* bytes per bulk prefetch instruction */

/* Block `part` of `parts` issues its share of every range as bulk L2 prefetches (sm_90: the copy
 * engine pulls the lines into L2 while the block goes on; nothing is waited for, nothing is read).
 * Pieces are dealt round-robin over the blocks and the threads of a block. A hint only: on older
 * devices it compiles to nothing. */
__device__ __forceinline__ void l2pf_issue(const hz_l2pf (&pf)[HZ_L2PF_MAX], uint32_t part, uint32_t parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    for (int i = 0; i < HZ_L2PF_MAX; i++) {
        const uint64_t bytes = pf[i].bytes & ~15ull;
        if (!bytes) continue;
        const char *base = static_cast<const char *>(pf[i].p);
        const uint64_t pieces = (bytes + kL2pfPiece - 1u) / kL2pfPiece;
        for (uint64_t k = (uint64_t)part + (uint64_t)threadIdx.x * parts; k < pieces;
             k += (uint64_t)parts * blockDim.x) {
            const uint64_t off = k * kL2pfPiece;
            const uint32_t n = (uint32_t)(bytes - off < kL2pfPiece ? bytes - off : kL2pfPiece);
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + off), "r"(n) : "memory");
        }
    }
#else
    (void)pf;
    (void)part;
    (void)parts;
#endif
}

} // namespace

#endif
