/* The decode step's attention kernels: q/k norm, RoPE and the KV store of the current position, then
 * split (flash-decoding) attention over the cached positions (see hz_decode_attention in
 * decode_ops.cuh for the contract). Below 256 positions the step launches the one-pass kernel at the
 * end of this file (wattn_kernel) instead; what follows describes the chunked one.
 *
 * Batch 1 means tiny work (pos x D per head) behind a chain of dependent steps, so the kernel is
 * shaped for latency:
 *   - only the splits that have work take part: nact = min(splits, ceil(chunks / G)), chunk c going
 *     to split c % nact (the others leave at once), except that up to kSoloChunks chunks per group stay
 *     in one block, which then writes `out` itself, with no partial results, fence or counter;
 *   - a block is G groups of kThreads (G = hz_dattn_args.groups, 1 or 2): the block's chunk i goes to
 *     group i % G, the groups walk their chunks in step behind the block's barriers, and their
 *     (m, l, o) are merged in shared memory, so two groups hold 4 chunks (256 positions) in one block
 *     without the split blocks' combine through global memory. (A named barrier per group instead drew
 *     racecheck hazards that were not explained; doc/benchmarks.md, thirtieth round.)
 *   - the cached K/V rows of a block's first kStages chunks are copied into shared memory (cp.async)
 *     before the wait on the q/k/v projection, rows of later chunks pulled into L2; the rope row and
 *     the norm weights are loaded then too. After the wait, q, k and v are read in one round trip,
 *     both q/k norm sums of squares reduced by one barrier, and the rows kept in shared memory;
 *   - per chunk: two barriers. Scores go to shared memory; then every warp finds the chunk's maximum
 *     itself and each thread folds its own positions into running (l, o) partials, which are summed
 *     over its group once, after the last chunk;
 *   - the lanes per K row are a compile-time constant, so the score pass is straight-line code with
 *     all its loads and shuffles in flight together. */
#include <cmath>
#include <cstring>
#include <type_traits>

#include "decode_launch.cuh"
#include "decode_ops.cuh"
#include "knob.cuh"
#include "ops_common.cuh"
#include "timeline.cuh"
#include "w4a16_device.cuh"

namespace {

constexpr uint32_t kThreads = 256; /* one group (a block is G of them) */
constexpr uint32_t kWarps = kThreads / kWarp;
constexpr uint32_t kMaxD = 256;         /* hz_decode_attention_supported */
constexpr uint32_t kChunk = HZ_DECODE_ATTN_CHUNK;
constexpr int kStages = 2;              /* chunk buffers (K and V rows) in shared memory */
/* Two chunks per group stay in one block per head: a group's second chunk costs less than the combine
 * (partials, fence, counter, the last block's reads), measured on an H200 with one group; from three
 * chunks per group on, one chunk per group and block wins (the combine does not grow with the splits). */
constexpr uint32_t kSoloChunks = 2;
constexpr uint32_t kPrefetchChunks = 4; /* further chunks of a split pulled into L2 before the wait */
constexpr int kLd = 4;                  /* 16-byte loads in flight per thread in the prologue */
/* After the last chunk a buffer holds the value partials of the position groups: ng x D floats,
 * ng = threads / (D / 8), so at most threads x 8 floats. */
constexpr uint32_t kVpartHalves = kThreads * 8u * 2u;

struct dattn_params {
    hz_dattn_args a;
    float scale;
    uint32_t group;      /* query heads per KV head */
    uint32_t nc;         /* 16-byte pieces per head row (D / 8) */
    uint32_t ng;         /* position groups of the value pass: threads / nc */
    uint32_t buf_halves; /* one chunk buffer: 2 x kChunk rows of D, at least kVpartHalves */
    int vec;             /* q, k, v 16-byte aligned */
};

/* Cached rows [j0, j0 + rows) of one KV head into a chunk buffer: K rows at buf, V rows at
 * buf + kChunk * D (row r at r * D). Thread (g, ci) copies piece ci of rows g, g + ng, ... Only rows
 * below pos: those were written by earlier steps and may be read before the wait. */
__device__ __forceinline__ void stage_chunk(const uint16_t *kh, const uint16_t *vh, uint32_t kv_width, uint32_t nc,
                                            uint32_t g, uint32_t ci, uint32_t ng, uint32_t j0, uint32_t rows,
                                            uint16_t *buf) {
    const uint32_t D = nc * 8u;
    if (g >= ng) return; /* threads past the last whole group */
    for (uint32_t r = g; r < rows; r += ng) {
        cp_async16(buf + r * D + ci * 8u, kh + (size_t)(j0 + r) * kv_width + ci * 8u);
        cp_async16(buf + (kChunk + r) * D + ci * 8u, vh + (size_t)(j0 + r) * kv_width + ci * 8u);
    }
}

/* The same rows into L2 only (a hint for chunks beyond the shared buffers). */
__device__ void prefetch_chunk(const uint16_t *kh, const uint16_t *vh, uint32_t kv_width, uint32_t D, uint32_t j0,
                               uint32_t rows, uint32_t gt) {
    const uint32_t lines = (D * 2u + 127u) / 128u;
    for (uint32_t t = gt; t < 2u * lines * rows; t += kThreads) {
        const uint32_t r = t / (2u * lines), l = t % (2u * lines);
        const uint16_t *base = (l < lines ? kh : vh) + (size_t)(j0 + r) * kv_width;
        prefetch_l2(reinterpret_cast<const char *>(base) + (l % lines) * 128u);
    }
}

/* Eight FP16 values (16-byte aligned when vec), through L2: written by the previous grid. */
__device__ __forceinline__ uint4 ld8(const uint16_t *x, bool vec) {
    if (vec) return __ldcg(reinterpret_cast<const uint4 *>(x));
    uint4 r;
    uint16_t *rh = reinterpret_cast<uint16_t *>(&r);
#pragma unroll
    for (int k = 0; k < 8; k++) rh[k] = __ldcg(x + k);
    return r;
}

__device__ __forceinline__ float sumsq8(uint4 x, float ss) {
    const uint16_t *xh = reinterpret_cast<const uint16_t *>(&x);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const float v = h2f(xh[k]);
        ss = fmaf(v, v, ss);
    }
    return ss;
}

__device__ __forceinline__ float dot8f(uint4 k, const float (&q)[8], float acc) {
    const __half2 *kh = reinterpret_cast<const __half2 *>(&k);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __half22float2(kh[i]);
        acc = fmaf(q[2 * i], f.x, acc);
        acc = fmaf(q[2 * i + 1], f.y, acc);
    }
    return acc;
}

/* RoPE (rotate half) of one pair of a head row, RMSNorm'ed first when norm: forward.c's formulas
 * (doc/numerics.md), outputs FP16-exact. */
__device__ __forceinline__ void norm_rope_pair(float x0, float x1, bool norm, float w0, float w1, float inv, float c,
                                               float s, float &y0, float &y1) {
    if (norm) {
        x0 = round16(__fmul_rn(w0, round16(__fmul_rn(x0, inv))));
        x1 = round16(__fmul_rn(w1, round16(__fmul_rn(x1, inv))));
    }
    y0 = round16(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)));
    y1 = round16(__fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s)));
}

/* The step's q, k and v of the current position, read through L2 (the previous grid wrote them) with
 * all loads in flight at once: q over the full width when normed, else head h's row; with_kv: k (the
 * full width when normed, else KV head hk's row) and v of KV head hk. This head's rows go to qraw,
 * kraw and vcur, and each warp's sums of squares of q and k to red[2w], red[2w + 1] (normed only).
 * Run by NT threads; the caller's barrier publishes what it wrote. */
template <uint32_t NT>
__device__ __forceinline__ void read_qkv(const hz_dattn_args &a, uint32_t nc, uint32_t h, uint32_t hk, bool norm,
                                         bool with_kv, bool vec, uint32_t tid, uint4 *qraw, uint4 *kraw,
                                         uint4 *vcur, float *red) {
    const uint32_t lane = tid % kWarp, warp = tid / kWarp;
    const uint32_t nq = norm ? a.heads * nc : nc, q_lo = norm ? 0u : h * nc;
    const uint32_t nk = with_kv ? (norm ? a.kv_heads * nc : nc) : 0u, k_lo = norm ? 0u : hk * nc;
    const uint32_t n_items = nq + nk + (with_kv ? nc : 0u);
    float ssq = 0.0f, ssk = 0.0f;
    for (uint32_t b0 = 0; b0 < n_items; b0 += kLd * NT) {
        uint4 x[kLd];
#pragma unroll
        for (int u = 0; u < kLd; u++) {
            const uint32_t it = b0 + (uint32_t)u * NT + tid;
            const uint16_t *src = it < nq        ? a.q + (size_t)(q_lo + it) * 8u
                                  : it < nq + nk ? a.k + (size_t)(k_lo + it - nq) * 8u
                                                 : a.v + (size_t)(hk * nc + it - nq - nk) * 8u;
            x[u] = it < n_items ? ld8(src, vec) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kLd; u++) {
            const uint32_t it = b0 + (uint32_t)u * NT + tid;
            if (it < nq) {
                const uint32_t e = q_lo + it;
                ssq = sumsq8(x[u], ssq);
                if (e - h * nc < nc) qraw[e - h * nc] = x[u];
            } else if (it < nq + nk) {
                const uint32_t e = k_lo + it - nq;
                ssk = sumsq8(x[u], ssk);
                if (e - hk * nc < nc) kraw[e - hk * nc] = x[u];
            } else if (it < n_items) {
                vcur[it - nq - nk] = x[u];
            }
        }
    }
    if (norm) {
        ssq = warp_sum(ssq);
        ssk = warp_sum(ssk);
        if (lane == 0) {
            red[2u * warp] = ssq;
            red[2u * warp + 1u] = ssk;
        }
    }
}

/* What thread i < D/2 loads before the wait for norm_rope_qk: the norm weights of pair (i, i + D/2) of
 * q and k, and the rope row's cos and sin. */
struct NormRope {
    float wq0, wq1, wk0, wk1, c, s;
};

/* After read_qkv and a barrier: thread tid < D/2 norms (norm, over the full widths from the NW warps'
 * sums in red) and rotates q's pair (tid, tid + D/2) into qh and, with_kv, k's into kcur (FP16), which
 * store also writes to row pos of the cache, as the threads tid < D/8 do with v's row. Where given, q
 * also goes to qh16 and k to krow as FP16 (the one-pass kernel's tensor-core operands). */
template <uint32_t NW>
__device__ __forceinline__ void norm_rope_qk(const hz_dattn_args &a, uint32_t D, uint32_t hk, uint32_t pos, bool norm,
                                             bool with_kv, bool store, uint32_t tid, const float *red,
                                             const NormRope &w, const uint4 *qraw, const uint4 *kraw,
                                             const uint4 *vcur, float *qh, uint4 *kcur, uint16_t *qh16 = nullptr,
                                             uint16_t *krow = nullptr) {
    const uint32_t half = D / 2u, kv_width = a.kv_heads * D;
    if (tid < half) {
        float inv_q = 0.0f, inv_k = 0.0f;
        if (norm) { /* 1 / sqrt(mean(x^2) + eps) over the full widths */
            float tq = 0.0f, tk = 0.0f;
#pragma unroll
            for (uint32_t i = 0; i < NW; i++) {
                tq += red[2u * i];
                tk += red[2u * i + 1u];
            }
            inv_q = 1.0f / sqrtf(tq / (float)(a.heads * D) + a.eps);
            inv_k = 1.0f / sqrtf(tk / (float)kv_width + a.eps);
        }
        const uint16_t *q16 = reinterpret_cast<const uint16_t *>(qraw);
        norm_rope_pair(h2f(q16[tid]), h2f(q16[tid + half]), norm, w.wq0, w.wq1, inv_q, w.c, w.s, qh[tid], qh[tid + half]);
        if (qh16) { /* the values are FP16-exact: the same bits */
            qh16[tid] = f2h(qh[tid]);
            qh16[tid + half] = f2h(qh[tid + half]);
        }
        if (with_kv) {
            const uint16_t *k16 = reinterpret_cast<const uint16_t *>(kraw);
            float k0, k1;
            norm_rope_pair(h2f(k16[tid]), h2f(k16[tid + half]), norm, w.wk0, w.wk1, inv_k, w.c, w.s, k0, k1);
            uint16_t *kc16 = reinterpret_cast<uint16_t *>(kcur);
            kc16[tid] = f2h(k0);
            kc16[tid + half] = f2h(k1);
            if (krow) {
                krow[tid] = f2h(k0);
                krow[tid + half] = f2h(k1);
            }
            if (store) {
                uint16_t *kd = a.kc + (size_t)pos * kv_width + (size_t)hk * D;
                kd[tid] = f2h(k0);
                kd[tid + half] = f2h(k1);
            }
        }
    }
    if (store && tid < D / 8u) reinterpret_cast<uint4 *>(a.vc + (size_t)pos * kv_width + (size_t)hk * D)[tid] = vcur[tid];
}

/* Scores of the nj positions of one chunk (rows of kb) into sc[r]. A row is read by LPR lanes
 * (16 bytes each; LPR = nc rounded up to a power of two, at least 8), so a warp covers 32 / LPR rows
 * per pass and every pass of the chunk is in flight at once. */
template <uint32_t LPR>
__device__ __forceinline__ void chunk_scores(const uint4 *kb, uint32_t nc, float scale, const float (&qr)[8],
                                             uint32_t nj, float *sc, uint32_t gt) {
    constexpr uint32_t rows = kWarp / LPR, passes = kChunk / (kWarps * rows);
    const uint32_t lane = gt % kWarp, warp = gt / kWarp, sub = lane / LPR, li = lane % LPR;
    const bool active = li < nc;
    float d[passes];
#pragma unroll
    for (uint32_t u = 0; u < passes; u++) {
        const uint32_t r = (u * kWarps + warp) * rows + sub;
        const uint4 kv = active ? kb[r * nc + li] : make_uint4(0, 0, 0, 0); /* rows >= nj: not stored */
        d[u] = dot8f(kv, qr, 0.0f);
    }
#pragma unroll
    for (uint32_t o = LPR / 2u; o > 0; o >>= 1)
#pragma unroll
        for (uint32_t u = 0; u < passes; u++) d[u] += __shfl_xor_sync(0xffffffffu, d[u], o);
#pragma unroll
    for (uint32_t u = 0; u < passes; u++) {
        const uint32_t r = (u * kWarps + warp) * rows + sub;
        if (li == 0 && r < nj) sc[r] = d[u] * scale;
    }
}

/* Grid (heads, splits): blockIdx.x = head, so the blocks that short contexts use (split 0 of every
 * head) are scheduled first. Split s of the nact active ones takes chunks s, s + nact, ... of positions
 * 0..pos, keeps a running max m (block-uniform) and per-thread sums l, o (online softmax), sums l and
 * o over the block at the end and either writes `out` (nact == 1) or parks (m, l, o) in `part`, the
 * last split of the head to finish combining them in split order. The split that owns the current
 * position also computes k and v of that position (and, for the first query head of its KV head,
 * stores them). */
template <uint32_t LPR, uint32_t G>
__global__ void __launch_bounds__(kThreads * G, G == 1u ? 2 : 1) dattn_kernel(const __grid_constant__ dattn_params p) {
    /* kStages chunk buffers of buf_halves FP16: [K rows | V rows][kChunk][D]; after the last chunk
     * the value partials (in the buffer the last chunk did not use), then the combine's weights */
    extern __shared__ __align__(16) uint16_t stage[];
    __shared__ __align__(16) uint4 qraw[kMaxD / 8], kraw[kMaxD / 8], kcur[kMaxD / 8], vcur[kMaxD / 8];
    __shared__ __align__(16) float qh[kMaxD];
    __shared__ float sc_all[G][kChunk];
    __shared__ float lpart_all[G][kThreads];
    __shared__ float red[2 * kWarps * G];
    __shared__ float gm[G], gl[G];             /* two groups: each group's maximum and sum */
    __shared__ float odx[G > 1u ? kMaxD : 1u]; /* two groups: group 1's value sums */
    __shared__ float inv_l;
    __shared__ uint32_t last;
    const hz_dattn_args &a = p.a;
    HZ_TL_SCOPE(HZ_TL_ATTN, a.kc, a.splits, 0); /* marks: q/k/v read, first chunk in, chunks done */
    const uint32_t tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
    const uint32_t gid = G == 1u ? 0u : tid / kThreads, gt = G == 1u ? tid : tid % kThreads; /* group, its thread */
    float *sc = sc_all[gid], *lpart = lpart_all[gid];
    const uint32_t D = a.head_dim, half = D / 2u, nc = p.nc, ng = p.ng, g = gt / nc, ci = gt % nc;
    const uint32_t S = a.splits, h = blockIdx.x, s = blockIdx.y, hk = h / p.group, kv_width = a.kv_heads * D;
    /* pos was written by hz_decode_begin, at least two grids before this one: that grid has finished
     * before this one could be scheduled, so it may be read before the wait. */
    const uint32_t pos = __ldcg(&a.step->pos), n_pos = pos + 1u, nchunks = (n_pos + kChunk - 1u) / kChunk;
    const uint32_t nact = nchunks <= kSoloChunks * G ? 1u : min(S, (nchunks + G - 1u) / G);
    if (s >= nact) return; /* no chunk: nothing to wait for (the whole block leaves, before any barrier) */
    const uint32_t my_n = (nchunks - 1u - s) / nact + 1u; /* chunks of this split */
    const bool owns_pos = (nchunks - 1u) % nact == s;
    const bool first_head = h % p.group == 0, norm = a.q_norm != nullptr;
    /* the block's chunk i goes to group i % G, as the group's chunk i / G */
    const uint32_t my_g = G == 1u ? my_n : my_n > gid ? (my_n - gid + G - 1u) / G : 0u;
    const uint32_t rounds = (my_n + G - 1u) / G; /* group 0's chunks, the most any group has */
    uint16_t *gstage = stage + (size_t)gid * kStages * p.buf_halves;
    const uint16_t *kh = a.kc + (size_t)hk * D, *vh = a.vc + (size_t)hk * D;

    /* Before the wait: cached rows (positions < pos) of the first kStages chunks into shared memory,
     * one cp.async group per buffer (empty groups keep the count uniform), later ones into L2. */
#pragma unroll
    for (int b = 0; b < kStages; b++) {
        if ((uint32_t)b < my_g) {
            const uint32_t j0 = (s + (gid + (uint32_t)b * G) * nact) * kChunk;
            stage_chunk(kh, vh, kv_width, nc, g, ci, ng, j0, min(kChunk, pos - j0), gstage + b * p.buf_halves);
        }
        cp_async_commit();
    }
    for (uint32_t i = kStages; i < my_g && i < kStages + kPrefetchChunks; i++) {
        const uint32_t j0 = (s + (gid + i * G) * nact) * kChunk;
        prefetch_chunk(kh, vh, kv_width, D, j0, min(kChunk, pos - j0), gt);
    }
    /* q, k, v (written by the previous grid) and out: their lines are only hinted into L2, which
     * cannot return stale data, so the address translations are warm when the reads come */
    if (tid == 0) {
        prefetch_l2(a.q + (size_t)h * D);
        prefetch_l2(a.k + (size_t)hk * D);
        prefetch_l2(a.v + (size_t)hk * D);
        prefetch_l2(a.out + (size_t)h * D);
    }
    /* the rope row and the norm weights are never written by the step; thread i < D/2 rotates the
     * pair (i, i + D/2) */
    float cs_c = 0.0f, cs_s = 0.0f, wq0 = 0.0f, wq1 = 0.0f, wk0 = 0.0f, wk1 = 0.0f;
    if (tid < half) {
        const float *cs = a.rope + (size_t)pos * D;
        cs_c = cs[tid];
        cs_s = cs[half + tid];
        if (norm) {
            wq0 = h2f(a.q_norm[h * D + tid]);
            wq1 = h2f(a.q_norm[h * D + tid + half]);
            if (owns_pos) {
                wk0 = h2f(a.k_norm[hk * D + tid]);
                wk1 = h2f(a.k_norm[hk * D + tid + half]);
            }
        }
    }
    griddep_wait();
    HZ_TL_WAITED();
    griddep_launch();

    read_qkv<kThreads * G>(a, nc, h, hk, norm, owns_pos, p.vec != 0, tid, qraw, kraw, vcur, red);
    __syncthreads(); /* publishes red, qraw, kraw, vcur */
    if (tid == 0) HZ_TL_MARK(0);
    norm_rope_qk<kWarps * G>(a, D, hk, pos, norm, owns_pos, owns_pos && first_head, tid, red,
                             NormRope{wq0, wq1, wk0, wk1, cs_c, cs_s}, qraw, kraw, vcur, qh, kcur);
    __syncthreads(); /* publishes qh, kcur */

    float qr[8];
    const uint32_t li = lane % LPR;
#pragma unroll
    for (int k = 0; k < 8; k++) qr[k] = li < nc ? qh[li * 8u + k] : 0.0f;
    /* value pass: thread (g, ci) takes dims ci * 8.. of positions g, g + ng, ... of each chunk */
    float m_run = -INFINITY, l_run = 0.0f, o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    /* The groups walk their chunks in step, behind the block's barriers; in the last round a group
     * with one chunk fewer only takes part in them (act false). */
    for (uint32_t i = 0; i < rounds; i++) { /* the group's chunk i: the block's chunk gid + i * G */
        const bool act = i < my_g;
        const uint32_t bi = gid + i * G, j0 = (s + bi * nact) * kChunk, nj = act ? min(kChunk, n_pos - j0) : 0u;
        uint4 *kb = reinterpret_cast<uint4 *>(gstage + (i % kStages) * p.buf_halves), *vb = kb + kChunk * nc;
        if (i == 0)
            cp_async_wait<kStages - 1>(); /* this thread's copies of chunk 0 */
        else
            cp_async_wait<kStages - 2>(); /* of chunk i (committed before or at i - kStages + 1) */
        if (act && owns_pos && bi == my_n - 1u) { /* the chunk of pos: its row (never copied) from kcur, vcur */
            if (gt < nc)
                kb[(pos - j0) * nc + gt] = kcur[gt];
            else if (gt < 2u * nc)
                vb[(pos - j0) * nc + gt - nc] = vcur[gt - nc];
        }
        __syncthreads(); /* chunk i visible to all; all done with chunk i - 1 (buffer and sc) */
        if (i == 0 && tid == 0) HZ_TL_MARK(1);
        if (i >= 1) { /* refill the buffer chunk i - 1 used with chunk i - 1 + kStages */
            const uint32_t nxt = i - 1u + kStages;
            if (nxt < my_g) {
                const uint32_t jn = (s + (gid + nxt * G) * nact) * kChunk;
                stage_chunk(kh, vh, kv_width, nc, g, ci, ng, jn, min(kChunk, pos - jn),
                            gstage + ((i - 1u) % kStages) * p.buf_halves);
            }
            cp_async_commit();
        }
        if (act) chunk_scores<LPR>(kb, nc, p.scale, qr, nj, sc, gt);
        __syncthreads(); /* publishes sc */
        if (!act) continue; /* group-uniform: no barrier below in this round */
        float mx = -INFINITY; /* every warp finds the chunk's maximum itself: same values, same result */
        for (uint32_t r = lane; r < nj; r += kWarp) mx = fmaxf(mx, sc[r]);
        const float m_new = fmaxf(m_run, warp_max(mx));
        const float f = expf(m_run - m_new); /* 0 on the first chunk */
        l_run *= f;
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] *= f;
        if (g < ng) {
            constexpr int kU = 4;
            for (uint32_t base = g; base < nj; base += ng * kU) {
                uint4 vv[kU];
                float e[kU];
#pragma unroll
                for (int u = 0; u < kU; u++) {
                    const uint32_t r = base + (uint32_t)u * ng;
                    vv[u] = r < nj ? vb[r * nc + ci] : make_uint4(0, 0, 0, 0);
                    e[u] = r < nj ? sc[r] : -INFINITY;
                }
#pragma unroll
                for (int u = 0; u < kU; u++) {
                    const float ev = expf(e[u] - m_new); /* 0 past the chunk (with a zero row) */
                    l_run += ev;
                    const __half2 *h2 = reinterpret_cast<const __half2 *>(&vv[u]);
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const float2 fv = __half22float2(h2[k]);
                        o[2 * k] = fmaf(ev, fv.x, o[2 * k]);
                        o[2 * k + 1] = fmaf(ev, fv.y, o[2 * k + 1]);
                    }
                }
            }
        }
        m_run = m_new;
    }
    cp_async_wait<0>(); /* nothing real is left in flight */
    if (tid == 0) HZ_TL_MARK(2);
    /* the buffer the last chunk did not use: its chunk (two back) is done, no copy targets it */
    float *vpart = reinterpret_cast<float *>(gstage + (my_g % kStages) * p.buf_halves);
    if (g < ng) {
#pragma unroll
        for (int k = 0; k < 8; k++) vpart[g * D + ci * 8u + k] = o[k];
        if (ci == 0) lpart[g] = l_run;
    }
    __syncthreads(); /* publishes vpart, lpart */
    float L = 0.0f, od = 0.0f; /* dim gt (D <= the threads of a group) */
    for (uint32_t gg = 0; gg < ng; gg++) L += lpart[gg];
    if (gt < D)
        for (uint32_t gg = 0; gg < ng; gg++) od += vpart[gg * D + gt];
    if (G > 1u) { /* group 1's (m, l, o) merged into group 0's: M = max, weights expf(m_g - M) */
        if (gt == 0) {
            gm[gid] = m_run;
            gl[gid] = L;
        }
        if (gid == 1u && gt < D) odx[gt] = od;
        __syncthreads();
        const float M = fmaxf(gm[0], gm[1]), w0 = expf(gm[0] - M), w1 = expf(gm[1] - M);
        m_run = M;
        L = gl[0] * w0 + gl[1] * w1;
        if (tid < D) od = od * w0 + odx[tid] * w1; /* from here on only group 0 uses od */
    }
    if (nact == 1u) { /* the combine of one split: M = m, L = l, weight expf(0) = 1 */
        if (tid < D) a.out[(size_t)h * D + tid] = f2h(od * (1.0f / L));
        return;
    }

    float *pp = a.part + ((size_t)h * S + s) * (D + 2u);
    if (tid == 0) {
        pp[0] = m_run;
        pp[1] = L;
    }
    if (tid < D) pp[2 + tid] = od;
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(a.count + h, 1u) == nact - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    /* The last split of the head: weights w_i = expf(m_i - M) and 1 / sum_i l_i w_i by warp 0, then
     * out = fp16(sum_i o_i w_i / L) in split order. The buffers are free (all threads are past the
     * barriers above), so they hold w and l. */
    const float *ph = a.part + (size_t)h * S * (D + 2u);
    float *wm = reinterpret_cast<float *>(stage), *wl = wm + S;
    if (warp == 0) {
        float mx = -INFINITY;
        for (uint32_t i = lane; i < nact; i += kWarp) {
            wm[i] = __ldcg(ph + (size_t)i * (D + 2u));
            wl[i] = __ldcg(ph + (size_t)i * (D + 2u) + 1);
            mx = fmaxf(mx, wm[i]);
        }
        const float M = warp_max(mx);
        float sum = 0.0f;
        for (uint32_t i = lane; i < nact; i += kWarp) {
            const float w = expf(wm[i] - M);
            wm[i] = w;
            sum += wl[i] * w;
        }
        sum = warp_sum(sum);
        if (lane == 0) inv_l = 1.0f / sum;
    }
    __syncthreads();
    if (tid < D) {
        float acc = 0.0f;
#pragma unroll 4
        for (uint32_t i = 0; i < nact; i++) acc = fmaf(__ldcg(ph + (size_t)i * (D + 2u) + 2 + tid), wm[i], acc);
        a.out[(size_t)h * D + tid] = f2h(acc * inv_l);
    }
    if (tid == 0) a.count[h] = 0; /* ready for the next launch */
}

/* ---- short contexts: one pass, warps over positions ------------------------------------------------
 * Below kWarpPositions positions a head's whole context fits in one block's shared memory, and the
 * chunked kernel's cost is its barriers and reductions, not its bytes (two barriers, a block-wide maximum
 * and a rescale per chunk of 64; about 2.2 us of a 4.8 us attention in the kernel timeline, H200,
 * doc/benchmarks.md). Here warp w owns the positions of tiles w, w + kWarpsW, ... of kTilePos positions
 * and walks them alone with its own running (m, l, o), the scores reduced by shuffles; one barrier then
 * merges the warps' partials. Every cached row below min(pos, kWarpPositions) is copied into shared
 * memory before the dependency wait; rows past that (a longer context than the launch was chosen for)
 * are read from the cache directly, so any position is computed correctly, only more slowly. */
constexpr uint32_t kWarpsW = 16;
constexpr uint32_t kThreadsW = kWarpsW * kWarp;
constexpr uint32_t kTilePos = 16;
constexpr uint32_t kWarpPositions = kWarpsW * kTilePos;
/* hz_decode_attention_groups hands this kernel the positions below 2 x kSoloChunks chunks: all staged */
static_assert(kWarpPositions == 2u * kSoloChunks * kChunk, "the one-pass kernel's band and staged rows differ");

/* One warp's tile of kTilePos positions from j0 folded into its running (m_run, l_run, o): D / 8 lanes per
 * K row (LPR), 32 / LPR rows per pass; lane l keeps dims [l * VD, (l + 1) * VD) of the values. Rows
 * below kWarpPositions come from ks / vs (shared, row j at j * D), others from the cache (kh / vh, row
 * stride kv_width); row pos from kcur / vcur. */
template <uint32_t D, uint32_t DS>
__device__ __forceinline__ void warp_tile(uint32_t j0, uint32_t pos, float scale, const float (&qr)[8],
                                          const uint16_t *ks, const uint16_t *vs, const uint16_t *kh,
                                          const uint16_t *vh, uint32_t kv_width, const uint4 *kcur,
                                          const uint4 *vcur, uint32_t lane, float &m_run, float &l_run,
                                          float (&o)[D / 32u]) {
    constexpr uint32_t LPR = D / 8u, R = kWarp / LPR, PASSES = kTilePos / R, VD = D / 32u;
    const uint32_t li = lane % LPR, sub = lane / LPR;
    const bool staged = j0 + kTilePos <= kWarpPositions;
    float sc[PASSES];
#pragma unroll
    for (uint32_t u = 0; u < PASSES; u++) {
        const uint32_t j = j0 + u * R + sub;
        uint4 kv = make_uint4(0, 0, 0, 0);
        if (j < pos)
            kv = staged ? reinterpret_cast<const uint4 *>(ks + (size_t)j * DS)[li]
                        : __ldg(reinterpret_cast<const uint4 *>(kh + (size_t)j * kv_width) + li);
        else if (j == pos)
            kv = kcur[li];
        sc[u] = dot8f(kv, qr, 0.0f);
    }
#pragma unroll
    for (uint32_t off = LPR / 2u; off > 0; off >>= 1)
#pragma unroll
        for (uint32_t u = 0; u < PASSES; u++) sc[u] += __shfl_xor_sync(0xffffffffu, sc[u], off);
    float mt = -INFINITY;
#pragma unroll
    for (uint32_t u = 0; u < PASSES; u++) {
        sc[u] = j0 + u * R + sub <= pos ? sc[u] * scale : -INFINITY;
        mt = fmaxf(mt, sc[u]);
    }
#pragma unroll
    for (uint32_t off = LPR; off < kWarp; off <<= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
    const float m_new = fmaxf(m_run, mt), f = expf(m_run - m_new); /* f = 0 on the first tile */
    float lt = 0.0f;
#pragma unroll
    for (uint32_t u = 0; u < PASSES; u++) {
        sc[u] = expf(sc[u] - m_new); /* 0 past pos */
        lt += sc[u];
    }
#pragma unroll
    for (uint32_t off = LPR; off < kWarp; off <<= 1) lt += __shfl_xor_sync(0xffffffffu, lt, off);
    l_run = l_run * f + lt;
    m_run = m_new;
    /* the values: every position's weight from the lanes of its row (shuffles), rows past pos zero */
    using VT = typename std::conditional<VD == 4u, uint2, uint32_t>::type;
    VT vv[kTilePos];
#pragma unroll
    for (uint32_t q = 0; q < kTilePos; q++) {
        const uint32_t j = j0 + q;
        VT v;
        memset(&v, 0, sizeof v);
        if (j < pos)
            v = staged ? reinterpret_cast<const VT *>(vs + (size_t)j * DS)[lane]
                       : __ldg(reinterpret_cast<const VT *>(vh + (size_t)j * kv_width) + lane);
        else if (j == pos)
            v = reinterpret_cast<const VT *>(vcur)[lane];
        vv[q] = v;
    }
#pragma unroll
    for (uint32_t d = 0; d < VD; d++) o[d] *= f;
#pragma unroll
    for (uint32_t q = 0; q < kTilePos; q++) {
        const float w = __shfl_sync(0xffffffffu, sc[q / R], (q % R) * LPR);
        const __half2 *h2 = reinterpret_cast<const __half2 *>(&vv[q]);
#pragma unroll
        for (uint32_t d = 0; d < VD / 2u; d++) {
            const float2 fv = __half22float2(h2[d]);
            o[2u * d] = fmaf(w, fv.x, o[2u * d]);
            o[2u * d + 1u] = fmaf(w, fv.y, o[2u * d + 1u]);
        }
    }
}

/* ---- the one-pass tile on the tensor cores (the default; HZ_GPU_ATTN_MMA=0: warp_tile) ------------
 * The same tile of kTilePos positions as warp_tile, with the dot products as mma.sync m16n8k16 (FP16
 * inputs, FP32 accumulation; FP16 products are exact in FP32). q is FP16 after RoPE (doc/numerics.md),
 * so it enters as it is, copied into every row of the A operand: each column of the product then holds
 * one position's score, and lane (g, t) ends with the scores of positions 2t, 2t + 1, 8 + 2t, 9 + 2t of
 * the tile, exactly the B operand (k = position) of the values' product V^T p. The weights p are FP32;
 * they enter as p_hi = fp16(p) plus p_lo = fp16(p - p_hi), two products accumulated in FP32, so the
 * output carries what an FP32 weight would (the difference is below FP32's own rounding of the sum).
 * Rows are staged DS = D + kMmaPad halves apart, so that the eight rows one ldmatrix reads fall on
 * distinct banks. Used only where every row of the tile is staged (pos < kWarpPositions): row pos holds kcur /
 * vcur and the value rows after it in its tile are zero (0 x a stale row could be NaN). */
constexpr uint32_t kMmaPad = 8; /* halves after each staged row (16 bytes: ldmatrix rows stay aligned) */

__device__ __forceinline__ void ldsm_x4(const void *p, uint32_t (&r)[4]) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(const void *p, uint32_t (&r)[4]) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
    return (uint32_t)f2h(lo) | (uint32_t)f2h(hi) << 16;
}

/* qw[s][0] / qw[s][1]: q's values 16s + 2t, +1 and 16s + 2t + 8, +9 (lane t = lane % 4), as FP16 pairs.
 * o[m]: dims 16m + g (o[m][0]) and 16m + g + 8 (o[m][2]) of the running output (g = lane / 4). */
template <uint32_t D, uint32_t DS>
__device__ __forceinline__ void warp_tile_mma(uint32_t j0, uint32_t pos, float scale, const uint32_t (&qw)[D / 16u][2],
                                              const uint16_t *ks, const uint16_t *vs, uint32_t lane, float &m_run,
                                              float &l_run, float (&o)[D / 16u][4]) {
    constexpr uint32_t S = D / 16u;
    const uint32_t t = lane & 3u;
    /* lane l addresses row (l / 16) * 8 + l % 8 of the tile at column ((l / 8) % 2) * 8 of a 16-column slice */
    const uint32_t arow = j0 + (lane >> 4) * 8u + (lane & 7u), acol = ((lane >> 3) & 1u) * 8u;
    float s0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, s1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (uint32_t k = 0; k < S; k++) {
        uint32_t b[4];
        ldsm_x4(ks + (size_t)arow * DS + 16u * k + acol, b);
        hz_mma16816(s0, qw[k][0], qw[k][0], qw[k][1], qw[k][1], b[0], b[1]);
        hz_mma16816(s1, qw[k][0], qw[k][0], qw[k][1], qw[k][1], b[2], b[3]);
    }
    const uint32_t jp[4] = {j0 + 2u * t, j0 + 2u * t + 1u, j0 + 8u + 2u * t, j0 + 9u + 2u * t};
    float sc[4] = {s0[0], s0[1], s1[0], s1[1]};
    float mt = -INFINITY;
#pragma unroll
    for (int u = 0; u < 4; u++) {
        sc[u] = jp[u] <= pos ? sc[u] * scale : -INFINITY;
        mt = fmaxf(mt, sc[u]);
    }
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
    const float m_new = fmaxf(m_run, mt), f = expf(m_run - m_new); /* f = 0 on the first tile */
    float pr[4];
#pragma unroll
    for (int u = 0; u < 4; u++) pr[u] = expf(sc[u] - m_new); /* 0 past pos */
    float lt = (pr[0] + pr[1]) + (pr[2] + pr[3]);
    lt += __shfl_xor_sync(0xffffffffu, lt, 1);
    lt += __shfl_xor_sync(0xffffffffu, lt, 2);
    l_run = l_run * f + lt;
    m_run = m_new;
    float lo[4];
#pragma unroll
    for (int u = 0; u < 4; u++) lo[u] = pr[u] - round16(pr[u]);
    const uint32_t h0 = pack_h2(pr[0], pr[1]), h1 = pack_h2(pr[2], pr[3]);
    const uint32_t l0 = pack_h2(lo[0], lo[1]), l1 = pack_h2(lo[2], lo[3]);
#pragma unroll
    for (uint32_t m = 0; m < S; m++) {
        uint32_t a[4];
        ldsm_x4_trans(vs + (size_t)arow * DS + 16u * m + acol, a);
#pragma unroll
        for (int i = 0; i < 4; i++) o[m][i] *= f;
        hz_mma16816(o[m], a[0], a[1], a[2], a[3], h0, h1);
        hz_mma16816(o[m], a[0], a[1], a[2], a[3], l0, l1);
    }
}

/* Grid: one block of kThreadsW per query head (hz_dattn_args.splits is ignored: nothing is parked). */
template <uint32_t D, bool MMA>
__global__ void __launch_bounds__(kThreadsW, 1) wattn_kernel(const __grid_constant__ dattn_params p) {
    constexpr uint32_t NC = D / 8u, VD = D / 32u, DS = MMA ? D + kMmaPad : D; /* DS: the staged rows' stride */
    extern __shared__ __align__(16) uint16_t kvs[]; /* K rows [kWarpPositions][DS], then the V rows */
    __shared__ __align__(16) uint4 qraw[NC], kraw[NC], kcur[NC], vcur[NC];
    __shared__ __align__(16) float qh[D];
    __shared__ __align__(16) uint16_t qh16[MMA ? D : 2u]; /* q as FP16 pairs for the A fragments */
    __shared__ float red[2u * kWarpsW];
    __shared__ float wm[kWarpsW], wl[kWarpsW];
    __shared__ __align__(16) float wo[kWarpsW][D];
    const hz_dattn_args &a = p.a;
    HZ_TL_SCOPE(HZ_TL_ATTN, a.kc, a.splits, 0); /* marks: q/k/v read, tiles start, tiles done */
    const uint32_t tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
    const uint32_t h = blockIdx.x, hk = h / p.group, kv_width = a.kv_heads * D, half = D / 2u;
    /* pos was written by hz_decode_begin, at least two grids before this one (see dattn_kernel) */
    const uint32_t pos = __ldcg(&a.step->pos);
    const bool norm = a.q_norm != nullptr;
    const uint16_t *kh = a.kc + (size_t)hk * D, *vh = a.vc + (size_t)hk * D;
    uint16_t *ks = kvs, *vs = kvs + (size_t)kWarpPositions * DS;
    /* rows below pos were written by earlier steps: copied before the wait */
    const uint32_t rows = min(pos, kWarpPositions);
    for (uint32_t it = tid; it < rows * NC; it += kThreadsW) {
        const uint32_t r = it / NC, c = it % NC;
        cp_async16(ks + r * DS + c * 8u, kh + (size_t)r * kv_width + c * 8u);
        cp_async16(vs + r * DS + c * 8u, vh + (size_t)r * kv_width + c * 8u);
    }
    cp_async_commit();
    /* the tensor-core tile reads whole tiles: the value rows after pos in its tile must be zero (see
     * warp_tile_mma); nothing is copied there, so they are cleared before the wait */
    const bool mma = MMA && pos < kWarpPositions;
    if (mma) {
        const uint32_t tile_end = min((pos / kTilePos + 1u) * kTilePos, kWarpPositions);
        for (uint32_t it = tid; it < (tile_end - pos - 1u) * NC; it += kThreadsW)
            reinterpret_cast<uint4 *>(vs + (size_t)(pos + 1u + it / NC) * DS)[it % NC] = make_uint4(0, 0, 0, 0);
    }
    if (tid == 0) { /* lines the previous grid writes: hinted only (see dattn_kernel) */
        prefetch_l2(a.q + (size_t)h * D);
        prefetch_l2(a.k + (size_t)hk * D);
        prefetch_l2(a.v + (size_t)hk * D);
        prefetch_l2(a.out + (size_t)h * D);
    }
    NormRope nr = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (tid < half) {
        const float *cs = a.rope + (size_t)pos * D;
        nr.c = cs[tid];
        nr.s = cs[half + tid];
        if (norm) {
            nr.wq0 = h2f(a.q_norm[h * D + tid]);
            nr.wq1 = h2f(a.q_norm[h * D + tid + half]);
            nr.wk0 = h2f(a.k_norm[hk * D + tid]);
            nr.wk1 = h2f(a.k_norm[hk * D + tid + half]);
        }
    }
    griddep_wait();
    HZ_TL_WAITED();
    griddep_launch();

    read_qkv<kThreadsW>(a, NC, h, hk, norm, true, p.vec != 0, tid, qraw, kraw, vcur, red);
    __syncthreads(); /* publishes red, qraw, kraw, vcur */
    if (tid == 0) HZ_TL_MARK(0);
    /* the tensor-core tile's row pos: k's from the norm pass (krow), v's by the last warp's first NC lanes,
     * which the norm pass leaves idle (static_assert below), both published by the barrier after it */
    static_assert(kThreadsW - NC >= D, "the row-pos copy's threads overlap the norm pass's");
    if (mma && tid >= kThreadsW - NC)
        reinterpret_cast<uint4 *>(vs + (size_t)pos * DS)[tid - (kThreadsW - NC)] = vcur[tid - (kThreadsW - NC)];
    norm_rope_qk<kWarpsW>(a, D, hk, pos, norm, true, h % p.group == 0, tid, red, nr, qraw, kraw, vcur, qh, kcur,
                          mma ? qh16 : nullptr, mma ? ks + (size_t)pos * DS : nullptr);
    cp_async_wait<0>();
    __syncthreads(); /* publishes qh (qh16), kcur, row pos and every thread's copied rows */
    if (tid == 0) HZ_TL_MARK(1);

    float m_run = -INFINITY, l_run = 0.0f;
    if (mma) {
        constexpr uint32_t S = D / 16u;
        const uint32_t t = lane & 3u, g = lane >> 2;
        uint32_t qw[S][2]; /* pack_h2 of the qh pairs: the same bits, read as words */
        const uint32_t *q32 = reinterpret_cast<const uint32_t *>(qh16);
#pragma unroll
        for (uint32_t k = 0; k < S; k++) {
            qw[k][0] = q32[8u * k + t];
            qw[k][1] = q32[8u * k + t + 4u];
        }
        float o[S][4] = {};
        for (uint32_t j0 = warp * kTilePos; j0 <= pos; j0 += kWarpPositions)
            warp_tile_mma<D, DS>(j0, pos, p.scale, qw, ks, vs, lane, m_run, l_run, o);
        if (t == 0) {
#pragma unroll
            for (uint32_t m = 0; m < S; m++) {
                wo[warp][16u * m + g] = o[m][0];
                wo[warp][16u * m + g + 8u] = o[m][2];
            }
        }
    } else {
        float qr[8];
        const uint32_t li = lane % NC;
#pragma unroll
        for (int k = 0; k < 8; k++) qr[k] = qh[li * 8u + k];
        float o[VD];
#pragma unroll
        for (uint32_t d = 0; d < VD; d++) o[d] = 0.0f;
        for (uint32_t j0 = warp * kTilePos; j0 <= pos; j0 += kWarpPositions)
            warp_tile<D, DS>(j0, pos, p.scale, qr, ks, vs, kh, vh, kv_width, kcur, vcur, lane, m_run, l_run, o);
#pragma unroll
        for (uint32_t d = 0; d < VD; d++) wo[warp][lane * VD + d] = o[d];
    }
    if (lane == 0) {
        wm[warp] = m_run; /* -inf and 0 for a warp without a tile: its weight below is 0 */
        wl[warp] = l_run;
    }
    __syncthreads();
    if (tid == 0) HZ_TL_MARK(2);
    if (tid < D) { /* the warps' partials merged in warp order: M = max, weights expf(m_w - M) */
        float M = -INFINITY;
#pragma unroll
        for (uint32_t w = 0; w < kWarpsW; w++) M = fmaxf(M, wm[w]);
        float L = 0.0f, od = 0.0f;
#pragma unroll
        for (uint32_t w = 0; w < kWarpsW; w++) {
            const float c = expf(wm[w] - M);
            L = fmaf(wl[w], c, L);
            od = fmaf(wo[w][tid], c, od);
        }
        a.out[(size_t)h * D + tid] = f2h(od * (1.0f / L));
    }
}

uint32_t next_pow2(uint32_t v) {
    uint32_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

} // namespace

HZ_TL_HOST(attn)

/* HZ_GPU_ATTN_WARP=0 keeps the chunked kernel's two groups below 256 positions (A/B runs); read once. */
static bool warp_kernel_enabled(void) {
    static std::atomic<int> cache{-1};
    return knob_once(cache, "HZ_GPU_ATTN_WARP", "0", 0, 1) != 0;
}

/* HZ_GPU_ATTN_MMA=0 keeps the one-pass kernel's tiles on FP32 FMAs (warp_tile; A/B runs); read once. */
static bool mma_tiles_enabled(void) {
    static std::atomic<int> cache{-1};
    return knob_once(cache, "HZ_GPU_ATTN_MMA", "0", 0, 1) != 0;
}

extern "C" uint32_t hz_decode_attention_splits(const hz_decode_dev *dev, uint32_t heads, uint32_t max_ctx) {
    /* Two blocks per multiprocessor over all heads, no more splits than chunks of the context. */
    const uint32_t sms = dev && dev->sms ? dev->sms : 1u, h = heads ? heads : 1u;
    const uint32_t chunks = (max_ctx + kChunk - 1u) / kChunk;
    uint32_t s = (2u * sms + h - 1u) / h;
    if (s > chunks) s = chunks;
    return s ? s : 1u;
}

extern "C" uint32_t hz_decode_attention_groups(uint32_t pos) {
    return pos < 2u * kSoloChunks * kChunk ? 2u : 1u;
}

extern "C" int hz_decode_attention_supported(uint32_t head_dim) {
    return head_dim >= 8u && head_dim % 8u == 0 && head_dim <= kMaxD;
}

extern "C" int hz_decode_attention(const hz_dattn_args *a, const hz_klaunch *k) {
    if (!a || !k || !a->q || !a->k || !a->v || !a->rope || !a->step || !a->kc || !a->vc || !a->out || !a->part ||
        !a->count || a->splits == 0 || a->splits > 65535u || a->heads == 0 || a->kv_heads == 0 ||
        a->heads % a->kv_heads || (!a->q_norm != !a->k_norm) || a->groups > 2u)
        return hz_error(HZ_EINVAL, "decode attention: bad arguments");
    if (!hz_decode_attention_supported(a->head_dim))
        return hz_error(HZ_EUNSUPPORTED, "decode attention: head_dim %u (a multiple of 8 up to 256)", a->head_dim);
    if (!aligned16(a->kc) || !aligned16(a->vc))
        return hz_error(HZ_EINVAL, "decode attention: KV cache not 16-byte aligned");
    dattn_params p;
    memset(&p, 0, sizeof p);
    p.a = *a;
    p.scale = 1.0f / sqrtf((float)a->head_dim);
    p.group = a->heads / a->kv_heads;
    p.nc = a->head_dim / 8u;
    p.ng = kThreads / p.nc;
    const uint32_t G = a->groups == 2u ? 2u : 1u;
    p.buf_halves = 2u * kChunk * a->head_dim;
    if (p.buf_halves < kVpartHalves) p.buf_halves = kVpartHalves;
    p.vec = aligned16(a->q) && aligned16(a->k) && aligned16(a->v);
    cudaError_t e = cudaSuccess;
    if (G == 2u && warp_kernel_enabled() && (a->head_dim == 64u || a->head_dim == 128u)) {
        const bool mma = mma_tiles_enabled();
        const size_t wsmem = 2u * kWarpPositions * (a->head_dim + (mma ? kMmaPad : 0u)) * sizeof(uint16_t);
        void (*wk)(dattn_params) = a->head_dim == 64u ? (mma ? wattn_kernel<64, true> : wattn_kernel<64, false>)
                                                      : (mma ? wattn_kernel<128, true> : wattn_kernel<128, false>);
        e = cudaFuncSetAttribute(wk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)wsmem);
        if (e != cudaSuccess) return cuda_fail(e, "cudaFuncSetAttribute (decode attention shared memory)");
        e = launch(wk, a->heads, 1u, kThreadsW, wsmem, k, p);
        return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the decode attention");
    }
    /* the chunk buffers, which after the last chunk also hold the combine's weights and sums */
    size_t smem = (size_t)G * kStages * p.buf_halves * sizeof(uint16_t);
    if (smem < (size_t)a->splits * 2u * sizeof(float)) smem = (size_t)a->splits * 2u * sizeof(float);
    const uint32_t lpr = next_pow2(p.nc) < 8u ? 8u : next_pow2(p.nc);
    void (*kern)(dattn_params) = G == 2u ? (lpr == 8u    ? dattn_kernel<8, 2>
                                            : lpr == 16u ? dattn_kernel<16, 2>
                                                         : dattn_kernel<32, 2>)
                                         : (lpr == 8u    ? dattn_kernel<8, 1>
                                            : lpr == 16u ? dattn_kernel<16, 1>
                                                         : dattn_kernel<32, 1>);
    if (smem > (48u << 10)) /* above the default limit: opt in (cheap; legal during stream capture) */
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return cuda_fail(e, "cudaFuncSetAttribute (decode attention shared memory)");
    e = launch(kern, a->heads, a->splits, kThreads * G, smem, k, p);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the decode attention");
}
