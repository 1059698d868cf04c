/* Kernels of the non-routed decode path (see model_ops.cuh for the contract of each). */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "decode_launch.cuh"
#include "model_ops.cuh"
#include "ops_common.cuh"
#include "timeline.cuh"

extern "C" {
#include "core/core.h"
}

namespace {

constexpr int kGemvWarps = 8; /* rows per GEMV block: one warp per row */
constexpr int kAttnThreads = 256;
constexpr int kRouteThreads = 128; /* the decode step's router tail at 64 experts: measured at 128 (doc/benchmarks.md, eighth round) */
constexpr int kArgmaxThreads = 1024;

/* A launch that failed to start (bad configuration, lost context) reports here, as HZ_EDEVICE naming
 * the kernel; errors during execution surface at the next synchronising call of the backend. */
int launched(const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return HZ_OK;
    return hz_error(HZ_EDEVICE, "model kernel %s: launch failed: %s (%s)", kernel, cudaGetErrorName(e),
                    cudaGetErrorString(e));
}

/* ---- GEMV ------------------------------------------------------------------------------------ */

struct mgemv_params {
    hz_mgemv_seg seg[HZ_MGEMV_MAX_SEGS];
    uint32_t start[HZ_MGEMV_MAX_SEGS + 1]; /* first global row of each segment; start[nseg] = total */
    uint32_t nseg;
    uint32_t in;
    const uint16_t *x;
};

/* One warp per output row. VEC: 16-byte loads of weights and activations (in % 8 == 0), four loads in
 * flight per lane before their FMAs; weights are streamed (read once per step, evict first), the
 * activation vector stays in L1 for the block's other warps. */
template <bool VEC>
__global__ void __launch_bounds__(kGemvWarps *kWarp) mgemv_kernel(const mgemv_params p) {
    const uint32_t row = blockIdx.x * kGemvWarps + threadIdx.x / kWarp;
    const uint32_t lane = threadIdx.x % kWarp;
    if (row >= p.start[p.nseg]) return;
    uint32_t s = 0;
    while (row >= p.start[s + 1]) s++;
    const uint32_t r = row - p.start[s];
    const uint16_t *w = p.seg[s].w + (size_t)r * p.in;
    float acc = 0.0f;
    if (VEC) {
        const uint32_t chunks = p.in / 8u;
        const uint4 *w4 = reinterpret_cast<const uint4 *>(w);
        const uint4 *x4 = reinterpret_cast<const uint4 *>(p.x);
        uint32_t c = lane;
        for (; c + 3u * kWarp < chunks; c += 4u * kWarp) {
            uint4 wv[4], xv[4];
#pragma unroll
            for (int u = 0; u < 4; u++) wv[u] = __ldcs(w4 + c + u * kWarp);
#pragma unroll
            for (int u = 0; u < 4; u++) xv[u] = __ldg(x4 + c + u * kWarp);
#pragma unroll
            for (int u = 0; u < 4; u++) acc = dot8(wv[u], xv[u], acc);
        }
        for (; c < chunks; c += kWarp) acc = dot8(__ldcs(w4 + c), __ldg(x4 + c), acc);
    } else {
        for (uint32_t i = lane; i < p.in; i += kWarp) acc = fmaf(h2f(w[i]), h2f(p.x[i]), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
        const hz_mgemv_seg &sg = p.seg[s];
        float v = acc + (sg.bias ? h2f(sg.bias[r]) : 0.0f);
        if (sg.out_f32)
            static_cast<float *>(sg.y)[r] = v;
        else
            static_cast<uint16_t *>(sg.y)[r] = f2h(v);
    }
}

/* ---- decode attention ---------------------------------------------------------------------------- */

/* One block per query head. Scores: one warp per cached position (lanes split the head dimension,
 * FP16 pairs), kept in the FP32 scratch row of the head; then max, exp, sum and normalise; then the
 * weighted sum of V with the threads split into G groups of D (group g takes positions g, g+G, ...),
 * the groups' partial sums added in group order. */
__global__ void __launch_bounds__(kAttnThreads)
    attention_kernel(const uint16_t *q, const uint16_t *kc, const uint16_t *vc, uint16_t *out, float *scores,
                     uint32_t score_stride, uint32_t kv_group, uint32_t kv_width, uint32_t D, uint32_t n_pos,
                     float scale) {
    extern __shared__ float sm[]; /* qf [D] | partial [G x D] */
    __shared__ float red[kWarp + 1];
    const uint32_t h = blockIdx.x, lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const uint32_t nwarps = blockDim.x / kWarp;
    float *qf = sm, *part = sm + D;
    float *sc = scores + (size_t)h * score_stride;
    const uint16_t *kh = kc + (size_t)(h / kv_group) * D, *vh = vc + (size_t)(h / kv_group) * D;
    for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) qf[d] = h2f(q[(size_t)h * D + d]);
    __syncthreads();

    float mx = -INFINITY;
    for (uint32_t j = warp; j < n_pos; j += nwarps) {
        const __half2 *k2 = reinterpret_cast<const __half2 *>(kh + (size_t)j * kv_width);
        float acc = 0.0f;
        for (uint32_t e = lane; e < D / 2u; e += kWarp) {
            float2 kv = __half22float2(k2[e]);
            acc = fmaf(qf[2 * e], kv.x, acc);
            acc = fmaf(qf[2 * e + 1], kv.y, acc);
        }
        acc = warp_sum(acc) * scale;
        if (lane == 0) sc[j] = acc;
        mx = fmaxf(mx, acc);
    }
    mx = block_reduce<true>(mx, red); /* its barriers also publish the scores */
    float sum = 0.0f;
    for (uint32_t j = threadIdx.x; j < n_pos; j += blockDim.x) {
        float e = expf(sc[j] - mx);
        sc[j] = e;
        sum += e;
    }
    sum = block_reduce<false>(sum, red);
    const float inv = 1.0f / sum;
    for (uint32_t j = threadIdx.x; j < n_pos; j += blockDim.x) sc[j] *= inv;
    __syncthreads();

    const uint32_t G = blockDim.x / D;
    if (threadIdx.x < G * D) {
        const uint32_t d = threadIdx.x % D, g = threadIdx.x / D;
        float acc = 0.0f;
        for (uint32_t j = g; j < n_pos; j += G) acc = fmaf(sc[j], h2f(vh[(size_t)j * kv_width + d]), acc);
        part[g * D + d] = acc;
    }
    __syncthreads();
    for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (uint32_t g = 0; g < G; g++) acc += part[g * D + d];
        out[(size_t)h * D + d] = f2h(acc);
    }
}

/* ---- router -------------------------------------------------------------------------------------- */

/* One block: route_block (ops_common.cuh); the decode router GEMV's route_warp selects identically.
 * The row table never changes while a step runs, so it is copied into shared memory before the
 * dependency wait (launched with programmatic dependent launch, the kernel is placed while the router
 * GEMV still runs); route_block's barriers order those stores before route_write reads them. */
__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const uint16_t *logits, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out, float *w_out,
                 const void *const *table, const void **rows_out) {
    __shared__ float p[2 * kRouteMaxExperts];
    __shared__ const void *tab[kRouteMaxExperts];
    HZ_TL_SCOPE(HZ_TL_ROUTE, logits, E, 0);
    if (table)
        for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) tab[e] = table[e];
    griddep_wait();
    HZ_TL_WAITED();
    griddep_launch();
    route_block(logits, E, K, norm_topk, ids_out, w_out, table ? tab : nullptr, rows_out, p);
}

/* ---- SiLU-and-multiply, argmax ----------------------------------------------------------------- */

__global__ void silu_mul_kernel(const float *g, const float *u, uint16_t *a, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float gi = g[i];
        a[i] = f2h(gi / (1.0f + expf(-gi)) * u[i]);
    }
}

__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(const float *x, uint32_t n, int32_t *out) {
    __shared__ float bv[kArgmaxThreads / kWarp];
    __shared__ uint32_t bi[kArgmaxThreads / kWarp];
    float best = -INFINITY;
    uint32_t idx = kNoIndex;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
        if (x[i] > best || idx == kNoIndex) { /* ascending scan: the first maximum stays */
            best = x[i];
            idx = i;
        }
    idx = block_argmax(best, idx, bv, bi);
    if (threadIdx.x == 0) *out = (int32_t)idx;
}

} // namespace

HZ_TL_HOST(model)

/* ---- launch functions --------------------------------------------------------------------------- */

extern "C" int hz_model_gemv(const uint16_t *x, uint32_t in, const hz_mgemv_seg *segs, uint32_t nseg, void *stream) {
    if (!x || !segs || nseg == 0 || nseg > HZ_MGEMV_MAX_SEGS || in == 0)
        return hz_error(HZ_EINVAL, "model gemv: bad arguments (%u segments, in %u)", nseg, in);
    mgemv_params p = {};
    p.nseg = nseg;
    p.in = in;
    p.x = x;
    bool vec = in % 8u == 0 && ((uintptr_t)x & 15u) == 0;
    uint64_t total = 0;
    for (uint32_t s = 0; s < nseg; s++) {
        if (!segs[s].w || !segs[s].y || segs[s].rows == 0)
            return hz_error(HZ_EINVAL, "model gemv: segment %u has no weights, output or rows", s);
        if (((uintptr_t)segs[s].w & 15u) != 0) vec = false;
        p.seg[s] = segs[s];
        p.start[s] = (uint32_t)total;
        total += segs[s].rows;
    }
    if (total > 0xffffffffu / 2u) return hz_error(HZ_EINVAL, "model gemv: %llu rows", (unsigned long long)total);
    p.start[nseg] = (uint32_t)total;
    const uint32_t blocks = (uint32_t)((total + kGemvWarps - 1) / kGemvWarps);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (vec)
        mgemv_kernel<true><<<blocks, kGemvWarps * kWarp, 0, s>>>(p);
    else
        mgemv_kernel<false><<<blocks, kGemvWarps * kWarp, 0, s>>>(p);
    return launched("gemv");
}

extern "C" int hz_model_attention(const uint16_t *q, const uint16_t *kc, const uint16_t *vc, uint16_t *out,
                                  float *scores, uint32_t score_stride, uint32_t heads, uint32_t kv_heads,
                                  uint32_t head_dim, uint32_t n_pos, void *stream) {
    if (!q || !kc || !vc || !out || !scores || heads == 0 || kv_heads == 0 || heads % kv_heads || n_pos == 0 ||
        score_stride < n_pos || head_dim == 0 || head_dim % 2u)
        return hz_error(HZ_EINVAL, "model attention: bad arguments");
    if (head_dim > (uint32_t)kAttnThreads)
        return hz_error(HZ_EUNSUPPORTED, "model attention: head_dim %u above the %d supported", head_dim, kAttnThreads);
    const uint32_t G = kAttnThreads / head_dim;
    const size_t smem = (size_t)(head_dim + G * head_dim) * sizeof(float);
    const float scale = 1.0f / sqrtf((float)head_dim);
    attention_kernel<<<heads, kAttnThreads, smem, static_cast<cudaStream_t>(stream)>>>(
        q, kc, vc, out, scores, score_stride, heads / kv_heads, kv_heads * head_dim, head_dim, n_pos, scale);
    return launched("attention");
}

extern "C" int hz_model_route(const uint16_t *logits, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out,
                              float *w_out, const void *const *table, const void **rows_out, int pdl, void *stream) {
    if (!logits || !ids_out || !w_out || (table && !rows_out) || E == 0 || K == 0 || K > E)
        return hz_error(HZ_EINVAL, "model route: bad arguments (E %u, K %u)", E, K);
    if (E > kRouteMaxExperts || K > kRouteMaxK)
        return hz_error(HZ_EUNSUPPORTED, "model route: %u experts top-%u (at most %u, top-%u)", E, K,
                        kRouteMaxExperts, kRouteMaxK);
    const hz_klaunch k = {stream, pdl};
    cudaError_t e = launch(route_kernel, 1, 1, kRouteThreads, 0, &k, logits, E, K, norm_topk, ids_out, w_out, table,
                           rows_out);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the router");
}

extern "C" int hz_model_silu_mul(const float *g, const float *u, uint16_t *a, uint32_t n, void *stream) {
    if (!g || !u || !a || n == 0) return hz_error(HZ_EINVAL, "model silu_mul: bad arguments");
    silu_mul_kernel<<<(n + 255u) / 256u, 256, 0, static_cast<cudaStream_t>(stream)>>>(g, u, a, n);
    return launched("silu_mul");
}

extern "C" int hz_model_argmax(const float *x, uint32_t n, int32_t *out, void *stream) {
    if (!x || !out || n == 0) return hz_error(HZ_EINVAL, "model argmax: bad arguments");
    argmax_kernel<<<1, kArgmaxThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, n, out);
    return launched("argmax");
}
