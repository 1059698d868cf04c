/* Kernels and cuBLAS calls of the batched GPU prefill (see prefill_ops.cuh for the contract of each).
 *
 * The per-token kernels (resnorm, qkv, route) are the kernels of model_ops.cu evaluated once per
 * token row (blockIdx selects the row), with the same operation order and the same block reductions,
 * so that equal inputs give equal bits. The two new pieces of arithmetic are
 *   - attention: a block serves one head and up to eight queries that share its K/V loads, each query
 *     computed exactly as hz_model_attention computes its one query;
 *   - routed experts: a grouped GEMM over (expert, 32-token tile) work items on the tensor cores with
 *     the decode tensor-core path's numerics (exact code expansion, exact FP16 products, FP32 sums,
 *     block scale applied per 256 values in FP32). */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cublas_v2.h>

#include "ops_common.cuh"
#include "prefill_ops.cuh"
#include "w4a16_device.cuh"

extern "C" {
#include "core/core.h"
}

namespace {

constexpr int kNormThreads = 256;
constexpr int kAttnThreads = 256;
constexpr int kAttnMaxQ = 8;
constexpr int kRouteThreads = 256;
constexpr int kBucketThreads = 1024;
constexpr uint32_t kBucketMaxExperts = 1024;
constexpr size_t kDefaultSmem = 48u * 1024u;

int launched(const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return HZ_OK;
    return hz_error(HZ_EDEVICE, "prefill kernel %s: launch failed: %s (%s)", kernel, cudaGetErrorName(e),
                    cudaGetErrorString(e));
}

int cuda_failed(cudaError_t e, const char *call) {
    (void)cudaGetLastError();
    return hz_error(HZ_EDEVICE, "prefill: %s failed: %s (%s)", call, cudaGetErrorName(e), cudaGetErrorString(e));
}

int blas_failed(cublasStatus_t s, const char *call) {
    return hz_error(HZ_EDEVICE, "prefill: %s failed: %s (%s)", call, cublasGetStatusName(s), cublasGetStatusString(s));
}

/* ---- residual + RMSNorm, one block per row --------------------------------------------------------- */

__global__ void __launch_bounds__(kNormThreads) pf_resnorm_kernel(const hz_pf_norm_args a) {
    __shared__ float red[kWarp + 1];
    __shared__ uint32_t slot[kRouteMaxK];
    __shared__ float wk[kRouteMaxK];
    const uint32_t t = blockIdx.x, n = a.n;
    uint16_t *h = a.h + (size_t)t * n;
    const uint16_t *src_row = a.embed ? a.embed + (size_t)a.tokens[t] * n : h;
    const bool routed = a.ey != nullptr;
    if (routed) {
        for (uint32_t k = threadIdx.x; k < a.top_k; k += blockDim.x) {
            slot[k] = a.slot_of[(size_t)t * a.top_k + k];
            wk[k] = a.topk_w[(size_t)t * a.top_k + k];
        }
        __syncthreads();
    }
    float sg = 0.0f;
    if (routed && a.shared32) sg = 1.0f / (1.0f + expf(-round16(a.gate32[t])));
    float ss = 0.0f;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float src = h2f(src_row[i]);
        float hv = src;
        if (a.d32 || routed) {
            float d;
            if (routed) {
                float acc = 0.0f; /* the decode executors' sum: fmaf per expert, ascending ids */
                for (uint32_t k = 0; k < a.top_k; k++) acc = fmaf(wk[k], a.ey[(size_t)slot[k] * a.ey_stride + i], acc);
                d = round16(acc);
                if (a.shared32)
                    d = round16(__fadd_rn(d, round16(__fmul_rn(sg, round16(a.shared32[(size_t)t * n + i])))));
            } else {
                d = round16(a.d32[(size_t)t * n + i] + (a.d_bias ? h2f(a.d_bias[i]) : 0.0f));
            }
            hv = round16(__fadd_rn(src, d));
        }
        h[i] = f2h(hv);
        ss = fmaf(hv, hv, ss);
    }
    if (!a.w) return;
    ss = block_reduce<false>(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)n + a.eps);
    uint16_t *y = a.y + (size_t)t * n;
    uint16_t *yp = a.y_pair ? a.y_pair + (size_t)t * a.pair_stride : nullptr;
    /* Each thread reads back only the elements it wrote itself. */
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const uint16_t v = f2h(__fmul_rn(h2f(a.w[i]), round16(__fmul_rn(h2f(h[i]), inv))));
        y[i] = v;
        if (yp) yp[hz_pf_pair_pos(i)] = v;
    }
}

/* ---- q/k/v: bias + rounding, q/k norm, RoPE, KV store; block (which, token) ---------------------- */

__global__ void __launch_bounds__(kNormThreads) pf_qkv_kernel(const hz_pf_qkv_args a) {
    extern __shared__ float buf[];
    __shared__ float red[kWarp + 1];
    const uint32_t D = a.head_dim, half = D / 2u, t = blockIdx.y, pos = a.pos0 + t;
    const uint32_t QD = a.heads * D, KD = a.kv_heads * D;
    if (blockIdx.x == 2) {
        const float *v = a.v32 + (size_t)t * KD;
        uint16_t *dst = a.vc + (size_t)pos * KD;
        for (uint32_t i = threadIdx.x; i < KD; i += blockDim.x) dst[i] = f2h(v[i] + (a.bv ? h2f(a.bv[i]) : 0.0f));
        return;
    }
    const bool isq = blockIdx.x == 0;
    const uint32_t heads = isq ? a.heads : a.kv_heads, n = heads * D;
    const float *x = isq ? a.q32 + (size_t)t * QD : a.k32 + (size_t)t * KD;
    const uint16_t *b = isq ? a.bq : a.bk;
    const uint16_t *nw = isq ? a.q_norm : a.k_norm;
    uint16_t *dst = isq ? a.q_out + (size_t)t * QD : a.kc + (size_t)pos * KD;
    const float *cs = a.rope + (size_t)pos * D;
    float ss = 0.0f;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = round16(x[i] + (b ? h2f(b[i]) : 0.0f)); /* the projection's one rounding */
        buf[i] = v;
        ss = fmaf(v, v, ss);
    }
    if (nw) {
        ss = block_reduce<false>(ss, red);
        const float inv = 1.0f / sqrtf(ss / (float)n + a.eps);
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
            buf[i] = round16(__fmul_rn(h2f(nw[i]), round16(__fmul_rn(buf[i], inv))));
    }
    __syncthreads();
    for (uint32_t idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
        const uint32_t hh = idx / half, i = idx % half;
        const float c = cs[i], s = cs[half + i];
        const float x0 = buf[hh * D + i], x1 = buf[hh * D + i + half];
        dst[hh * D + i] = f2h(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)));
        dst[hh * D + i + half] = f2h(__fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s)));
    }
}

/* ---- causal attention ------------------------------------------------------------------------------
 * Block (head, query tile of qt queries). Scores: one warp per cached position j (lanes split the head
 * dimension in FP16 pairs), computed for every query of the tile that sees j, into the query's FP32
 * row in shared memory (row stride N = pos0 + tokens). Then per query: max, exp, sum, normalise. Then
 * V: the threads split into G groups of D (group g takes positions g, g+G, ...), every V element
 * loaded once for all queries, the groups' partial sums added in group order. Per query this is the
 * arithmetic of hz_model_attention step for step. */
__global__ void __launch_bounds__(kAttnThreads)
    pf_attention_kernel(const uint16_t *q, const uint16_t *kc, const uint16_t *vc, uint16_t *out, uint32_t tokens,
                        uint32_t pos0, uint32_t qt, uint32_t N, uint32_t q_width, uint32_t kv_group, uint32_t kv_width,
                        uint32_t D, float scale) {
    extern __shared__ float sm[]; /* qf [qt x D] | sc [qt x N] | part [qt x G x D] */
    __shared__ float red[kWarp + 1];
    const uint32_t h = blockIdx.x, t0 = blockIdx.y * qt;
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nwarps = blockDim.x / kWarp;
    const uint32_t nq = min(qt, tokens - t0);
    const uint32_t first = pos0 + t0;          /* query i sees positions 0 .. first + i */
    const uint32_t n_max = first + nq;
    const uint32_t G = blockDim.x / D;
    float *qf = sm, *sc = sm + (size_t)qt * D, *part = sc + (size_t)qt * N;
    const uint16_t *kh = kc + (size_t)(h / kv_group) * D, *vh = vc + (size_t)(h / kv_group) * D;
    for (uint32_t idx = threadIdx.x; idx < nq * D; idx += blockDim.x) {
        const uint32_t i = idx / D, d = idx % D;
        qf[idx] = h2f(q[(size_t)(t0 + i) * q_width + (size_t)h * D + d]);
    }
    __syncthreads();

    float mx[kAttnMaxQ];
#pragma unroll
    for (int i = 0; i < kAttnMaxQ; i++) mx[i] = -INFINITY;
    for (uint32_t j = warp; j < n_max; j += nwarps) {
        const __half2 *k2 = reinterpret_cast<const __half2 *>(kh + (size_t)j * kv_width);
        float acc[kAttnMaxQ];
#pragma unroll
        for (int i = 0; i < kAttnMaxQ; i++) acc[i] = 0.0f;
        for (uint32_t e = lane; e < D / 2u; e += kWarp) {
            const float2 kv = __half22float2(k2[e]);
#pragma unroll
            for (int i = 0; i < kAttnMaxQ; i++) {
                if ((uint32_t)i < nq) {
                    acc[i] = fmaf(qf[i * D + 2 * e], kv.x, acc[i]);
                    acc[i] = fmaf(qf[i * D + 2 * e + 1], kv.y, acc[i]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < kAttnMaxQ; i++) {
            if ((uint32_t)i < nq) { /* uniform across the warp */
                const float v = warp_sum(acc[i]) * scale;
                if (j <= first + i) {
                    if (lane == 0) sc[(size_t)i * N + j] = v;
                    mx[i] = fmaxf(mx[i], v);
                }
            }
        }
    }
    for (uint32_t i = 0; i < nq; i++) {
        const uint32_t n_i = first + i + 1u;
        float *row = sc + (size_t)i * N;
        float m = -INFINITY;
#pragma unroll
        for (int k = 0; k < kAttnMaxQ; k++)
            if ((uint32_t)k == i) m = mx[k];
        m = block_reduce<true>(m, red); /* its barriers also publish the scores */
        float sum = 0.0f;
        for (uint32_t j = threadIdx.x; j < n_i; j += blockDim.x) {
            const float e = expf(row[j] - m);
            row[j] = e;
            sum += e;
        }
        sum = block_reduce<false>(sum, red);
        const float inv = 1.0f / sum;
        for (uint32_t j = threadIdx.x; j < n_i; j += blockDim.x) row[j] *= inv;
    }
    __syncthreads();

    if (threadIdx.x < G * D) {
        const uint32_t d = threadIdx.x % D, g = threadIdx.x / D;
        float acc[kAttnMaxQ];
#pragma unroll
        for (int i = 0; i < kAttnMaxQ; i++) acc[i] = 0.0f;
        for (uint32_t j = g; j < n_max; j += G) {
            const float v = h2f(vh[(size_t)j * kv_width + d]);
#pragma unroll
            for (int i = 0; i < kAttnMaxQ; i++)
                if ((uint32_t)i < nq && j <= first + i) acc[i] = fmaf(sc[(size_t)i * N + j], v, acc[i]);
        }
#pragma unroll
        for (int i = 0; i < kAttnMaxQ; i++)
            if ((uint32_t)i < nq) part[((size_t)i * G + g) * D + d] = acc[i];
    }
    __syncthreads();
    for (uint32_t idx = threadIdx.x; idx < nq * D; idx += blockDim.x) {
        const uint32_t i = idx / D, d = idx % D;
        float acc = 0.0f;
        for (uint32_t g = 0; g < G; g++) acc += part[((size_t)i * G + g) * D + d];
        out[(size_t)(t0 + i) * q_width + (size_t)h * D + d] = f2h(acc);
    }
}

size_t attention_smem(uint32_t qt, uint32_t N, uint32_t D) {
    const uint32_t G = (uint32_t)kAttnThreads / D;
    return (size_t)qt * ((size_t)D + N + (size_t)G * D) * sizeof(float);
}

/* ---- router: one block per token, hz_model_route's kernel --------------------------------------- */

/* Token blockIdx.x's FP32 logits (the router GEMM's output) through route_block, which rounds them to
 * FP16 as the router GEMV would have: the decode step's router selects identically. */
__global__ void __launch_bounds__(kRouteThreads)
    pf_route_kernel(const float *logits32, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out, float *w_out) {
    __shared__ float p[2 * kRouteMaxExperts];
    const size_t t = blockIdx.x;
    route_block(logits32 + t * E, E, K, norm_topk, ids_out + t * K, w_out + t * K, nullptr, nullptr, p);
}

/* ---- bucketing (one block) --------------------------------------------------------------------------
 * Counts per expert (shared-memory atomics: the counts do not depend on their order), offsets and
 * tiles by one thread in expert order, then one warp per expert ranks that expert's pairs in pair
 * order (= ascending token, since a token routes to an expert at most once) with ballots. Every
 * output is a pure function of ids. */
__global__ void __launch_bounds__(kBucketThreads)
    pf_bucket_kernel(const uint32_t *ids, uint32_t pairs, uint32_t K, uint32_t E, uint32_t *counts, uint32_t *slot_tok,
                     uint32_t *slot_of, hz_pf_tile *tiles, uint32_t *n_tiles) {
    __shared__ uint32_t cnt[kBucketMaxExperts], off[kBucketMaxExperts];
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nwarps = blockDim.x / kWarp;
    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < pairs; i += blockDim.x) {
        const uint32_t e = ids[i];
        if (e < E) atomicAdd(&cnt[e], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t o = 0, nt = 0;
        for (uint32_t e = 0; e < E; e++) {
            off[e] = o;
            counts[e] = cnt[e];
            for (uint32_t s0 = 0; s0 < cnt[e]; s0 += HZ_PF_TILE_TOKENS) {
                const uint32_t c = cnt[e] - s0 < HZ_PF_TILE_TOKENS ? cnt[e] - s0 : HZ_PF_TILE_TOKENS;
                tiles[nt++] = hz_pf_tile{e, o + s0, c, 0u};
            }
            o += cnt[e];
        }
        *n_tiles = nt;
    }
    __syncthreads();
    for (uint32_t e = warp; e < E; e += nwarps) {
        if (cnt[e] == 0) continue;
        uint32_t run = 0;
        for (uint32_t i0 = 0; i0 < pairs && run < cnt[e]; i0 += kWarp) {
            const uint32_t i = i0 + lane;
            const bool hit = i < pairs && ids[i] == e;
            const uint32_t mask = __ballot_sync(0xffffffffu, hit);
            if (hit) {
                const uint32_t slot = off[e] + run + (uint32_t)__popc(mask & ((1u << lane) - 1u));
                slot_tok[slot] = i / K;
                slot_of[i] = slot;
            }
            run += (uint32_t)__popc(mask);
        }
    }
}

/* ---- routed experts on the tensor cores --------------------------------------------------------------
 * A block computes a tile of at most 32 tokens (one expert's slots) against 128 weight rows: gate_up
 * takes 64 gate rows and the same 64 up rows (so a lane ends with matching gate and up sums and
 * computes silu(g) * u itself), down takes 128 down rows. Four warps; warp w owns 32 rows as two
 * 16-row MMA tiles (gate_up: gate rows r..r+15 and up rows r..r+15, r = 16w; down: rows 32w..32w+31)
 * and all 32 tokens as four 8-token MMA tiles.
 *
 * K advances in 128-value segments through a 4-stage cp.async pipeline. A stage holds, for the 128
 * rows, each row's 64 bytes of codes (lane (g, t) reads chunk t of rows g and g+8: 16-byte loads,
 * conflict-free at a 64-byte row stride) and, for the 32 tokens, four 64-byte activation records in
 * pair layout at an 80-byte record and 320-byte token stride (the eight lanes of a quarter warp hit
 * eight distinct 16-byte bank groups). A lane expands its codes with hz_expand_pairs and feeds the
 * MMA exactly as the decode path does, except that B column g carries token g of the 8-token tile
 * instead of a broadcast vector. After every second segment (a 256-value block) the block sums are
 * scaled by the rows' FP16 scales in FP32 and added to the running sums. Rows past the matrix and
 * tokens past the tile's count are loaded as zeros (cp.async zero fill) and never stored. */
constexpr uint32_t kXThreads = 128;
constexpr uint32_t kXStages = 4;
constexpr uint32_t kXRows = 128;                   /* smem rows per stage */
constexpr uint32_t kARow = 64;                     /* bytes of one row's segment */
constexpr uint32_t kAStage = kXRows * kARow;       /* 8192 */
constexpr uint32_t kBRec = 80;                     /* one 64-byte record + 16 bytes of padding */
constexpr uint32_t kBTok = 4 * kBRec;              /* 320 */
constexpr uint32_t kBStage = HZ_PF_TILE_TOKENS * kBTok; /* 10240 */
constexpr uint32_t kXStage = kAStage + kBStage;
constexpr uint32_t kXSmem = kXStages * kXStage;    /* 73728 */

struct ExpertParams {
    const uint8_t *rows[HZ_PF_MAX_EXPERTS];
    const uint8_t *const *table;
    const hz_pf_tile *tiles;
    const uint32_t *n_tiles_dev;
    uint32_t tile_base;
    const uint32_t *slot_tok; /* gate_up: B row of a slot is its token; down: the slot itself */
    const uint8_t *b;
    uint32_t b_row_bytes;
    uint64_t q_off0, q_off1, s_off0, s_off1;
    uint32_t rows_n, kp;
    uint16_t *act;
    uint32_t act_stride;
    float *ey;
    uint32_t ey_stride;
    uint32_t f16_magic; /* HZ_F16_MAGIC, see hz_and_or (w4a16_device.cuh) */
};

/* cp_async16 with a zero fill: src_bytes of 16 copied, the rest of the 16 bytes zeroed. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, uint32_t src_bytes) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
/* cp_async_commit and cp_async_wait: cuda/async_copy.cuh, through ops_common.cuh */
__device__ __forceinline__ uint4 lds128(const uint8_t *p) { return *reinterpret_cast<const uint4 *>(p); }

template <bool kGateUp>
__global__ void __launch_bounds__(kXThreads, 3) pf_expert_kernel(const __grid_constant__ ExpertParams p) {
    extern __shared__ __align__(16) uint8_t xsm[];
    const uint32_t tile_i = p.tile_base + blockIdx.y;
    if (p.n_tiles_dev && tile_i >= *p.n_tiles_dev) return;
    const hz_pf_tile tile = p.tiles[tile_i];
    const uint8_t *blob = p.table ? p.table[tile.expert] : p.rows[tile.expert];
    if (!blob) return; /* an expert of another lease group */

    const uint32_t tid = threadIdx.x, warp = tid >> 5, lane = tid & 31u, g = lane >> 2, t = lane & 3u;
    const uint32_t R = p.rows_n, row_bytes = p.kp / 2u, nblocks = p.kp / HZ_QBLOCK, nseg = p.kp / 128u;
    const uint32_t row0 = blockIdx.x * (kGateUp ? 64u : 128u);

    /* Copy assignment: smem row slot (tid >> 2) + 32 j (j = 0..3, = the warp that reads it), 16-byte
     * part tid & 3; slot s of warp w is (m = s >> 4, rr = s & 15). Tokens (tid >> 4) + 8 j, chunk
     * (tid >> 2) & 3, part tid & 3. */
    const uint32_t part = tid & 3u, a_slot = tid >> 2, a_m = a_slot >> 4, a_rr = a_slot & 15u;
    const uint8_t *a_mat = blob + ((kGateUp && a_m) ? p.q_off1 : p.q_off0);
    const uint32_t a_row_first = kGateUp ? row0 + a_rr : row0 + 16u * a_m + a_rr;
    const uint32_t a_row_step = kGateUp ? 16u : 32u;
    const uint32_t b_tok = tid >> 4, b_chunk = (tid >> 2) & 3u;
    uint32_t b_row[4];
#pragma unroll
    for (uint32_t j = 0; j < 4; j++) {
        const uint32_t tok = b_tok + 8u * j;
        b_row[j] = 0xffffffffu;
        if (tok < tile.count) b_row[j] = kGateUp ? p.slot_tok[tile.slot0 + tok] : tile.slot0 + tok;
    }
    auto issue = [&](uint32_t s) {
        uint8_t *sa = xsm + (s % kXStages) * kXStage;
        uint8_t *sb = sa + kAStage;
#pragma unroll
        for (uint32_t j = 0; j < 4; j++) {
            const uint32_t row = a_row_first + j * a_row_step;
            const bool ok = row < R;
            const uint8_t *src = a_mat + (uint64_t)(ok ? row : 0u) * row_bytes + s * 64u + part * 16u;
            cp_async16(sa + (a_slot + 32u * j) * kARow + part * 16u, src, ok ? 16u : 0u);
        }
#pragma unroll
        for (uint32_t j = 0; j < 4; j++) {
            const bool ok = b_row[j] != 0xffffffffu;
            const uint8_t *src = p.b + (ok ? (uint64_t)b_row[j] * p.b_row_bytes + s * 256u + b_chunk * 64u + part * 16u : 0u);
            cp_async16(sb + (b_tok + 8u * j) * kBTok + b_chunk * kBRec + part * 16u, src, ok ? 16u : 0u);
        }
    };

    /* This lane's rows: MMA tile m, rows ra(m) (accumulator elements 0, 1) and ra(m) + 8 (2, 3). */
    uint32_t ra[2];
    const uint8_t *sp[2];
#pragma unroll
    for (uint32_t m = 0; m < 2; m++) {
        ra[m] = kGateUp ? row0 + 16u * warp + g : row0 + 32u * warp + 16u * m + g;
        sp[m] = blob + ((kGateUp && m) ? p.s_off1 : p.s_off0);
    }

#pragma unroll
    for (uint32_t s = 0; s < kXStages - 1; s++) {
        if (s < nseg) issue(s);
        cp_async_commit();
    }
    float d[2][4][4], acc[2][4][4], sa_[2] = {0.0f, 0.0f}, sb_[2] = {0.0f, 0.0f};
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) d[m][n][i] = acc[m][n][i] = 0.0f;

#pragma unroll 1
    for (uint32_t s = 0; s < nseg; s++) {
        cp_async_wait<kXStages - 2>();
        __syncthreads(); /* stage s is in; every warp is done with the buffer refilled below */
        if (s + kXStages - 1 < nseg) issue(s + kXStages - 1);
        cp_async_commit();
        if ((s & 1u) == 0) { /* scales of the 256-value block starting here, used at its end */
            const uint32_t kb = s >> 1;
#pragma unroll
            for (uint32_t m = 0; m < 2; m++) {
                sa_[m] = ra[m] < R ? hz_ld_scale(sp[m] + ((uint64_t)ra[m] * nblocks + kb) * 2u) : 0.0f;
                sb_[m] = ra[m] + 8u < R ? hz_ld_scale(sp[m] + ((uint64_t)(ra[m] + 8u) * nblocks + kb) * 2u) : 0.0f;
            }
        }
        const uint8_t *sa = xsm + (s % kXStages) * kXStage;
        const uint8_t *sb = sa + kAStage;
        uint32_t ha[2][16], hb[2][16];
#pragma unroll
        for (uint32_t m = 0; m < 2; m++) {
            const uint8_t *r = sa + (warp * 32u + m * 16u + g) * kARow + t * 16u;
            hz_expand_pairs(lds128(r), ha[m], p.f16_magic);
            hz_expand_pairs(lds128(r + 8u * kARow), hb[m], p.f16_magic);
        }
#pragma unroll
        for (uint32_t n = 0; n < 4; n++) {
            const uint8_t *r = sb + (n * 8u + g) * kBTok + t * kBRec;
            uint32_t xh[16];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint4 v = lds128(r + 16 * i);
                xh[4 * i + 0] = v.x;
                xh[4 * i + 1] = v.y;
                xh[4 * i + 2] = v.z;
                xh[4 * i + 3] = v.w;
            }
#pragma unroll
            for (uint32_t m = 0; m < 2; m++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    hz_mma16816(d[m][n], ha[m][2 * j], hb[m][2 * j], ha[m][2 * j + 1], hb[m][2 * j + 1], xh[2 * j],
                                xh[2 * j + 1]);
        }
        if (s & 1u) { /* end of a 256-value block: scale in FP32 and add */
#pragma unroll
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int n = 0; n < 4; n++) {
                    acc[m][n][0] = fmaf(sa_[m], d[m][n][0], acc[m][n][0]);
                    acc[m][n][1] = fmaf(sa_[m], d[m][n][1], acc[m][n][1]);
                    acc[m][n][2] = fmaf(sb_[m], d[m][n][2], acc[m][n][2]);
                    acc[m][n][3] = fmaf(sb_[m], d[m][n][3], acc[m][n][3]);
                    d[m][n][0] = d[m][n][1] = d[m][n][2] = d[m][n][3] = 0.0f;
                }
        }
    }
    cp_async_wait<0>(); /* nothing may be in flight into shared memory when the block exits */

    /* Accumulator element i of MMA tile (m, n): row ra(m) + 8 (i >> 1), token column 8n + 2t + (i & 1). */
#pragma unroll
    for (uint32_t n = 0; n < 4; n++)
#pragma unroll
        for (uint32_t i = 0; i < 4; i++) {
            const uint32_t col = 8u * n + 2u * t + (i & 1u);
            if (col >= tile.count) continue;
            const uint64_t slot = tile.slot0 + col;
            if (kGateUp) {
                const uint32_t row = ra[0] + 8u * (i >> 1);
                if (row < R)
                    p.act[slot * p.act_stride + hz_pf_pair_pos(row)] =
                        __half_as_ushort(__float2half_rn(hz_silu_mul(acc[0][n][i], acc[1][n][i])));
            } else {
#pragma unroll
                for (uint32_t m = 0; m < 2; m++) {
                    const uint32_t row = ra[m] + 8u * (i >> 1);
                    if (row < R) p.ey[slot * p.ey_stride + row] = acc[m][n][i];
                }
            }
        }
}

int experts_check(const hz_pf_experts_args *a) {
    if (!a || !a->layout || !a->tiles || !a->slot_tok || !a->x_pair || !a->act || !a->ey || (!a->table && !a->rows_host))
        return hz_error(HZ_EINVAL, "prefill experts: NULL argument");
    const hz_expert_layout *l = a->layout;
    if (l->hidden == 0 || l->inter == 0 || l->gate.rows != l->inter || l->up.rows != l->inter ||
        l->down.rows != l->hidden || l->gate.kp != l->up.kp || l->gate.kp % HZ_QBLOCK || l->down.kp % HZ_QBLOCK ||
        l->gate.kp < l->hidden || l->down.kp < l->inter)
        return hz_error(HZ_EINVAL, "prefill experts: inconsistent expert layout (hidden %u, inter %u)", l->hidden, l->inter);
    if ((l->gate_q | l->up_q | l->down_q) % 16u || (l->gate_s | l->up_s | l->down_s) % 2u)
        return hz_error(HZ_EINVAL, "prefill experts: expert layout parts are not aligned");
    if (a->x_stride < l->gate.kp || a->x_stride % 8u || a->act_stride < l->down.kp || a->act_stride % 8u ||
        a->ey_stride < l->hidden || ((uintptr_t)a->x_pair & 15u) || ((uintptr_t)a->act & 15u))
        return hz_error(HZ_EINVAL, "prefill experts: bad strides or unaligned buffers");
    if (a->experts == 0 || (!a->table && a->experts > HZ_PF_MAX_EXPERTS))
        return hz_error(HZ_EUNSUPPORTED, "prefill experts: %u experts (at most %u by row list)", a->experts,
                        HZ_PF_MAX_EXPERTS);
    if (a->tile_count > 65535u) return hz_error(HZ_EUNSUPPORTED, "prefill experts: %u tiles in one call", a->tile_count);
    return HZ_OK;
}

template <bool kGateUp>
int launch_experts(const ExpertParams &p, uint32_t row_blocks, uint32_t tiles, cudaStream_t s) {
    const char *name = kGateUp ? "expert gate_up" : "expert down";
    cudaError_t e = cudaFuncSetAttribute(pf_expert_kernel<kGateUp>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kXSmem);
    if (e != cudaSuccess) return cuda_failed(e, "cudaFuncSetAttribute (expert kernel shared memory)");
    pf_expert_kernel<kGateUp><<<dim3(row_blocks, tiles), kXThreads, kXSmem, s>>>(p);
    return launched(name);
}

} // namespace

/* ---- launch functions ------------------------------------------------------------------------------ */

extern "C" int hz_pf_blas_create(void *stream, void **out) {
    if (!out) return hz_error(HZ_EINVAL, "prefill: NULL handle");
    *out = nullptr;
    cublasHandle_t h = nullptr;
    cublasStatus_t s = cublasCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) return blas_failed(s, "cublasCreate");
    s = cublasSetStream(h, static_cast<cudaStream_t>(stream));
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetMathMode(h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (s != CUBLAS_STATUS_SUCCESS) {
        (void)cublasDestroy(h);
        return blas_failed(s, "cublasSetStream / cublasSetMathMode");
    }
    *out = h;
    return HZ_OK;
}

extern "C" void hz_pf_blas_destroy(void *blas) {
    if (blas) (void)cublasDestroy(static_cast<cublasHandle_t>(blas));
}

extern "C" int hz_pf_gemm(void *blas, const uint16_t *w, uint32_t rows, uint32_t in, const uint16_t *x, uint32_t ldx,
                          uint32_t n, float *y) {
    if (!blas || !w || !x || !y || rows == 0 || in == 0 || n == 0 || ldx < in || rows > 0x7fffffffu ||
        in > 0x7fffffffu || n > 0x7fffffffu || ldx > 0x7fffffffu)
        return hz_error(HZ_EINVAL, "prefill gemm: bad arguments (%u x %u, %u tokens)", rows, in, n);
    /* Column-major view: Y^T [rows x n] = W^T' [rows x in] * X^T [in x n], W read as its transpose. */
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasGemmEx(static_cast<cublasHandle_t>(blas), CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)n,
                                    (int)in, &one, w, CUDA_R_16F, (int)in, x, CUDA_R_16F, (int)ldx, &zero, y,
                                    CUDA_R_32F, (int)rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) return blas_failed(s, "cublasGemmEx");
    return HZ_OK;
}

extern "C" int hz_pf_resnorm(const hz_pf_norm_args *a, void *stream) {
    if (!a || !a->h || a->rows == 0 || a->n == 0 || (a->w && !a->y) || (a->embed && !a->tokens) ||
        (a->ey && (!a->slot_of || !a->topk_w || a->top_k == 0 || a->ey_stride < a->n)) ||
        (a->shared32 && (!a->ey || !a->gate32)) || (a->y_pair && a->pair_stride < a->n))
        return hz_error(HZ_EINVAL, "prefill resnorm: bad arguments");
    if (a->top_k > kRouteMaxK) return hz_error(HZ_EUNSUPPORTED, "prefill resnorm: top-%u above %u", a->top_k, kRouteMaxK);
    pf_resnorm_kernel<<<a->rows, kNormThreads, 0, static_cast<cudaStream_t>(stream)>>>(*a);
    return launched("resnorm");
}

extern "C" int hz_pf_qkv(const hz_pf_qkv_args *a, void *stream) {
    if (!a || !a->q32 || !a->k32 || !a->v32 || !a->rope || !a->q_out || !a->kc || !a->vc || a->tokens == 0 ||
        a->head_dim == 0 || a->head_dim % 2u || a->heads == 0 || a->kv_heads == 0 || (!a->q_norm != !a->k_norm))
        return hz_error(HZ_EINVAL, "prefill qkv: bad arguments");
    if (a->tokens > 65535u) return hz_error(HZ_EUNSUPPORTED, "prefill qkv: %u tokens in one launch", a->tokens);
    const uint32_t n = (a->heads > a->kv_heads ? a->heads : a->kv_heads) * a->head_dim;
    const size_t smem = (size_t)n * sizeof(float);
    if (smem > kDefaultSmem)
        return hz_error(HZ_EUNSUPPORTED, "prefill qkv: projection width %u above the 12288 supported", n);
    pf_qkv_kernel<<<dim3(3, a->tokens), kNormThreads, smem, static_cast<cudaStream_t>(stream)>>>(*a);
    return launched("qkv");
}

/* The opt-in shared memory limit of the current device (0 when it cannot be read). */
static size_t smem_optin(void) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (size_t)v;
}

extern "C" uint32_t hz_pf_attention_max_positions(uint32_t head_dim) {
    if (head_dim == 0 || head_dim % 2u || head_dim > (uint32_t)kAttnThreads) return 0;
    const size_t limit = smem_optin();
    const size_t fixed = attention_smem(1, 0, head_dim);
    if (limit <= fixed) return 0;
    const size_t n = (limit - fixed) / sizeof(float);
    return n > 0xffffffffu ? 0xffffffffu : (uint32_t)n;
}

extern "C" int hz_pf_attention(const uint16_t *q, const uint16_t *kc, const uint16_t *vc, uint16_t *out, uint32_t tokens,
                               uint32_t pos0, uint32_t heads, uint32_t kv_heads, uint32_t head_dim, void *stream) {
    if (!q || !kc || !vc || !out || tokens == 0 || heads == 0 || kv_heads == 0 || heads % kv_heads || head_dim == 0 ||
        head_dim % 2u || pos0 > 0xffffffffu - tokens)
        return hz_error(HZ_EINVAL, "prefill attention: bad arguments");
    if (head_dim > (uint32_t)kAttnThreads)
        return hz_error(HZ_EUNSUPPORTED, "prefill attention: head_dim %u above the %d supported", head_dim, kAttnThreads);
    const uint32_t N = pos0 + tokens;
    /* The most queries per block whose scores fit the default shared memory; a single query per
     * block with the opt-in limit beyond that. */
    uint32_t qt = kAttnMaxQ;
    while (qt > 1 && attention_smem(qt, N, head_dim) > kDefaultSmem) qt /= 2;
    const size_t smem = attention_smem(qt, N, head_dim);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (smem > kDefaultSmem) {
        if (smem > smem_optin())
            return hz_error(HZ_EUNSUPPORTED, "prefill attention: %u positions need %zu bytes of shared memory", N, smem);
        cudaError_t e = cudaFuncSetAttribute(pf_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return cuda_failed(e, "cudaFuncSetAttribute (attention shared memory)");
    }
    const uint32_t tiles = (tokens + qt - 1) / qt;
    if (tiles > 65535u) return hz_error(HZ_EUNSUPPORTED, "prefill attention: %u tokens in one launch", tokens);
    const float scale = 1.0f / sqrtf((float)head_dim);
    pf_attention_kernel<<<dim3(heads, tiles), kAttnThreads, smem, s>>>(q, kc, vc, out, tokens, pos0, qt, N, heads * head_dim,
                                                                        heads / kv_heads, kv_heads * head_dim, head_dim,
                                                                        scale);
    return launched("attention");
}

extern "C" int hz_pf_route(const float *logits32, uint32_t tokens, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids,
                           float *w, void *stream) {
    if (!logits32 || !ids || !w || tokens == 0 || E == 0 || K == 0 || K > E)
        return hz_error(HZ_EINVAL, "prefill route: bad arguments (E %u, K %u)", E, K);
    if (E > kRouteMaxExperts || K > kRouteMaxK)
        return hz_error(HZ_EUNSUPPORTED, "prefill route: %u experts top-%u (at most %u, top-%u)", E, K, kRouteMaxExperts,
                        kRouteMaxK);
    pf_route_kernel<<<tokens, kRouteThreads, 0, static_cast<cudaStream_t>(stream)>>>(logits32, E, K, norm_topk, ids, w);
    return launched("route");
}

extern "C" int hz_pf_bucket(const uint32_t *ids, uint32_t tokens, uint32_t K, uint32_t E, uint32_t *counts,
                            uint32_t *slot_tok, uint32_t *slot_of, hz_pf_tile *tiles, uint32_t *n_tiles, void *stream) {
    if (!ids || !counts || !slot_tok || !slot_of || !tiles || !n_tiles || tokens == 0 || K == 0 || E == 0)
        return hz_error(HZ_EINVAL, "prefill bucket: bad arguments");
    if (E > kBucketMaxExperts || (uint64_t)tokens * K > 65536u)
        return hz_error(HZ_EUNSUPPORTED, "prefill bucket: %u experts, %u x %u pairs", E, tokens, K);
    pf_bucket_kernel<<<1, kBucketThreads, 0, static_cast<cudaStream_t>(stream)>>>(ids, tokens * K, K, E, counts,
                                                                                    slot_tok, slot_of, tiles, n_tiles);
    return launched("bucket");
}

extern "C" int hz_pf_experts(const hz_pf_experts_args *a, void *stream) {
    int st = experts_check(a);
    if (st) return st;
    if (a->tile_count == 0) return HZ_OK;
    const hz_expert_layout *l = a->layout;
    ExpertParams p = {};
    for (uint32_t e = 0; !a->table && e < a->experts; e++) {
        p.rows[e] = static_cast<const uint8_t *>(a->rows_host[e]);
        if (p.rows[e] && ((uintptr_t)p.rows[e] & 15u))
            return hz_error(HZ_EINVAL, "prefill experts: blob of expert %u is not 16-byte aligned", e);
    }
    p.table = reinterpret_cast<const uint8_t *const *>(a->table);
    p.tiles = a->tiles;
    p.n_tiles_dev = a->n_tiles_dev;
    p.tile_base = a->tile_base;
    p.act = a->act;
    p.act_stride = a->act_stride;
    p.ey = a->ey;
    p.ey_stride = a->ey_stride;
    p.f16_magic = HZ_F16_MAGIC;
    cudaStream_t s = static_cast<cudaStream_t>(stream);

    p.slot_tok = a->slot_tok;
    p.b = reinterpret_cast<const uint8_t *>(a->x_pair);
    p.b_row_bytes = a->x_stride * 2u;
    p.q_off0 = l->gate_q;
    p.q_off1 = l->up_q;
    p.s_off0 = l->gate_s;
    p.s_off1 = l->up_s;
    p.rows_n = l->inter;
    p.kp = l->gate.kp;
    st = launch_experts<true>(p, (l->inter + 63u) / 64u, a->tile_count, s);
    if (st) return st;

    p.slot_tok = nullptr;
    p.b = reinterpret_cast<const uint8_t *>(a->act);
    p.b_row_bytes = a->act_stride * 2u;
    p.q_off0 = p.q_off1 = l->down_q;
    p.s_off0 = p.s_off1 = l->down_s;
    p.rows_n = l->hidden;
    p.kp = l->down.kp;
    return launch_experts<false>(p, (l->hidden + 127u) / 128u, a->tile_count, s);
}
