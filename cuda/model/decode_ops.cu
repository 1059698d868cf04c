/* The decode step's fused kernels and its CUDA graph (see decode_ops.cuh for each contract). */
#include <cstdlib>
#include <cstring>

#include "decode_ops.cuh"
#include "ops_common.cuh"

extern "C" {
#include "core/core.h"
}

namespace {

constexpr int kGemvWarps = 8; /* 256-thread blocks, one row per warp at a time */
constexpr int kGemvThreads = kGemvWarps * kWarp;
constexpr int kBatch = 8;             /* 16-byte chunks per lane in flight for one row */
constexpr uint32_t kGemvMaxIn = 16384; /* x staged in shared memory: 32 KB */
constexpr int kAttnThreads = 128;
constexpr uint32_t kChunk = HZ_DECODE_ATTN_CHUNK;
constexpr uint32_t kNone = 0xffffffffu;

int cuda_fail(cudaError_t e, const char *what) {
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

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/* ---- step start ----------------------------------------------------------------------------------- */

__global__ void begin_kernel(int32_t token, uint32_t pos, hz_dstep *d) {
    d->token = token;
    d->pos = pos;
}

/* ---- GEMV ------------------------------------------------------------------------------------------- */

struct dgemv_params {
    hz_dgemv_args a;
    uint32_t start[HZ_MGEMV_MAX_SEGS + 1]; /* first global row of each segment; start[nseg] = total */
    uint32_t *counter;                     /* tail: blocks finished */
    float *bval;                           /* argmax tail: each block's best value and row */
    uint32_t *bidx;
};

__device__ __forceinline__ uint32_t seg_of(const dgemv_params &p, uint32_t row) {
    uint32_t s = 0;
    while (row >= p.start[s + 1]) s++;
    return s;
}

__device__ __forceinline__ const uint4 *row_ptr(const dgemv_params &p, uint32_t row) {
    const uint32_t s = seg_of(p, row);
    return reinterpret_cast<const uint4 *>(p.a.seg[s].w + (size_t)(row - p.start[s]) * p.a.in);
}

/* Issues the loads of chunks c0 + u*32 + lane (u < kBatch) of one row; past the row: zeros. */
__device__ __forceinline__ void load_batch(const uint4 *w4, uint32_t c0, uint32_t lane, uint32_t chunks,
                                           uint4 (&wv)[kBatch]) {
#pragma unroll
    for (int u = 0; u < kBatch; u++) {
        const uint32_t c = c0 + (uint32_t)u * kWarp + lane;
        wv[u] = c < chunks ? ld_stream(w4 + c) : make_uint4(0, 0, 0, 0);
    }
}

__device__ __forceinline__ float fma_batch(const uint4 (&wv)[kBatch], const uint4 *xs4, uint32_t c0, uint32_t lane,
                                           uint32_t chunks, float acc) {
#pragma unroll
    for (int u = 0; u < kBatch; u++) {
        const uint32_t c = c0 + (uint32_t)u * kWarp + lane;
        if (c < chunks) acc = dot8(wv[u], xs4[c], acc);
    }
    return acc;
}

/* h = src (+ delta) for one element, formula for formula as resnorm_kernel (model_ops.cu). */
__device__ __forceinline__ float resnorm_h(const hz_dgemv_args &a, float src, uint32_t i, float d16, float acc,
                                           float shared, float sg) {
    if (!a.d && !a.acc) return src;
    float d;
    if (a.acc) {
        d = round16(acc);
        if (a.shared) d = round16(__fadd_rn(d, round16(__fmul_rn(sg, shared))));
    } else {
        d = d16;
    }
    return round16(__fadd_rn(src, d));
}

/* x = the residual add + RMSNorm of the arguments into xs (FP16), every block alike; block 0 also
 * stores h and x. VEC: 8 consecutive values per thread with 16-byte loads. */
template <bool VEC>
__device__ void build_resnorm(const hz_dgemv_args &a, uint16_t *xs, float *red) {
    const uint32_t n = a.in;
    const uint16_t *src = a.embed ? a.embed + (size_t)__ldcg(&a.step->token) * n : a.h_in;
    const float sg = (a.acc && a.shared) ? 1.0f / (1.0f + expf(-h2f(a.shared_gate[0]))) : 0.0f;
    float ss = 0.0f;
    if (VEC) {
        for (uint32_t c = threadIdx.x; c < n / 8u; c += blockDim.x) {
            const uint4 sv = reinterpret_cast<const uint4 *>(src)[c];
            uint4 dv = make_uint4(0, 0, 0, 0), shv = make_uint4(0, 0, 0, 0);
            float4 a0 = make_float4(0, 0, 0, 0), a1 = a0;
            if (a.acc) {
                a0 = reinterpret_cast<const float4 *>(a.acc)[2 * c];
                a1 = reinterpret_cast<const float4 *>(a.acc)[2 * c + 1];
                if (a.shared) shv = reinterpret_cast<const uint4 *>(a.shared)[c];
            } else if (a.d) {
                dv = reinterpret_cast<const uint4 *>(a.d)[c];
            }
            const uint16_t *s16 = reinterpret_cast<const uint16_t *>(&sv);
            const uint16_t *d16 = reinterpret_cast<const uint16_t *>(&dv);
            const uint16_t *h16 = reinterpret_cast<const uint16_t *>(&shv);
            const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            uint4 out;
            uint16_t *o16 = reinterpret_cast<uint16_t *>(&out);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float h = resnorm_h(a, h2f(s16[k]), c * 8u + k, h2f(d16[k]), av[k], h2f(h16[k]), sg);
                ss = fmaf(h, h, ss);
                o16[k] = f2h(h);
            }
            reinterpret_cast<uint4 *>(xs)[c] = out;
        }
    } else {
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float h = resnorm_h(a, h2f(src[i]), i, a.d ? h2f(a.d[i]) : 0.0f, a.acc ? a.acc[i] : 0.0f,
                                      a.shared ? h2f(a.shared[i]) : 0.0f, sg);
            ss = fmaf(h, h, ss);
            xs[i] = f2h(h);
        }
    }
    ss = block_reduce<false>(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)n + a.eps);
    const bool store = blockIdx.x == 0;
    /* Each thread rewrites only the values it wrote itself: no barrier needed in between. */
    if (VEC) {
        for (uint32_t c = threadIdx.x; c < n / 8u; c += blockDim.x) {
            const uint4 hv = reinterpret_cast<const uint4 *>(xs)[c];
            const uint4 wv = reinterpret_cast<const uint4 *>(a.norm_w)[c];
            const uint16_t *h16 = reinterpret_cast<const uint16_t *>(&hv);
            const uint16_t *w16 = reinterpret_cast<const uint16_t *>(&wv);
            uint4 yv;
            uint16_t *y16 = reinterpret_cast<uint16_t *>(&yv);
#pragma unroll
            for (int k = 0; k < 8; k++) y16[k] = f2h(__fmul_rn(h2f(w16[k]), round16(__fmul_rn(h2f(h16[k]), inv))));
            reinterpret_cast<uint4 *>(xs)[c] = yv;
            if (store && a.h_out) reinterpret_cast<uint4 *>(a.h_out)[c] = hv;
            if (store && a.x_out) reinterpret_cast<uint4 *>(a.x_out)[c] = yv;
        }
    } else {
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
            const uint16_t hb = xs[i];
            const uint16_t y = f2h(__fmul_rn(h2f(a.norm_w[i]), round16(__fmul_rn(h2f(hb), inv))));
            xs[i] = y;
            if (store && a.h_out) a.h_out[i] = hb;
            if (store && a.x_out) a.x_out[i] = y;
        }
    }
}

/* x = fp16(silu(g) * u), hz_model_silu_mul's formula. */
template <bool VEC>
__device__ void build_silu(const hz_dgemv_args &a, uint16_t *xs) {
    if (VEC) {
        for (uint32_t c = threadIdx.x; c < a.in / 8u; c += blockDim.x) {
            const float4 g0 = reinterpret_cast<const float4 *>(a.g)[2 * c], g1 = reinterpret_cast<const float4 *>(a.g)[2 * c + 1];
            const float4 u0 = reinterpret_cast<const float4 *>(a.u)[2 * c], u1 = reinterpret_cast<const float4 *>(a.u)[2 * c + 1];
            const float gv[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
            const float uv[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
            uint4 out;
            uint16_t *o16 = reinterpret_cast<uint16_t *>(&out);
#pragma unroll
            for (int k = 0; k < 8; k++) o16[k] = f2h(gv[k] / (1.0f + expf(-gv[k])) * uv[k]);
            reinterpret_cast<uint4 *>(xs)[c] = out;
        }
    } else {
        for (uint32_t i = threadIdx.x; i < a.in; i += blockDim.x) {
            const float gi = a.g[i];
            xs[i] = f2h(gi / (1.0f + expf(-gi)) * a.u[i]);
        }
    }
}

/* (v, i) beats (bv, bi): larger, or equal with the lower index; kNone loses to everything. */
__device__ __forceinline__ bool better(float v, uint32_t i, float bv, uint32_t bi) {
    return i != kNone && (bi == kNone || v > bv || (v == bv && i < bi));
}

/* The argmax tail in the last block: every block's best, scanned in parallel, ties to the lower row. */
__device__ void argmax_final(const dgemv_params &p, uint32_t nblocks, float *wv, uint32_t *wi) {
    float best = -INFINITY;
    uint32_t bi = kNone;
    for (uint32_t b = threadIdx.x; b < nblocks; b += blockDim.x) {
        const float v = __ldcg(p.bval + b);
        const uint32_t i = __ldcg(p.bidx + b);
        if (better(v, i, best, bi)) {
            best = v;
            bi = i;
        }
    }
    for (int o = kWarp / 2; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const uint32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(ov, oi, best, bi)) {
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
    if (threadIdx.x == 0) {
        for (uint32_t w = 1; w < blockDim.x / kWarp; w++)
            if (better(wv[w], wi[w], best, bi)) {
                best = wv[w];
                bi = wi[w];
            }
        *p.a.argmax_out = (int32_t)bi;
    }
}

/* Rows are spread over the warps of a grid that is resident at once (grid-stride), so the prologue
 * that builds x runs once per block, not once per 8 rows. Each warp holds the first batch of its
 * first row in registers before waiting on the previous grid (weights are never written by a step),
 * and the next row's first batch while it reduces the current one. */
template <bool VEC>
__global__ void __launch_bounds__(kGemvThreads, 4) dgemv_kernel(const __grid_constant__ dgemv_params p) {
    extern __shared__ __align__(16) uint16_t xs[]; /* [in rounded up to 8] | route: [E] floats */
    __shared__ float red[kWarp + 1];
    __shared__ float wbest[kGemvWarps];
    __shared__ uint32_t wbidx[kGemvWarps];
    __shared__ uint32_t last;
    __shared__ float inv_sum;
    const hz_dgemv_args &a = p.a;
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const uint32_t total = p.start[a.nseg], stride = gridDim.x * kGemvWarps, chunks = a.in / 8u;
    uint32_t row = blockIdx.x * kGemvWarps + warp;
    uint4 wv[kBatch];
    if (VEC && row < total) load_batch(row_ptr(p, row), 0, lane, chunks, wv);

    griddep_wait();
    griddep_launch();
    if (a.x_mode == HZ_DGEMV_X_RESNORM)
        build_resnorm<VEC>(a, xs, red);
    else if (a.x_mode == HZ_DGEMV_X_SILU)
        build_silu<VEC>(a, xs);
    else if (VEC)
        for (uint32_t c = threadIdx.x; c < chunks; c += blockDim.x)
            reinterpret_cast<uint4 *>(xs)[c] = reinterpret_cast<const uint4 *>(a.x)[c];
    else
        for (uint32_t i = threadIdx.x; i < a.in; i += blockDim.x) xs[i] = a.x[i];
    if (blockIdx.x == 0 && a.zero)
        for (uint32_t i = threadIdx.x; i < a.zero_n; i += blockDim.x) a.zero[i] = 0.0f;
    __syncthreads();

    float best = -INFINITY;
    uint32_t best_i = kNone;
    const uint4 *xs4 = reinterpret_cast<const uint4 *>(xs);
    while (row < total) {
        const uint32_t s = seg_of(p, row), r = row - p.start[s];
        const uint32_t next = row + stride;
        float acc = 0.0f;
        if (VEC) {
            const uint4 *w4 = row_ptr(p, row);
            for (uint32_t c0 = 0;;) {
                acc = fma_batch(wv, xs4, c0, lane, chunks, acc);
                c0 += (uint32_t)kBatch * kWarp;
                if (c0 >= chunks) break;
                load_batch(w4, c0, lane, chunks, wv);
            }
            if (next < total) load_batch(row_ptr(p, next), 0, lane, chunks, wv); /* in flight during the reduction */
        } else {
            const uint16_t *w = a.seg[s].w + (size_t)r * a.in;
            for (uint32_t i = lane; i < a.in; i += kWarp) acc = fmaf(h2f(w[i]), h2f(xs[i]), acc);
        }
        acc = warp_sum(acc);
        if (lane == 0) {
            const hz_mgemv_seg &sg = a.seg[s];
            const float v = acc + (sg.bias ? h2f(sg.bias[r]) : 0.0f);
            if (sg.out_f32)
                static_cast<float *>(sg.y)[r] = v;
            else
                static_cast<uint16_t *>(sg.y)[r] = f2h(v);
            if (s == 0 && better(v, r, best, best_i)) { /* rows ascend per warp: ties keep the first */
                best = v;
                best_i = r;
            }
        }
        row = next;
    }
    if (a.tail == HZ_DGEMV_TAIL_NONE) return;

    if (a.tail == HZ_DGEMV_TAIL_ARGMAX) {
        if (lane == 0) {
            wbest[warp] = best;
            wbidx[warp] = best_i;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (uint32_t w = 1; w < kGemvWarps; w++)
                if (better(wbest[w], wbidx[w], best, best_i)) {
                    best = wbest[w];
                    best_i = wbidx[w];
                }
            p.bval[blockIdx.x] = best;
            p.bidx[blockIdx.x] = best_i;
        }
    }
    /* The last block to finish sees every other block's rows (fence before the ticket, fence after). */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(p.counter, 1u) == gridDim.x - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (a.tail == HZ_DGEMV_TAIL_ROUTE) {
        float *pr = reinterpret_cast<float *>(xs + ((a.in + 7u) & ~7u));
        route_block(static_cast<const uint16_t *>(a.seg[0].y), a.seg[0].rows, a.top_k, a.norm_topk, a.ids_out,
                    a.w_out, a.table, a.rows_out, pr, red, &inv_sum);
    } else {
        argmax_final(p, gridDim.x, wbest, wbidx);
    }
    if (threadIdx.x == 0) *p.counter = 0; /* ready for the next launch */
}

/* ---- attention ----------------------------------------------------------------------------------- */

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

/* ---- launch functions ------------------------------------------------------------------------------ */

struct hz_decode_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t begin;
    uint32_t kernels;
};

extern "C" int hz_decode_enter(void *stream) {
    int dev = 0;
    cudaError_t e = cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &dev);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamGetDevice");
    e = cudaSetDevice(dev);
    if (e != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
    return HZ_OK;
}

extern "C" int hz_decode_device_info(void *stream, uint32_t max_in, hz_decode_dev *out) {
    if (!out || max_in == 0 || max_in > kGemvMaxIn)
        return hz_error(HZ_EINVAL, "decode: device info for GEMV inputs of %u values (at most %u)", max_in, kGemvMaxIn);
    int st = hz_decode_enter(stream);
    if (st) return st;
    int dev = 0, sms = 0, blocks = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return cuda_fail(e, "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
    const size_t smem = (size_t)((max_in + 7u) & ~7u) * 2u + kRouteMaxExperts * sizeof(float);
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, dgemv_kernel<true>, kGemvThreads, smem);
    if (e != cudaSuccess) return cuda_fail(e, "cudaOccupancyMaxActiveBlocksPerMultiprocessor(gemv)");
    out->sms = (uint32_t)(sms > 0 ? sms : 1);
    out->gemv_grid = out->sms * (uint32_t)(blocks > 0 ? blocks : 1);
    return HZ_OK;
}

extern "C" int hz_decode_begin(int32_t token, uint32_t pos, hz_dstep *d_step, void *stream) {
    if (!d_step) return hz_error(HZ_EINVAL, "decode begin: NULL step");
    begin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(token, pos, d_step);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the step-begin kernel");
}

extern "C" uint64_t hz_decode_tail_bytes(const hz_decode_dev *dev) {
    return 256u + (uint64_t)(dev ? dev->gemv_grid : 1u) * 8u;
}

static int dgemv_check(const hz_dgemv_args *a, const hz_decode_dev *dev) {
    if (!a || a->nseg == 0 || a->nseg > HZ_MGEMV_MAX_SEGS || a->in == 0)
        return hz_error(HZ_EINVAL, "decode gemv: bad arguments");
    if (a->in > kGemvMaxIn)
        return hz_error(HZ_EUNSUPPORTED, "decode gemv: %u inputs (at most %u)", a->in, kGemvMaxIn);
    for (uint32_t s = 0; s < a->nseg; s++)
        if (!a->seg[s].w || !a->seg[s].y || a->seg[s].rows == 0)
            return hz_error(HZ_EINVAL, "decode gemv: segment %u has no weights, output or rows", s);
    switch (a->x_mode) {
    case HZ_DGEMV_X_PLAIN:
        if (!a->x) return hz_error(HZ_EINVAL, "decode gemv: no x");
        break;
    case HZ_DGEMV_X_RESNORM:
        if (!a->norm_w || (!a->embed && !a->h_in) || (a->embed && !a->step) || (a->shared && (!a->acc || !a->shared_gate)) ||
            (a->h_out && (a->h_out == a->h_in)))
            return hz_error(HZ_EINVAL, "decode gemv: bad residual-norm arguments");
        break;
    case HZ_DGEMV_X_SILU:
        if (!a->g || !a->u) return hz_error(HZ_EINVAL, "decode gemv: no SiLU inputs");
        break;
    default:
        return hz_error(HZ_EINVAL, "decode gemv: x mode %u", a->x_mode);
    }
    if (a->zero && (a->zero == a->acc || (const void *)a->zero == (const void *)a->g || (const void *)a->zero == (const void *)a->u))
        return hz_error(HZ_EINVAL, "decode gemv: the buffer zeroed by block 0 is read by the other blocks");
    if (a->tail != HZ_DGEMV_TAIL_NONE && (!dev || !a->tail_scratch))
        return hz_error(HZ_EINVAL, "decode gemv: a tail needs the device facts and its scratch");
    if (a->tail == HZ_DGEMV_TAIL_ROUTE &&
        (a->seg[0].out_f32 || !a->ids_out || !a->w_out || (a->table && !a->rows_out) || a->top_k == 0 ||
         a->top_k > a->seg[0].rows || a->seg[0].rows > kRouteMaxExperts || a->top_k > kRouteMaxK))
        return hz_error(HZ_EINVAL, "decode gemv: bad router tail (E %u, K %u)", a->seg[0].rows, a->top_k);
    if (a->tail == HZ_DGEMV_TAIL_ARGMAX && (!a->seg[0].out_f32 || !a->argmax_out))
        return hz_error(HZ_EINVAL, "decode gemv: the argmax tail needs FP32 output and a destination");
    if (a->tail > HZ_DGEMV_TAIL_ARGMAX) return hz_error(HZ_EINVAL, "decode gemv: tail %u", a->tail);
    return HZ_OK;
}

/* The 16-byte path needs every vector it reads 16-byte aligned and whole chunks of 8 values. */
static bool dgemv_vec(const hz_dgemv_args *a) {
    bool v = a->in % 8u == 0;
    for (uint32_t s = 0; s < a->nseg; s++) v = v && aligned16(a->seg[s].w);
    if (a->x_mode == HZ_DGEMV_X_PLAIN) v = v && aligned16(a->x);
    if (a->x_mode == HZ_DGEMV_X_SILU) v = v && aligned16(a->g) && aligned16(a->u);
    if (a->x_mode == HZ_DGEMV_X_RESNORM)
        v = v && aligned16(a->embed) && aligned16(a->h_in) && aligned16(a->d) && aligned16(a->acc) &&
            aligned16(a->shared) && aligned16(a->norm_w) && aligned16(a->h_out) && aligned16(a->x_out);
    return v;
}

extern "C" int hz_decode_gemv(const hz_dgemv_args *a, const hz_decode_dev *dev, const hz_klaunch *k) {
    int st = dgemv_check(a, dev);
    if (st) return st;
    if (!k) return hz_error(HZ_EINVAL, "decode gemv: no launch");
    dgemv_params p;
    memset(&p, 0, sizeof p);
    p.a = *a;
    uint64_t total = 0;
    for (uint32_t s = 0; s < a->nseg; s++) {
        p.start[s] = (uint32_t)total;
        total += a->seg[s].rows;
    }
    if (total > 0x7fffffffu) return hz_error(HZ_EINVAL, "decode gemv: %llu rows", (unsigned long long)total);
    for (uint32_t s = a->nseg; s <= HZ_MGEMV_MAX_SEGS; s++) p.start[s] = (uint32_t)total;
    uint64_t blocks = (total + kGemvWarps - 1) / kGemvWarps;
    if (dev && blocks > dev->gemv_grid) blocks = dev->gemv_grid;
    if (a->tail != HZ_DGEMV_TAIL_NONE) {
        uint8_t *t = static_cast<uint8_t *>(a->tail_scratch);
        p.counter = reinterpret_cast<uint32_t *>(t);
        p.bval = reinterpret_cast<float *>(t + 256);
        p.bidx = reinterpret_cast<uint32_t *>(t + 256 + (size_t)dev->gemv_grid * 4u);
    }
    size_t smem = (size_t)((a->in + 7u) & ~7u) * 2u;
    if (a->tail == HZ_DGEMV_TAIL_ROUTE) smem += (size_t)a->seg[0].rows * sizeof(float);
    cudaError_t e = dgemv_vec(a) ? launch(dgemv_kernel<true>, (unsigned)blocks, 1, kGemvThreads, smem, k, p)
                                 : launch(dgemv_kernel<false>, (unsigned)blocks, 1, kGemvThreads, smem, k, p);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the decode GEMV");
}

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

/* ---- graph ------------------------------------------------------------------------------------------ */

extern "C" int hz_decode_graph_begin_capture(void *compute_stream, void **capture_stream) {
    *capture_stream = NULL;
    int st = hz_decode_enter(compute_stream);
    if (st) return st;
    cudaStream_t cs = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamCreateWithFlags (capture stream)");
    /* Thread-local: another thread's unsafe call (a sync, a cudaMalloc) cannot break this capture. */
    e = cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        st = cuda_fail(e, "cudaStreamBeginCapture");
        (void)cudaStreamDestroy(cs);
        return st;
    }
    *capture_stream = cs;
    return HZ_OK;
}

/* The begin node: the graph's only root, a kernel node running begin_kernel. */
static int find_begin(cudaGraph_t graph, cudaGraphNode_t *out, uint32_t *kernels) {
    size_t n = 0;
    cudaError_t e = cudaGraphGetRootNodes(graph, NULL, &n);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphGetRootNodes");
    if (n != 1) return hz_error(HZ_EDEVICE, "decode graph: %zu root nodes, expected the step-begin kernel only", n);
    e = cudaGraphGetRootNodes(graph, out, &n);
    cudaGraphNodeType type;
    if (e == cudaSuccess) e = cudaGraphNodeGetType(*out, &type);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphNodeGetType");
    cudaKernelNodeParams kp = {};
    if (type != cudaGraphNodeTypeKernel || cudaGraphKernelNodeGetParams(*out, &kp) != cudaSuccess ||
        kp.gridDim.x * kp.gridDim.y * kp.gridDim.z != 1u || kp.blockDim.x * kp.blockDim.y * kp.blockDim.z != 1u) {
        (void)cudaGetLastError();
        return hz_error(HZ_EDEVICE, "decode graph: the root node is not the step-begin kernel");
    }
    size_t total = 0;
    e = cudaGraphGetNodes(graph, NULL, &total);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphGetNodes");
    *kernels = (uint32_t)total;
    return HZ_OK;
}

extern "C" int hz_decode_graph_end_capture(void *capture_stream, int ok, hz_decode_graph **out) {
    *out = NULL;
    cudaStream_t cs = static_cast<cudaStream_t>(capture_stream);
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(cs, &graph);
    int st = HZ_OK;
    if (ok && e != cudaSuccess) st = cuda_fail(e, "cudaStreamEndCapture");
    (void)cudaGetLastError();
    (void)cudaStreamDestroy(cs);
    if (!ok || st) {
        if (graph) (void)cudaGraphDestroy(graph);
        return st;
    }
    hz_decode_graph *g = static_cast<hz_decode_graph *>(hz_calloc(1, sizeof *g));
    if (!g) {
        (void)cudaGraphDestroy(graph);
        return HZ_ENOMEM;
    }
    g->graph = graph;
    st = find_begin(graph, &g->begin, &g->kernels);
    if (!st) {
        e = cudaGraphInstantiate(&g->exec, graph, 0);
        if (e != cudaSuccess) st = cuda_fail(e, "cudaGraphInstantiate");
    }
    if (st) {
        hz_decode_graph_destroy(g);
        return st;
    }
    *out = g;
    return HZ_OK;
}

extern "C" int hz_decode_graph_launch(hz_decode_graph *g, int32_t token, uint32_t pos, hz_dstep *d_step,
                                      void *stream) {
    if (!g || !d_step) return hz_error(HZ_EINVAL, "decode graph: NULL argument");
    void *args[3] = {&token, &pos, &d_step};
    cudaKernelNodeParams kp = {};
    kp.func = reinterpret_cast<void *>(begin_kernel);
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args;
    cudaError_t e = cudaGraphExecKernelNodeSetParams(g->exec, g->begin, &kp);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphExecKernelNodeSetParams (step begin)");
    e = cudaGraphLaunch(g->exec, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphLaunch");
    return HZ_OK;
}

extern "C" uint32_t hz_decode_graph_nodes(const hz_decode_graph *g) { return g ? g->kernels : 0; }

extern "C" void hz_decode_graph_destroy(hz_decode_graph *g) {
    if (!g) return;
    if (g->exec) (void)cudaGraphExecDestroy(g->exec);
    if (g->graph) (void)cudaGraphDestroy(g->graph);
    (void)cudaGetLastError();
    free(g);
}
