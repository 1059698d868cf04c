/* The decode step's router GEMV and its routing tail in one thread-block cluster (see
 * hz_decode_router_cluster in decode_ops.cuh for the contract).
 *
 * Where the router is a GEMV of its own (OLMoE-1B-7B: 64 rows of 2048), the step used to run it as a
 * GEMV of 8 blocks and then a one-block kernel that reads the 64 logits back and routes: two kernel
 * boundaries and a round trip through L2 for 128 bytes. In a cluster the blocks hand their logits to
 * block 0's shared memory directly (distributed shared memory) and one hardware barrier orders them,
 * so block 0 routes as soon as the last row is done (with one warp, route_warp64, up to 64 experts). Each block holds its first rows' weights in
 * registers before the dependency wait, exactly as the general GEMV does, and adds the same chunks in
 * the same order (decode_gemv.cuh), so the logits and the routing are bit-identical to the two
 * kernels'. */
#include <cooperative_groups.h>

#include "decode_gate.cuh"
#include "decode_gemv.cuh"
#include "decode_launch.cuh"
#include "decode_ops.cuh"
#include "ops_common.cuh"
#include "timeline.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr uint32_t kClusterMax = 8; /* the portable cluster size: no opt-in attribute needed */

/* Cluster barrier halves (PTX barrier.cluster). arrive_relaxed + wait at the start only says that
 * every block of the cluster runs (required before another block's shared memory is written);
 * arrive_release + wait_acquire orders the shared-memory stores before it for the readers after it. */
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_arrive_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

/* Block b of the cluster computes rows [b * per, min(E, (b + 1) * per)), warp w of them the rows
 * w, w + 8, ... of that run; every logit also goes to block 0's lg[]. */
template <bool VEC>
__global__ void __launch_bounds__(kGemvThreads) router_cluster_kernel(const __grid_constant__ hz_dgemv_args a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(16) uint16_t xs[]; /* x: [in rounded up to 8] */
    __shared__ float red[kWarp + 1];
    __shared__ SharedLogit lg[HZ_DECODE_CLUSTER_ROWS]; /* block 0: every row's logit */
    __shared__ float prob[2 * HZ_DECODE_CLUSTER_ROWS];
    __shared__ const void *tab[HZ_DECODE_CLUSTER_ROWS];
    HZ_TL_SCOPE(HZ_TL_GEMV, a.seg[0].w, a.seg[0].rows, a.in);
    cluster_arrive_relaxed();
    const uint32_t E = a.seg[0].rows, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const uint32_t per = (E + gridDim.x - 1u) / gridDim.x, end = min(E, (blockIdx.x + 1u) * per);
    const uint32_t chunks = a.in / 8u;
    uint32_t row = blockIdx.x * per + warp;
    const uint4 *w4 = reinterpret_cast<const uint4 *>(a.seg[0].w);
    uint4 wv[kBatch];
    const uint4 nw0 = norm_w_first<VEC>(a); /* this kernel has registers to spare (see build_resnorm) */
    if (VEC && row < end) load_batch(w4 + (size_t)row * chunks, 0, lane, chunks, wv);
    if (blockIdx.x == 0 && a.table) /* the table never changes during a step */
        for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) tab[e] = a.table[e];

    griddep_wait();
    HZ_TL_WAITED();
    griddep_launch();
    build_resnorm<VEC>(a, xs, red, nw0, true);
    if (blockIdx.x == 0 && a.zero)
        for (uint32_t i = threadIdx.x; i < a.zero_n; i += blockDim.x) a.zero[i] = 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) HZ_TL_MARK(0);
    cluster_wait(); /* every block runs: block 0's lg[] may be written */
    SharedLogit *lead = cg::this_cluster().map_shared_rank(lg, 0);
    uint16_t *y = static_cast<uint16_t *>(a.seg[0].y);
    const uint4 *xs4 = reinterpret_cast<const uint4 *>(xs);
    for (; row < end; row += kGemvWarps) {
        float acc = 0.0f;
        if (VEC) {
            const uint4 *rw = w4 + (size_t)row * chunks;
            acc = sum_row(rw, wv, xs4, lane, chunks);
            if (row + kGemvWarps < end) load_batch(rw + (size_t)kGemvWarps * chunks, 0, lane, chunks, wv);
        } else {
            const uint16_t *w = a.seg[0].w + (size_t)row * a.in;
            for (uint32_t i = lane; i < a.in; i += kWarp) acc = fmaf(h2f(w[i]), h2f(xs[i]), acc);
        }
        acc = warp_sum(acc);
        if (lane == 0) {
            const uint16_t v = f2h(acc + (a.seg[0].bias ? h2f(a.seg[0].bias[row]) : 0.0f));
            y[row] = v;
            lead[row].bits = v;
        }
    }
    cluster_arrive_release();
    cluster_wait();
    if (blockIdx.x != 0) return; /* nobody reads the other blocks' shared memory */
    if (E <= 64u) { /* one warp routes; the block's other warps are done */
        if (warp != 0) return;
        if (lane == 0) HZ_TL_MARK(1);
        route_warp64(lg, E, a.top_k, a.norm_topk, a.ids_out, a.w_out, a.table ? tab : nullptr, a.rows_out,
                     route_host(a));
        if (lane == 0) HZ_TL_MARK(2);
        if (a.gate_on) { /* the experts' gate (hz_dgemv_args.gate): the warp's own ids, after its barrier */
            __syncwarp();
            gate_pass(a.gate, lane);
        }
        return;
    }
    if (threadIdx.x == 0) HZ_TL_MARK(1);
    route_block(lg, E, a.top_k, a.norm_topk, a.ids_out, a.w_out, a.table ? tab : nullptr, a.rows_out, prob,
                route_host(a));
    if (threadIdx.x == 0) HZ_TL_MARK(2);
    if (a.gate_on) { /* the experts' gate (hz_dgemv_args.gate): route_block's ids are behind a barrier */
        __syncthreads();
        if (warp == 0) gate_pass(a.gate, lane);
    }
#endif
}

/* hz_decode_route_logits: one block of kGemvThreads, the logits copied into shared memory as the
 * cluster's blocks store them. */
__global__ void __launch_bounds__(kGemvThreads) route_logits_kernel(const uint16_t *logits, uint32_t E, uint32_t K,
                                                                    int norm_topk, int warp64, uint32_t *ids,
                                                                    float *w) {
    __shared__ SharedLogit lg[HZ_DECODE_CLUSTER_ROWS];
    __shared__ float prob[2 * HZ_DECODE_CLUSTER_ROWS];
    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) lg[e].bits = logits[e];
    __syncthreads();
    if (!warp64)
        route_block(lg, E, K, norm_topk, ids, w, nullptr, nullptr, prob);
    else if (threadIdx.x < kWarp)
        route_warp64(lg, E, K, norm_topk, ids, w, nullptr, nullptr);
}

} // namespace

HZ_TL_HOST(router)

extern "C" int hz_decode_route_logits(const uint16_t *logits, uint32_t E, uint32_t K, int norm_topk, int warp64,
                                      uint32_t *ids, float *w, void *stream) {
    if (!logits || !ids || !w) return hz_error(HZ_EINVAL, "decode route logits: NULL argument");
    if (E == 0 || E > (warp64 ? 64u : HZ_DECODE_CLUSTER_ROWS) || K == 0 || K > E || K > kRouteMaxK)
        return hz_error(HZ_EINVAL, "decode route logits: %u experts, top-%u (%s)", E, K,
                        warp64 ? "one warp: at most 64 experts" : "one block");
    route_logits_kernel<<<1, kGemvThreads, 0, static_cast<cudaStream_t>(stream)>>>(logits, E, K, norm_topk, warp64,
                                                                                   ids, w);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the route-logits kernel");
}

extern "C" int hz_decode_router_cluster_supported(uint32_t *out) {
    *out = 0;
    int dev = 0, on = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&on, cudaDevAttrClusterLaunch, dev);
    if (e != cudaSuccess) return cuda_fail(e, "cudaDeviceGetAttribute(cudaDevAttrClusterLaunch)");
    cudaFuncAttributes fa = {};
    e = cudaFuncGetAttributes(&fa, router_cluster_kernel<true>);
    if (e != cudaSuccess) { /* no code for this device: the caller keeps the two kernels */
        (void)cudaGetLastError();
        return HZ_OK;
    }
    *out = on && fa.binaryVersion >= 90;
    return HZ_OK;
}

extern "C" int hz_decode_router_cluster(const hz_dgemv_args *a, const hz_decode_dev *dev, const hz_klaunch *k) {
    int st = dgemv_check(a, dev);
    if (st) return hz_error_prefix(st, "router cluster");
    if (!k) return hz_error(HZ_EINVAL, "decode router cluster: no launch");
    if (!dev->clusters)
        return hz_error(HZ_EUNSUPPORTED, "decode router cluster: this device or build cannot launch clusters");
    const uint32_t E = a->seg[0].rows;
    if (a->nseg != 1 || E > HZ_DECODE_CLUSTER_ROWS || a->tail != HZ_DGEMV_TAIL_ROUTE || a->ready || a->tags ||
        a->x_mode != HZ_DGEMV_X_RESNORM)
        return hz_error(HZ_EINVAL,
                        "decode router cluster: needs one segment of at most %u rows, the residual-norm input and "
                        "the router tail without ready flags or tags (%u segments, %u rows)",
                        HZ_DECODE_CLUSTER_ROWS, a->nseg, E);
    const unsigned blocks = E < kClusterMax ? E : kClusterMax;
    const size_t smem = (size_t)((a->in + 7u) & ~7u) * 2u;
    const cudaError_t e =
        dgemv_vec(a) ? launch_ex(router_cluster_kernel<true>, blocks, 1, kGemvThreads, smem, k, blocks, *a)
                     : launch_ex(router_cluster_kernel<false>, blocks, 1, kGemvThreads, smem, k, blocks, *a);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the router cluster");
}
