/* Device helpers shared by the non-routed decode kernels (model_ops.cu, decode_ops.cu): warp and
 * block reductions, FP16 conversions with the rounding points of doc/numerics.md, the 8-wide FP16 dot
 * product, programmatic-dependent-launch controls, and the router's softmax + top-k as one block's
 * work (the stand-alone router kernel) or one warp's (the decode router GEMV), written step for step
 * alike so both select identically. CUDA only; everything here is internal to one translation unit (anonymous namespace). */
#ifndef HZ_CUDA_MODEL_OPS_COMMON_CUH
#define HZ_CUDA_MODEL_OPS_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "async_copy.cuh"

namespace {

constexpr int kWarp = 32;
constexpr uint32_t kRouteMaxExperts = 1024;
constexpr uint32_t kRouteMaxK = 64;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sum or max; every thread gets the result. `red` holds one float per warp (+1). */
template <bool MAX>
__device__ float block_reduce(float v, float *red) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nwarps = blockDim.x / kWarp;
    v = MAX ? warp_max(v) : warp_sum(v);
    __syncthreads(); /* red may still be read by a previous reduction */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float r = lane < nwarps ? red[lane] : (MAX ? -INFINITY : 0.0f);
        r = MAX ? warp_max(r) : warp_sum(r);
        if (lane == 0) red[kWarp] = r;
    }
    __syncthreads();
    return red[kWarp];
}

__device__ __forceinline__ float h2f(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
__device__ __forceinline__ uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float round16(float f) { return __half2float(__float2half_rn(f)); }

/* Eight FP16 weights times eight FP16 activations, added to acc in FP32. */
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
    const __half2 *wh = reinterpret_cast<const __half2 *>(&w);
    const __half2 *xh = reinterpret_cast<const __half2 *>(&x);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 a = __half22float2(wh[i]), b = __half22float2(xh[i]);
        acc = fmaf(a.x, b.x, acc);
        acc = fmaf(a.y, b.y, acc);
    }
    return acc;
}

/* 16 bytes read once per step (weights): streamed past L1 so it keeps the activations. */
__device__ __forceinline__ uint4 ld_stream(const void *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* Programmatic dependent launch (sm_90). wait: returns once the grid this one depends on has
 * completed and its writes are visible (at once when launched without the attribute). launch:
 * lets the next grid of the stream be scheduled; it still waits for this grid before reading. */
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* A flag for another grid (hz_dgemv_args.ready): stores before it, fenced by the caller, are visible
 * to a reader that acquires the value. */
__device__ __forceinline__ void st_release_gpu(uint32_t *p, uint32_t v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* A word another block writes or reads while this grid runs, with no ordering of other memory
 * (hz_dgemv_args.tags: the value travels in the word itself). */
__device__ __forceinline__ void st_relaxed_gpu(uint32_t *p, uint32_t v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_relaxed_gpu(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

/* ---- argmax, ties to the lower index (the CPU's first maximum) ---------------------------------- */

constexpr uint32_t kNoIndex = 0xffffffffu;

/* (v, i) beats (bv, bi): larger, or equal with the lower index; kNoIndex loses to everything. */
__device__ __forceinline__ bool argmax_better(float v, uint32_t i, float bv, uint32_t bi) {
    return i != kNoIndex && (bi == kNoIndex || v > bv || (v == bv && i < bi));
}

/* Every thread's candidate (best, bi) reduced over the block (all threads call it); the block's
 * winner is returned to thread 0. wv, wi: shared memory, one entry per warp. */
__device__ __forceinline__ uint32_t block_argmax(float best, uint32_t bi, float *wv, uint32_t *wi) {
    for (int o = kWarp / 2; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const uint32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (argmax_better(ov, oi, best, bi)) {
            best = ov;
            bi = oi;
        }
    }
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    if (lane == 0) {
        wv[warp] = best;
        wi[warp] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (uint32_t w = 1; w < blockDim.x / kWarp; w++)
            if (argmax_better(wv[w], wi[w], best, bi)) {
                best = wv[w];
                bi = wi[w];
            }
    return bi;
}

/* An argmax tail's last block: every block's best (bval[b], bidx[b] for b < nblocks, written by the other
 * blocks before their ticket, so read through L2), scanned by the block's threads in parallel, ties to
 * the lower index; the winner is returned to thread 0 (all threads call it). */
__device__ __forceinline__ uint32_t argmax_of_blocks(const float *bval, const uint32_t *bidx, uint32_t nblocks,
                                                     float *wv, uint32_t *wi) {
    float best = -INFINITY;
    uint32_t bi = kNoIndex;
    for (uint32_t b = threadIdx.x; b < nblocks; b += blockDim.x) {
        const float v = __ldcg(bval + b);
        const uint32_t i = __ldcg(bidx + b);
        if (argmax_better(v, i, best, bi)) {
            best = v;
            bi = i;
        }
    }
    return block_argmax(best, bi, wv, wi);
}

/* The router's steps, shared by route_block and route_warp so that a block and a warp select
 * identically; `t` of `n` threads (a block or a warp) take part where a step is parallel. The top-k is
 * ranked on the logits (softmax is monotonic, so the K largest logits are the K largest probabilities;
 * equal logits: the lower id, as forward.c), so the ranking needs neither the exponentials nor their
 * sum and runs beside them; the weights are the probabilities of the chosen experts. */

/* 1 / sum of the E exponentials, added in expert order by one thread (as forward.c). Eight values are
 * read ahead of their adds: a loop that waits on each shared-memory load made the router tail ~3 us
 * slower at 64 experts than at 16 (bench_model_ops --step, H200, 2026-11-29). The adds stay in order. */
__device__ __forceinline__ float route_inv_sum(const float *p, uint32_t E) {
    float sum = 0.0f;
    uint32_t e = 0;
    for (; e + 8u <= E; e += 8u) {
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = p[e + i];
#pragma unroll
        for (int i = 0; i < 8; i++) sum += v[i];
    }
    for (; e < E; e++) sum += p[e];
    return 1.0f / sum;
}

/* A router logit as a ranking key: NaN ranks as -inf. */
__device__ __forceinline__ float route_key(float v) { return v == v ? v : -INFINITY; }

/* How many of experts [o0, o1) rank above expert e, whose key is kv: a larger logit, or an equal one
 * with a lower id. Eight loads ahead of their compares, as in route_inv_sum. */
__device__ __forceinline__ uint32_t route_count_above(const float *lg, uint32_t o0, uint32_t o1, uint32_t e, float kv) {
    uint32_t rank = 0, o = o0;
    for (; o + 8u <= o1; o += 8u) {
        float ko[8];
#pragma unroll
        for (int i = 0; i < 8; i++) ko[i] = route_key(lg[o + i]);
#pragma unroll
        for (int i = 0; i < 8; i++) rank += (ko[i] > kv) || (ko[i] == kv && o + i < e);
    }
    for (; o < o1; o++) {
        const float ko = route_key(lg[o]);
        rank += (ko > kv) || (ko == kv && o < e);
    }
    return rank;
}

/* The top-k of the CPU's insertion rule (strict >, so ties keep the lower id), i.e. the k largest by
 * (logit descending, id ascending): each thread ranks its experts against all others; sel_id[rank] = e
 * for the K first. A NaN logit ranks as -inf: the ranks stay a permutation, so every chosen slot is
 * written and every id is a valid expert. */
__device__ __forceinline__ void route_rank(const float *lg, uint32_t E, uint32_t K, uint32_t t, uint32_t n,
                                           uint32_t *sel_id) {
    for (uint32_t e = t; e < E; e += n) {
        const uint32_t rank = route_count_above(lg, 0, E, e, route_key(lg[e]));
        if (rank < K) sel_id[rank] = e;
    }
}

/* route_rank with every expert's comparisons split over `parts` consecutive threads of one warp (a
 * power of two up to 8, as many as n threads allow for E experts): each counts the experts above its
 * own in a slice of the others, and a shuffle adds the counts. Ranks are integer counts, so they are
 * exactly route_rank's. The router cluster's block 0 (256 threads, 64 experts: 4 threads each) routed
 * in 1.92 us instead of 2.12 with one thread per expert, and one warp (two experts per lane) took
 * 2.87 (kernel timeline, H200, 2026-11-30). Every thread of the n must call it (the shuffle), and the
 * n threads must be whole warps. */
__device__ __forceinline__ void route_rank_split(const float *lg, uint32_t E, uint32_t K, uint32_t t, uint32_t n,
                                                 uint32_t *sel_id) {
    uint32_t parts = 1;
    while (parts < 8u && 2u * parts * E <= n) parts *= 2u;
    if (parts == 1u) {
        route_rank(lg, E, K, t, n, sel_id);
        return;
    }
    const uint32_t e = t / parts, q = t % parts, span = (E + parts - 1u) / parts;
    uint32_t rank = 0;
    if (e < E) rank = route_count_above(lg, q * span, min(E, (q + 1u) * span), e, route_key(lg[e]));
    for (uint32_t m = 1; m < parts; m <<= 1) rank += __shfl_xor_sync(0xffffffffu, rank, m);
    if (e < E && q == 0 && rank < K) sel_id[rank] = e;
}

/* Where a decode router also leaves its selection for the host (hz_dgemv_args.host_*): all NULL for
 * every other caller. */
struct RouteHost {
    uint32_t *ids = nullptr;
    float *w = nullptr;
    uint64_t *tag_out = nullptr;
    uint64_t tag = 0;
};

/* After every writer's route_write (each fenced its own host stores, and a barrier or __syncwarp over
 * the writers came between): one thread publishes the tag. The host reads ids and weights only after
 * it has seen the tag. */
__device__ __forceinline__ void route_publish_host(const RouteHost &hh) {
    __threadfence_system();
    *reinterpret_cast<volatile uint64_t *>(hh.tag_out) = hh.tag;
}

/* ids_out[k], w_out[k] sorted by id (the executor's order) and, with a table, rows_out[k] = table[id].
 * The weight of the expert ranked k is its probability ex[id] * inv (the exponential times 1 / their
 * sum, the product the CPU's softmax stores). With norm_topk each weight is divided by the sum of the
 * chosen ones, added in rank order as the CPU does: every writing thread adds them itself (the same adds
 * in the same order, so the same sum), which spares a barrier between one thread's sum and the others'
 * divisions. */
__device__ __forceinline__ void route_write(const uint32_t *sel_id, const float *ex, float inv, uint32_t K,
                                            int norm_topk, uint32_t t, uint32_t n, uint32_t *ids_out, float *w_out,
                                            const void *const *table, const void **rows_out,
                                            const RouteHost &hh = RouteHost{}) {
    for (uint32_t k = t; k < K; k += n) {
        const uint32_t id = sel_id[k];
        uint32_t at = 0;
        float sum = 0.0f;
        for (uint32_t o = 0; o < K; o++) {
            at += sel_id[o] < id;
            if (norm_topk) sum += ex[sel_id[o]] * inv;
        }
        const float v = ex[id] * inv;
        const float w = norm_topk ? v / sum : v;
        ids_out[at] = id;
        w_out[at] = w;
        if (table) rows_out[at] = table[id];
        if (hh.ids) {
            hh.ids[at] = id;
            hh.w[at] = w;
            __threadfence_system(); /* this writer's host stores before the tag (route_publish_host) */
        }
    }
}

/* A router logit as the router sees it: an FP16 logit as is, an FP32 one (a GEMM's output) rounded to
 * FP16 first, as the CPU's router GEMV rounds its output. Read through L2: other blocks of the same
 * grid may have written it. */
__device__ __forceinline__ float route_logit(const uint16_t *logits, uint32_t e) { return h2f(__ldcg(logits + e)); }
__device__ __forceinline__ float route_logit(const float *logits, uint32_t e) { return round16(__ldcg(logits + e)); }
/* An FP16 logit in this block's shared memory, stored there by the blocks of its cluster (the router
 * cluster kernel, decode_router.cu). */
struct SharedLogit {
    uint16_t bits;
};
__device__ __forceinline__ float route_logit(const SharedLogit *logits, uint32_t e) { return h2f(logits[e].bits); }

/* Router over E logits (FP16, or FP32 rounded to FP16: route_logit), run by ONE block (any size that
 * is a multiple of 32): softmax in FP32 with the sum added in expert order by one thread, the top-k on
 * the logits, and the optional renormalisation above. Writes ids_out[k], w_out[k] sorted by id and, when
 * `table` is given, rows_out[k] = table[id]. `p` is shared memory for 2 x E floats: the logits, then
 * the exponentials.
 * Warp 0 finds the maximum, forms the exponentials and (lane 0) their sum, while the other warps rank
 * the logits; one barrier, then the weights are written. In a block of one warp the warp ranks first.
 * Before, the ranking waited for the sum: in the router cluster's block 0 (OLMoE, H200, 2026-11-30,
 * clock64 per barrier) the maximum and exponentials took 503 cycles, the sum 923 and the ranking 1,507,
 * one after the other. */
template <typename Logit>
__device__ void route_block(const Logit *logits, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out,
                            float *w_out, const void *const *table, const void **rows_out, float *p,
                            const RouteHost &hh = RouteHost{}) {
    __shared__ uint32_t sel_id[kRouteMaxK];
    __shared__ float inv_sum;
    float *ex = p + E;
    const uint32_t lane = threadIdx.x % kWarp;
    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) p[e] = route_logit(logits, e);
    __syncthreads();
    if (blockDim.x == kWarp) route_rank(p, E, K, lane, kWarp, sel_id);
    if (threadIdx.x < kWarp) {
        float mx = -INFINITY;
        for (uint32_t e = lane; e < E; e += kWarp) mx = fmaxf(mx, p[e]);
        mx = warp_max(mx);
        for (uint32_t e = lane; e < E; e += kWarp) ex[e] = expf(p[e] - mx);
        __syncwarp();
        if (lane == 0) inv_sum = route_inv_sum(ex, E);
    } else {
        route_rank_split(p, E, K, threadIdx.x - kWarp, blockDim.x - kWarp, sel_id);
    }
    __syncthreads();
    route_write(sel_id, ex, inv_sum, K, norm_topk, threadIdx.x, blockDim.x, ids_out, w_out, table, rows_out, hh);
    if (hh.tag_out) {
        __syncthreads();
        if (threadIdx.x == 0) route_publish_host(hh);
    }
}

/* route_block's router run by ONE warp, step for step (the maximum by a warp reduction, the rest the
 * shared steps above), so both select identically. Lets the router GEMV route as soon as its last
 * router row is written, while its other blocks still stream the rest of the layer's rows. `p` is
 * shared memory for E floats owned by this warp.
 * route_warp_select: the steps after the logits (p[e] holds logit e, mx in every lane their maximum);
 * it ranks the logits, then replaces them by their exponentials;
 * route_warp: reads the logits first. */
__device__ void route_warp_select(float *p, float mx, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out,
                                  float *w_out, const void *const *table, const void **rows_out,
                                  const RouteHost &hh = RouteHost{}) {
    __shared__ uint32_t sel_id[kRouteMaxK];
    const uint32_t lane = threadIdx.x % kWarp;
    route_rank(p, E, K, lane, kWarp, sel_id);
    __syncwarp(); /* every lane's ranking read the logits before they are replaced */
    for (uint32_t e = lane; e < E; e += kWarp) p[e] = expf(p[e] - mx);
    __syncwarp();
    const float inv = __shfl_sync(0xffffffffu, lane == 0 ? route_inv_sum(p, E) : 0.0f, 0);
    route_write(sel_id, p, inv, K, norm_topk, lane, kWarp, ids_out, w_out, table, rows_out, hh);
    if (hh.tag_out) {
        __syncwarp();
        if (lane == 0) route_publish_host(hh);
    }
}

__device__ void route_warp(const uint16_t *logits, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out,
                           float *w_out, const void *const *table, const void **rows_out, float *p,
                           const RouteHost &hh = RouteHost{}) {
    const uint32_t lane = threadIdx.x % kWarp;
    float mx = -INFINITY;
    for (uint32_t e = lane; e < E; e += kWarp) {
        p[e] = h2f(__ldcg(logits + e));
        mx = fmaxf(mx, p[e]);
    }
    __syncwarp(); /* the ranking reads every lane's logits */
    route_warp_select(p, warp_max(mx), E, K, norm_topk, ids_out, w_out, table, rows_out, hh);
}

} // namespace

#endif
