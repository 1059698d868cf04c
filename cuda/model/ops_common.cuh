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

/* The router's softmax over E values p[] by ONE warp (every lane calls it): the maximum, ex[e] =
 * expf(p[e] - max) (ex may be p: each lane rewrites only the values it read), and 1 / their sum, the
 * same in every lane. The sum's order is fixed (doc/numerics.md): lane l adds e = l, l + 32, ... in
 * that order, then the 32 lane sums meet by xor butterflies (distance 16, 8, 4, 2, 1; a + b and b + a
 * are the same float, so every lane ends with the same bits); forward.c adds in this order too. It
 * replaced one thread adding the exponentials in expert order (923 cycles at 64 experts, clock64, H200,
 * 2026-11-30), which route_warp64 could not have taken in registers. */
__device__ __forceinline__ float route_softmax_warp(const float *p, float *ex, uint32_t E, uint32_t lane) {
    float mx = -INFINITY;
    for (uint32_t e = lane; e < E; e += kWarp) mx = fmaxf(mx, p[e]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (uint32_t e = lane; e < E; e += kWarp) {
        const float v = expf(p[e] - mx);
        ex[e] = v;
        sum += v;
    }
    return 1.0f / warp_sum(sum);
}

/* A router logit as a ranking key: NaN ranks as -inf. */
__device__ __forceinline__ float route_key(float v) { return v == v ? v : -INFINITY; }

/* How many of experts [o0, o1) rank above expert e, whose key is kv: a larger logit, or an equal one
 * with a lower id. Eight loads ahead of their compares: a loop that waits on each shared-memory load made
 * the router tail ~3 us slower at 64 experts than at 16 (bench_model_ops --step, H200, 2026-11-29). */
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

/* Expert e chosen at rank `rank`: sel_id[rank] = e, and bit e of the chosen set (sel_bits, one bit per
 * expert, zeroed before the ranking), from which route_write finds each id's place in id order. */
__device__ __forceinline__ void route_choose(uint32_t e, uint32_t rank, uint32_t *sel_id, uint32_t *sel_bits) {
    sel_id[rank] = e;
    atomicOr(sel_bits + (e >> 5), 1u << (e & 31u));
}

/* The top-k of the CPU's insertion rule (strict >, so ties keep the lower id), i.e. the k largest by
 * (logit descending, id ascending): each thread ranks its experts against all others; the K first are
 * chosen (route_choose). A NaN logit ranks as -inf: the ranks stay a permutation, so every chosen slot
 * is written and every id is a valid expert. */
__device__ __forceinline__ void route_rank(const float *lg, uint32_t E, uint32_t K, uint32_t t, uint32_t n,
                                           uint32_t *sel_id, uint32_t *sel_bits) {
    for (uint32_t e = t; e < E; e += n) {
        const uint32_t rank = route_count_above(lg, 0, E, e, route_key(lg[e]));
        if (rank < K) route_choose(e, rank, sel_id, sel_bits);
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
                                                 uint32_t *sel_id, uint32_t *sel_bits) {
    uint32_t parts = 1;
    while (parts < 8u && 2u * parts * E <= n) parts *= 2u;
    if (parts == 1u) {
        route_rank(lg, E, K, t, n, sel_id, sel_bits);
        return;
    }
    const uint32_t e = t / parts, q = t % parts, span = (E + parts - 1u) / parts;
    uint32_t rank = 0;
    if (e < E) rank = route_count_above(lg, q * span, min(E, (q + 1u) * span), e, route_key(lg[e]));
    for (uint32_t m = 1; m < parts; m <<= 1) rank += __shfl_xor_sync(0xffffffffu, rank, m);
    if (e < E && q == 0 && rank < K) route_choose(e, rank, sel_id, sel_bits);
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
 * An id's place in that order is the number of chosen ids below it, counted in sel_bits. The weight of
 * the expert ranked k is its probability ex[id] * inv (the exponential times 1 / their sum, the product
 * the CPU's softmax stores). With norm_topk each weight is divided by the sum of the chosen ones, added
 * in rank order as the CPU does: every writing thread adds them itself (the same adds in the same order,
 * so the same sum), which spares a barrier between one thread's sum and the others' divisions. */
__device__ __forceinline__ void route_write(const uint32_t *sel_id, const uint32_t *sel_bits, const float *ex,
                                            float inv, uint32_t K, int norm_topk, uint32_t t, uint32_t n,
                                            uint32_t *ids_out, float *w_out, const void *const *table,
                                            const void **rows_out, const RouteHost &hh = RouteHost{}) {
    for (uint32_t k = t; k < K; k += n) {
        const uint32_t id = sel_id[k];
        uint32_t at = __popc(sel_bits[id >> 5] & ((1u << (id & 31u)) - 1u));
        for (uint32_t w = 0; w < (id >> 5); w++) at += __popc(sel_bits[w]);
        float sum = 0.0f;
        if (norm_topk)
            for (uint32_t o = 0; o < K; o++) sum += __fmul_rn(ex[sel_id[o]], inv); /* no FMA, as forward.c */
        const float v = __fmul_rn(ex[id], inv);
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
 * is a multiple of 32): softmax in FP32 (route_softmax_warp), the top-k on the logits, and the optional
 * renormalisation above. Writes ids_out[k], w_out[k] sorted by id and, when `table` is given,
 * rows_out[k] = table[id]. `p` is shared memory for 2 x E floats: the logits, then the exponentials.
 * Warp 0 forms the exponentials and their sum while the other warps rank the logits; one barrier, then
 * the weights are written. In a block of one warp the warp ranks first. */
template <typename Logit>
__device__ void route_block(const Logit *logits, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out,
                            float *w_out, const void *const *table, const void **rows_out, float *p,
                            const RouteHost &hh = RouteHost{}) {
    __shared__ uint32_t sel_id[kRouteMaxK];
    __shared__ uint32_t sel_bits[kRouteMaxExperts / 32u];
    __shared__ float inv_sum;
    float *ex = p + E;
    const uint32_t lane = threadIdx.x % kWarp;
    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) p[e] = route_logit(logits, e);
    for (uint32_t i = threadIdx.x; i < (E + 31u) / 32u; i += blockDim.x) sel_bits[i] = 0u;
    __syncthreads();
    if (blockDim.x == kWarp) {
        route_rank(p, E, K, lane, kWarp, sel_id, sel_bits);
        __syncwarp();
    }
    if (threadIdx.x < kWarp) {
        const float inv = route_softmax_warp(p, ex, E, lane);
        if (lane == 0) inv_sum = inv;
    } else {
        route_rank_split(p, E, K, threadIdx.x - kWarp, blockDim.x - kWarp, sel_id, sel_bits);
    }
    __syncthreads();
    route_write(sel_id, sel_bits, ex, inv_sum, K, norm_topk, threadIdx.x, blockDim.x, ids_out, w_out, table,
                rows_out, hh);
    if (hh.tag_out) {
        __syncthreads();
        if (threadIdx.x == 0) route_publish_host(hh);
    }
}

/* route_block's router run by ONE warp, step for step (the maximum by a warp reduction, the rest the
 * shared steps above), so both select identically. Lets the router GEMV route as soon as its last
 * router row is written, while its other blocks still stream the rest of the layer's rows. `p` is
 * shared memory for E floats owned by this warp.
 * route_warp_select: the steps after the logits (p[e] holds logit e); it ranks the logits, then
 * replaces them by their exponentials;
 * route_warp: reads the logits first. */
__device__ void route_warp_select(float *p, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out,
                                  float *w_out, const void *const *table, const void **rows_out,
                                  const RouteHost &hh = RouteHost{}) {
    __shared__ uint32_t sel_id[kRouteMaxK];
    __shared__ uint32_t sel_bits[kRouteMaxExperts / 32u];
    const uint32_t lane = threadIdx.x % kWarp;
    for (uint32_t i = lane; i < (E + 31u) / 32u; i += kWarp) sel_bits[i] = 0u;
    __syncwarp();
    route_rank(p, E, K, lane, kWarp, sel_id, sel_bits);
    __syncwarp(); /* every lane's ranking read the logits before they are replaced */
    const float inv = route_softmax_warp(p, p, E, lane);
    __syncwarp();
    route_write(sel_id, sel_bits, p, inv, K, norm_topk, lane, kWarp, ids_out, w_out, table, rows_out, hh);
    if (hh.tag_out) {
        __syncwarp();
        if (lane == 0) route_publish_host(hh);
    }
}

__device__ void route_warp(const uint16_t *logits, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out,
                           float *w_out, const void *const *table, const void **rows_out, float *p,
                           const RouteHost &hh = RouteHost{}) {
    const uint32_t lane = threadIdx.x % kWarp;
    for (uint32_t e = lane; e < E; e += kWarp) p[e] = h2f(__ldcg(logits + e));
    __syncwarp(); /* the ranking reads every lane's logits */
    route_warp_select(p, E, K, norm_topk, ids_out, w_out, table, rows_out, hh);
}

/* An FP16 logit's bits as a 16-bit key that orders like route_key of its value: NaN as -inf, -0 as +0
 * (the two compare equal, so they tie and the lower id wins), then the sign-magnitude bits flipped into
 * an unsigned order. */
__device__ __forceinline__ uint32_t route_key16(uint32_t h) {
    if ((h & 0x7fffu) > 0x7c00u) h = 0xfc00u;
    if (h == 0x8000u) h = 0u;
    return (h & 0x8000u) ? (~h & 0xffffu) : (h | 0x8000u);
}

/* route_block's router for at most 64 experts, run by ONE warp with each lane's two experts (lane, lane
 * + 32) in registers: the same choice (every expert's key is its logit's route_key16 above its id's
 * complement, so a larger key is a larger logit or an equal one with a lower id, and an expert's rank is
 * the number of keys above its own), the same exponentials and the same sum in the same order as
 * route_softmax_warp, the same products and renormalisation as route_write; ballots of the chosen set
 * give each id's place in id order. No block barrier and no shared-memory round trip per compare: in
 * the router cluster's block 0 (OLMoE, H200, kernel timeline, 2026-12-01) the routing took 1.13 us
 * instead of route_block's 1.70, and the step 0.590 instead of 0.592 ms at positions 32-96.
 * E <= 64, K <= E; every lane of the warp calls it. */
__device__ void route_warp64(const SharedLogit *lg, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out,
                             float *w_out, const void *const *table, const void **rows_out,
                             const RouteHost &hh = RouteHost{}) {
    __shared__ __align__(16) uint32_t keys[64];
    __shared__ float sel_p[kRouteMaxK];
    const uint32_t lane = threadIdx.x % kWarp, e[2] = {lane, lane + 32u};
    const bool ok[2] = {e[0] < E, e[1] < E};
    uint32_t key[2], rank[2] = {0u, 0u};
    float v[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const uint32_t h = ok[j] ? lg[e[j]].bits : 0u;
        key[j] = ok[j] ? route_key16(h) << 16 | (0xffffu - e[j]) : 0u; /* absent: below every expert */
        v[j] = ok[j] ? h2f((uint16_t)h) : -INFINITY;
        keys[e[j]] = key[j];
    }
    __syncwarp();
    const uint4 *k4 = reinterpret_cast<const uint4 *>(keys);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const uint4 q = k4[i];
#pragma unroll
        for (int j = 0; j < 2; j++)
            rank[j] += (q.x > key[j]) + (q.y > key[j]) + (q.z > key[j]) + (q.w > key[j]);
    }
    const float mx = warp_max(fmaxf(v[0], v[1]));
    float x[2], sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        x[j] = ok[j] ? expf(v[j] - mx) : 0.0f;
        if (ok[j]) sum += x[j];
    }
    const float inv = 1.0f / warp_sum(sum);
    const bool sel[2] = {ok[0] && rank[0] < K, ok[1] && rank[1] < K};
    const uint32_t b0 = __ballot_sync(0xffffffffu, sel[0]), b1 = __ballot_sync(0xffffffffu, sel[1]);
    const uint32_t below = (1u << lane) - 1u;
    const uint32_t at[2] = {(uint32_t)__popc(b0 & below), (uint32_t)(__popc(b0) + __popc(b1 & below))};
    float p[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        p[j] = __fmul_rn(x[j], inv);
        if (norm_topk && sel[j]) sel_p[rank[j]] = p[j];
    }
    float tot = 0.0f;
    if (norm_topk) { /* the chosen probabilities in rank order, as route_write adds them */
        __syncwarp();
        for (uint32_t o = 0; o < K; o++) tot += sel_p[o];
    }
#pragma unroll
    for (int j = 0; j < 2; j++) {
        if (!sel[j]) continue;
        const float w = norm_topk ? p[j] / tot : p[j];
        ids_out[at[j]] = e[j];
        w_out[at[j]] = w;
        if (table) rows_out[at[j]] = table[e[j]];
        if (hh.ids) {
            hh.ids[at[j]] = e[j];
            hh.w[at[j]] = w;
            __threadfence_system(); /* this writer's host stores before the tag (route_publish_host) */
        }
    }
    if (hh.tag_out) {
        __syncwarp();
        if (lane == 0) route_publish_host(hh);
    }
}

} // namespace

#endif
