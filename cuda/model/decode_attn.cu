/* The decode step's attention kernel: q/k norm, RoPE and the KV store of the current position, then
 * split (flash-decoding) attention over the cached positions (see hz_decode_attention in
 * decode_ops.cuh for the contract). */
#include <cmath>
#include <cstring>

#include "decode_launch.cuh"
#include "decode_ops.cuh"
#include "ops_common.cuh"

namespace {

constexpr int kAttnThreads = 128;
constexpr uint32_t kChunk = HZ_DECODE_ATTN_CHUNK;

struct dattn_params {
    hz_dattn_args a;
    float scale;
    uint32_t group; /* query heads per KV head */
    uint32_t nc;    /* 16-byte chunks per head row (D / 8) */
    uint32_t lpr;   /* lanes per row in the score pass: nc rounded up to a power of two */
    uint32_t ng;    /* position groups in the V pass: threads / nc */
};

/* q or k of one head, RMSNorm'ed over the full width (when nw) and rotated: rows of D FP16-exact
 * floats into dst. The formulas are hz_model_qkv_post's. */
__device__ void norm_rope(const uint16_t *x, const uint16_t *nw, float inv, const float *cs, uint32_t head,
                          uint32_t D, float *dst) {
    const uint32_t half = D / 2u;
    for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
        const uint32_t i0 = head * D + i, i1 = i0 + half;
        float x0 = h2f(x[i0]), x1 = h2f(x[i1]);
        if (nw) {
            x0 = round16(__fmul_rn(h2f(nw[i0]), round16(__fmul_rn(x0, inv))));
            x1 = round16(__fmul_rn(h2f(nw[i1]), round16(__fmul_rn(x1, inv))));
        }
        const float c = cs[i], s = cs[half + i];
        dst[i] = round16(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)));
        dst[i + half] = round16(__fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s)));
    }
}

/* 1 / sqrt(mean(x^2) + eps) over n FP16 values (the q/k norm's factor). */
__device__ float rms_inv(const uint16_t *x, uint32_t n, float eps, float *red) {
    float ss = 0.0f;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = h2f(x[i]);
        ss = fmaf(v, v, ss);
    }
    ss = block_reduce<false>(ss, red);
    return 1.0f / sqrtf(ss / (float)n + eps);
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

/* Scores of the cached positions [j0, jc) of one chunk into sc[j - j0]: a row of D values is read by
 * lpr lanes (16 bytes each), so a warp covers 32 / lpr rows per pass, four passes in flight. */
__device__ void chunk_scores(const dattn_params &p, const uint16_t *kh, uint32_t kv_width, const float (&qr)[8],
                             uint32_t j0, uint32_t jc, float *sc) {
    constexpr int kU = 4;
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nwarps = blockDim.x / kWarp;
    const uint32_t lpr = p.lpr, rows = kWarp / lpr, sub = lane / lpr, li = lane % lpr;
    const bool active = li < p.nc;
    for (uint32_t base = j0 + warp * rows; base < jc; base += nwarps * rows * kU) {
        uint4 kv[kU];
#pragma unroll
        for (int u = 0; u < kU; u++) {
            const uint32_t j = base + (uint32_t)u * nwarps * rows + sub;
            kv[u] = active && j < jc ? __ldcg(reinterpret_cast<const uint4 *>(kh + (size_t)j * kv_width) + li)
                                     : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kU; u++) {
            const uint32_t j = base + (uint32_t)u * nwarps * rows + sub;
            float d = active && j < jc ? dot8f(kv[u], qr, 0.0f) : 0.0f;
            for (uint32_t o = lpr / 2u; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
            if (li == 0 && j < jc) sc[j - j0] = d * p.scale;
        }
    }
}

/* sum_j e_j v_j over the positions of one chunk, per position group g (threads / nc of them, group g
 * takes j0 + g, j0 + g + ng, ...): FP32 partial rows into vpart[g x D]. The current position's v comes
 * from vp (it is being stored by this kernel). */
__device__ void chunk_values(const dattn_params &p, const uint16_t *vh, uint32_t kv_width, const float *sc,
                             uint32_t j0, uint32_t jc, uint32_t j1, uint32_t pos, const float *vp, float *vpart) {
    constexpr int kU = 8;
    const uint32_t nc = p.nc, ng = p.ng, ci = threadIdx.x % nc, g = threadIdx.x / nc;
    if (g >= ng) return;
    float o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (uint32_t base = j0 + g; base < jc; base += ng * kU) {
        uint4 vv[kU];
#pragma unroll
        for (int u = 0; u < kU; u++) {
            const uint32_t j = base + (uint32_t)u * ng;
            vv[u] = j < jc ? __ldcg(reinterpret_cast<const uint4 *>(vh + (size_t)j * kv_width) + ci) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kU; u++) {
            const uint32_t j = base + (uint32_t)u * ng;
            if (j >= jc) break;
            const float e = sc[j - j0];
            const __half2 *h2 = reinterpret_cast<const __half2 *>(&vv[u]);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 f = __half22float2(h2[k]);
                o[2 * k] = fmaf(e, f.x, o[2 * k]);
                o[2 * k + 1] = fmaf(e, f.y, o[2 * k + 1]);
            }
        }
    }
    if (j1 == pos + 1u && (pos - j0) % ng == g) { /* the current position closes the chunk */
        const float e = sc[pos - j0];
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = fmaf(e, vp[ci * 8u + k], o[k]);
    }
#pragma unroll
    for (int k = 0; k < 8; k++) vpart[g * p.a.head_dim + ci * 8u + k] = o[k];
}

/* Grid (splits, heads). Split s of head h takes chunks s, s + splits, ... of positions 0..pos, keeps
 * a running max m, sum l and output o (online softmax), and parks (m, l, o) in `part`; the last split
 * of the head to finish combines them in split order. The split that owns the current position also
 * computes k and v of that position (and, for the first query head of its KV head, stores them). */
__global__ void __launch_bounds__(kAttnThreads) dattn_kernel(const __grid_constant__ dattn_params p) {
    extern __shared__ __align__(16) float sm[]; /* qh[D] kp[D] vp[D] sc[kChunk] vpart[ng x D] */
    __shared__ float red[kWarp + 1];
    __shared__ uint32_t last;
    const hz_dattn_args &a = p.a;
    const uint32_t D = a.head_dim, S = a.splits, s = blockIdx.x, h = blockIdx.y, hk = h / p.group;
    const uint32_t kv_width = a.kv_heads * D;
    float *qh = sm, *kp = qh + D, *vp = kp + D, *sc = vp + D, *vpart = sc + kChunk;
    /* pos was written by hz_decode_begin, at least two grids before this one: that grid has finished
     * before this one could be scheduled, so it may be read before the wait. */
    const uint32_t pos = __ldcg(&a.step->pos), n_pos = pos + 1u, nchunks = (n_pos + kChunk - 1u) / kChunk;
    const bool work = s < nchunks;
    const uint16_t *kh = a.kc + (size_t)hk * D, *vh = a.vc + (size_t)hk * D;
    if (work) { /* cached rows of the first chunk into L2 while the projections finish */
        const uint32_t j0 = s * kChunk, jc = min(j0 + kChunk, pos), lines = (D * 2u + 127u) / 128u;
        for (uint32_t t = threadIdx.x; j0 + t / (2u * lines) < jc; t += blockDim.x) {
            const uint32_t j = j0 + t / (2u * lines), l = t % (2u * lines);
            const uint16_t *base = (l < lines ? kh : vh) + (size_t)j * kv_width;
            prefetch_l2(reinterpret_cast<const char *>(base) + (l % lines) * 128u);
        }
    }
    l2pf_issue(a.pf, blockIdx.y * gridDim.x + blockIdx.x, gridDim.x * gridDim.y);
    griddep_wait();
    griddep_launch();

    if (work) {
        const bool owns_pos = (nchunks - 1u) % S == s;
        const float *cs = a.rope + (size_t)pos * D;
        float inv_q = 0.0f, inv_k = 0.0f;
        if (a.q_norm) {
            inv_q = rms_inv(a.q, a.heads * D, a.eps, red);
            if (owns_pos) inv_k = rms_inv(a.k, kv_width, a.eps, red);
        }
        norm_rope(a.q, a.q_norm, inv_q, cs, h, D, qh);
        if (owns_pos) {
            norm_rope(a.k, a.k_norm, inv_k, cs, hk, D, kp);
            for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) vp[d] = h2f(a.v[(size_t)hk * D + d]);
        }
        __syncthreads();
        if (owns_pos && h % p.group == 0) {
            uint16_t *kd = a.kc + (size_t)pos * kv_width + (size_t)hk * D, *vd = a.vc + (size_t)pos * kv_width + (size_t)hk * D;
            for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) {
                kd[d] = f2h(kp[d]);
                vd[d] = a.v[(size_t)hk * D + d];
            }
        }
        float qr[8];
        const uint32_t li = (threadIdx.x % kWarp) % p.lpr;
#pragma unroll
        for (int k = 0; k < 8; k++) qr[k] = li < p.nc ? qh[li * 8u + k] : 0.0f;

        float m_run = -INFINITY, l_run = 0.0f, o_run[2] = {0.0f, 0.0f}; /* o for d = tid, tid + 128 */
        for (uint32_t c = s; c < nchunks; c += S) {
            const uint32_t j0 = c * kChunk, j1 = min(j0 + kChunk, n_pos), jc = min(j1, pos), nj = j1 - j0;
            chunk_scores(p, kh, kv_width, qr, j0, jc, sc);
            if (j1 == n_pos && threadIdx.x < kWarp) { /* the current position, from kp */
                float d = 0.0f;
                for (uint32_t i = threadIdx.x; i < D; i += kWarp) d = fmaf(qh[i], kp[i], d);
                d = warp_sum(d);
                if (threadIdx.x == 0) sc[pos - j0] = d * p.scale;
            }
            __syncthreads();
            float mx = -INFINITY;
            for (uint32_t j = threadIdx.x; j < nj; j += blockDim.x) mx = fmaxf(mx, sc[j]);
            mx = block_reduce<true>(mx, red);
            const float m_new = fmaxf(m_run, mx);
            float sum = 0.0f;
            for (uint32_t j = threadIdx.x; j < nj; j += blockDim.x) {
                const float e = expf(sc[j] - m_new);
                sc[j] = e;
                sum += e;
            }
            sum = block_reduce<false>(sum, red); /* its barriers also publish sc */
            const float f = expf(m_run - m_new); /* 0 on the first chunk */
            l_run = l_run * f + sum;
            chunk_values(p, vh, kv_width, sc, j0, jc, j1, pos, vp, vpart);
            __syncthreads();
            for (uint32_t k = 0; k < 2; k++) {
                const uint32_t d = threadIdx.x + k * blockDim.x;
                if (d >= D) break;
                float t = 0.0f;
                for (uint32_t g = 0; g < p.ng; g++) t += vpart[g * D + d];
                o_run[k] = o_run[k] * f + t;
            }
            m_run = m_new;
            __syncthreads(); /* sc and vpart are reused by the next chunk */
        }
        float *pp = a.part + ((size_t)h * S + s) * (D + 2u);
        if (threadIdx.x == 0) {
            pp[0] = m_run;
            pp[1] = l_run;
        }
        for (uint32_t k = 0; k < 2; k++) {
            const uint32_t d = threadIdx.x + k * blockDim.x;
            if (d < D) pp[2 + d] = o_run[k];
        }
    }

    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(a.count + h, 1u) == S - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const uint32_t nv = min(S, nchunks);
    const float *ph = a.part + (size_t)h * S * (D + 2u);
    float M = -INFINITY;
    for (uint32_t i = 0; i < nv; i++) M = fmaxf(M, __ldcg(ph + (size_t)i * (D + 2u)));
    float L = 0.0f;
    for (uint32_t i = 0; i < nv; i++) L += __ldcg(ph + (size_t)i * (D + 2u) + 1) * expf(__ldcg(ph + (size_t)i * (D + 2u)) - M);
    const float invL = 1.0f / L;
    for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) {
        float o = 0.0f;
        for (uint32_t i = 0; i < nv; i++)
            o = fmaf(__ldcg(ph + (size_t)i * (D + 2u) + 2 + d), expf(__ldcg(ph + (size_t)i * (D + 2u)) - M), o);
        a.out[(size_t)h * D + d] = f2h(o * invL);
    }
    if (threadIdx.x == 0) a.count[h] = 0; /* ready for the next launch */
}

uint32_t next_pow2(uint32_t v) {
    uint32_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

} // namespace

extern "C" uint32_t hz_decode_attention_splits(const hz_decode_dev *dev, uint32_t heads, uint32_t max_ctx) {
    /* Two blocks per multiprocessor over all heads, no more splits than chunks of the context. */
    const uint32_t sms = dev && dev->sms ? dev->sms : 1u, h = heads ? heads : 1u;
    const uint32_t chunks = (max_ctx + kChunk - 1u) / kChunk;
    uint32_t s = (2u * sms + h - 1u) / h;
    if (s > chunks) s = chunks;
    return s ? s : 1u;
}

extern "C" int hz_decode_attention_supported(uint32_t head_dim) {
    return head_dim >= 8u && head_dim % 8u == 0 && head_dim <= 256u;
}

extern "C" int hz_decode_attention(const hz_dattn_args *a, const hz_klaunch *k) {
    if (!a || !k || !a->q || !a->k || !a->v || !a->rope || !a->step || !a->kc || !a->vc || !a->out || !a->part ||
        !a->count || a->splits == 0 || a->heads == 0 || a->kv_heads == 0 || a->heads % a->kv_heads ||
        (!a->q_norm != !a->k_norm))
        return hz_error(HZ_EINVAL, "decode attention: bad arguments");
    if (!hz_decode_attention_supported(a->head_dim))
        return hz_error(HZ_EUNSUPPORTED, "decode attention: head_dim %u (a multiple of 8 up to 256)", a->head_dim);
    if (!aligned16(a->kc) || !aligned16(a->vc))
        return hz_error(HZ_EINVAL, "decode attention: KV cache not 16-byte aligned");
    if (!l2pf_valid(a->pf))
        return hz_error(HZ_EINVAL, "decode attention: an L2 prefetch range is NULL or not 16-byte aligned");
    dattn_params p;
    memset(&p, 0, sizeof p);
    p.a = *a;
    p.scale = 1.0f / sqrtf((float)a->head_dim);
    p.group = a->heads / a->kv_heads;
    p.nc = a->head_dim / 8u;
    p.lpr = next_pow2(p.nc);
    p.ng = (uint32_t)kAttnThreads / p.nc;
    const size_t smem = (size_t)(3u * a->head_dim + kChunk + p.ng * a->head_dim) * sizeof(float);
    cudaError_t e = launch(dattn_kernel, a->splits, a->heads, kAttnThreads, smem, k, p);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the decode attention");
}
