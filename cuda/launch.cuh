/* The one kernel launcher with launch attributes that the W4A16 executors (cuda/) and the decode
 * step's kernels (cuda/model/) share: programmatic dependent launch (the stream's previous kernel may
 * still be running while this one issues the loads that do not depend on it) and thread-block
 * clusters. Internal to each translation unit (anonymous namespace). */
#ifndef HZ_CUDA_LAUNCH_CUH
#define HZ_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

namespace {

/* Launches `kern` with `params` on `stream`; pdl: with programmatic dependent launch; cluster_x > 0:
 * the grid cut into thread-block clusters of cluster_x blocks along x (sm_90). Returns CUDA's status. */
template <typename... P, typename... A>
cudaError_t hz_launch_ex(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                         unsigned cluster_x, A &&...params) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    unsigned n = 0;
    if (pdl) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster_x) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = cluster_x;
        attr[n].val.clusterDim.y = 1;
        attr[n++].val.clusterDim.z = 1;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
    return cudaLaunchKernelEx(&cfg, kern, static_cast<A &&>(params)...);
}

} // namespace

#endif
