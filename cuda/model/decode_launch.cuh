/* Host and device helpers shared by the decode-step translation units (decode_ops.cu, decode_attn.cu,
 * model_ops.cu for the router tail's own kernel):
 * the CUDA-error-to-status conversion and the launcher with optional programmatic dependent launch.
 * Internal to each translation unit (anonymous namespace). */
#ifndef HZ_CUDA_MODEL_DECODE_LAUNCH_CUH
#define HZ_CUDA_MODEL_DECODE_LAUNCH_CUH

#include <cuda_runtime.h>

#include <cstdint>

#include "decode_ops.cuh"
#include "launch.cuh"

extern "C" {
#include "core/core.h"
}

namespace {

inline int cuda_fail(cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* the next, unrelated check must not see this one */
    return hz_error(HZ_EDEVICE, "decode: %s failed: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* hz_launch_ex (launch.cuh) with the decode kernels' shared-memory carveout set first; cluster_x > 0:
 * thread-block clusters of cluster_x blocks (sm_90). */
template <typename... P, typename... A>
cudaError_t launch_ex(void (*kern)(P...), unsigned grid_x, unsigned grid_y, unsigned threads, size_t smem,
                      const hz_klaunch *k, unsigned cluster_x, A &&...params) {
    /* The decode kernels prefer the largest shared-memory carveout, the one the routed-expert kernel
     * (221 KB per block) runs in: an SM configured for it can then also hold the next kernel's blocks
     * while the experts finish. H200, 2026-11-30: OLMoE step 0.680 -> 0.674 ms at positions 32-96 and
     * 0.721 -> 0.713 at ~200, Qwen unchanged (doc/benchmarks.md, fourteenth round). Set on the device
     * current at the first launch; a refusal only costs that gain.
     *
     * The static below is one per instantiation of this template, that is per parameter list, not per
     * kernel: of the kernels that share a list (the GEMV's variants, the attention's), only the first
     * one launched gets the preference; the others keep the driver's choice. Giving it to every kernel
     * was measured (H200, 2026-12-01, hz-bench): OLMoE c64 unchanged (1,585.7 / 1,586.3 against 1,585.9 /
     * 1,586.2 tok/s), Qwen c60 1.1% slower (718.4 / 718.4 against 726.7 / 726.6), most of it from the
     * route GEMV, the non-vector GEMV, the step-begin kernel or the router cluster (leaving those four
     * out: 721.6). Left out one at a time (2026-12-01, thirty-third round), only the route GEMV's
     * preference costs Qwen (721.1 without it, 715.7-715.9 without any other one, 723.8 main), and
     * per kernel gains OLMoE nothing (1,613.5 against 1,613.7), so the behaviour is kept
     * (doc/benchmarks.md, thirty-second and thirty-third rounds). */
    static const bool carved = [kern] {
        const cudaError_t e =
            cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
        if (e != cudaSuccess) (void)cudaGetLastError(); /* the next, unrelated check must not see it */
        return e == cudaSuccess;
    }();
    (void)carved;
    return hz_launch_ex(kern, dim3(grid_x, grid_y), dim3(threads), smem, static_cast<cudaStream_t>(k->stream),
                        k->pdl != 0, cluster_x, static_cast<A &&>(params)...);
}

template <typename... P, typename... A>
cudaError_t launch(void (*kern)(P...), unsigned grid_x, unsigned grid_y, unsigned threads, size_t smem,
                   const hz_klaunch *k, A &&...params) {
    return launch_ex(kern, grid_x, grid_y, threads, smem, k, 0u, static_cast<A &&>(params)...);
}

inline bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

} // namespace

#endif
