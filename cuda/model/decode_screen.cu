/* The greedy pick through an INT8 screen of the lm_head rows (see decode_screen.cuh for the contract
 * and the bound; doc/numerics.md for its derivation). */
#include <cmath>
#include <cstring>

#include "decode_gemv.cuh"
#include "decode_launch.cuh"
#include "decode_screen.cuh"
#include "ops_common.cuh"

namespace {

constexpr int kScreenBatch = 4; /* 16-byte chunks of codes per lane in flight for one row: 2,048 codes per warp */
/* Blocks per SM of the integer path (its launch bound and grid cap): 79 registers. H200, 2026-12-01,
 * the screen alone at OLMoE-1B-7B's lm_head shape (both passes, bench_model_ops --screen): 33.0 us; at
 * four blocks (64 registers, spills) 35.7; with the next row's codes asked for before the current row's
 * sums, 34.6 (two blocks) and 33.6 (three); the FP32 path at two blocks (109 registers) 35.6. */
constexpr int kScreenIntBlocks = 3;
/* The integer path's bound terms (decode_screen.cuh): a level's error in units of sigma, 1/2 + 2^-7
 * (covers 1/2 + P (2u + u^2) for every P <= 32,767), and the relative error of fl(fl(s sigma) fl(t)),
 * 2^-21 (covers 3u + 3u^2 + u^3 over |z|, and over |z| / (1 - 3.01u)). */
constexpr float kLevelErr = 0.5078125f;
constexpr float kProductErr = 0x1p-21f;

/* Floats as unsigned words whose order is the floats' order (-0 just below +0; NaN is never stored). */
__device__ __forceinline__ uint32_t ord_enc(float f) {
    const uint32_t b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float ord_dec(uint32_t e) {
    return __uint_as_float((e & 0x80000000u) ? (e & 0x7fffffffu) : ~e);
}

/* Code k (0..3) of a word of four INT8 codes (each byte already XORed with 0x80, so it holds code + 128),
 * as a float: the byte placed in the significand of 2^23 and 2^23 + 128 taken off, both exact. A byte
 * permute and an add instead of an integer-to-float conversion, whose throughput on sm_90 (16 per clock
 * per multiprocessor) would bound the whole screen. */
__device__ __forceinline__ float code_at(uint32_t biased, int k) {
    return __int_as_float((int)__byte_perm(biased, 0x4B000000u, 0x7440u + (uint32_t)k)) - 8388736.0f;
}

/* 16 INT8 codes times 16 FP16 inputs (x[0..8), pairs in order: code j meets input j), added to acc in
 * FP32 (every product is exact: 8 by 11 significant bits). */
__device__ __forceinline__ float dot16_codes(uint4 codes, const __half2 *x, float acc) {
    const uint32_t cw[4] = {codes.x ^ 0x80808080u, codes.y ^ 0x80808080u, codes.z ^ 0x80808080u,
                            codes.w ^ 0x80808080u};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 a = __half22float2(x[2 * i]), b = __half22float2(x[2 * i + 1]);
        acc = fmaf(code_at(cw[i], 0), a.x, acc);
        acc = fmaf(code_at(cw[i], 1), a.y, acc);
        acc = fmaf(code_at(cw[i], 2), b.x, acc);
        acc = fmaf(code_at(cw[i], 3), b.y, acc);
    }
    return acc;
}

/* The integer path (rows of at most 2,048 values, whose inputs a lane keeps in registers): x is
 * quantized once per step to integers p_j = rint(x_j / sigma), |p_j| <= P, with sigma = max|x| / P
 * rounded up and P chosen so that no sum of `in` products of a code and a p_j can leave int32; then
 * every row is one exact integer dot product t = sum_j q_j p_j, two products per dp2a instruction
 * instead of a conversion, a subtraction and an FMA per code (decode_screen.cuh for the bound). */
__device__ __forceinline__ int screen_levels(uint32_t in) {
    const int p = (int)(0x7fffffffu / (127u * in));
    return p < 32767 ? p : 32767;
}

/* Two inputs as levels (16-bit integers at the step's 1 / sigma, `inv`), packed in one word, a's low. */
__device__ __forceinline__ int pack_levels(float a, float b, float inv, int P) {
    const int pa = max(-P, min(P, __float2int_rn(a * inv))), pb = max(-P, min(P, __float2int_rn(b * inv)));
    return (int)(((uint32_t)pa & 0xffffu) | ((uint32_t)pb << 16));
}

/* 16 INT8 codes (code j in byte j % 4 of word j / 4) times 16 input levels (pairs: xp[2i] holds levels 4i
 * and 4i + 1, xp[2i + 1] levels 4i + 2 and 4i + 3), added to acc: every product and sum exact. */
__device__ __forceinline__ int dot16_levels(uint4 codes, const int *xp, int acc) {
    const int cw[4] = {(int)codes.x, (int)codes.y, (int)codes.z, (int)codes.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        acc = __dp2a_lo(xp[2 * i], cw[i], acc);
        acc = __dp2a_hi(xp[2 * i + 1], cw[i], acc);
    }
    return acc;
}

__device__ __forceinline__ int warp_sum_int(int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_add_sync(0xffffffffu, v);
#else
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
#endif
}

/* sum |x| over the block's staged x, every addition rounded up: never below the exact sum; and, into
 * *xmax, max |x| (NaN left out). */
__device__ float block_abs_sum_up(const uint16_t *xs, uint32_t n, float *red, float *redm, float *xmax) {
    float s = 0.0f, m = 0.0f;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = fabsf(h2f(xs[i]));
        s = __fadd_ru(s, v);
        m = fmaxf(m, v);
    }
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1) {
        s = __fadd_ru(s, __shfl_xor_sync(0xffffffffu, s, o));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    }
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nwarps = blockDim.x / kWarp;
    __syncthreads(); /* red may still be read by an earlier reduction */
    if (lane == 0) {
        red[warp] = s;
        redm[warp] = m;
    }
    __syncthreads();
    if (warp == 0) {
        float r = lane < nwarps ? red[lane] : 0.0f, rm = lane < nwarps ? redm[lane] : 0.0f;
#pragma unroll
        for (int o = kWarp / 2; o > 0; o >>= 1) {
            r = __fadd_ru(r, __shfl_xor_sync(0xffffffffu, r, o));
            rm = fmaxf(rm, __shfl_xor_sync(0xffffffffu, rm, o));
        }
        if (lane == 0) {
            red[kWarp] = r;
            redm[kWarp] = rm;
        }
    }
    __syncthreads();
    *xmax = redm[kWarp];
    return red[kWarp];
}

/* x into shared memory as hz_decode_gemv builds it (PLAIN or RESNORM); block 0 also stores it into
 * x_out. Ends with a barrier. */
__device__ void screen_build_x(const hz_dgemv_args &x, uint16_t *xs, float *red) {
    if (x.x_mode == HZ_DGEMV_X_RESNORM) {
        build_resnorm<true>(x, xs, red, make_uint4(0, 0, 0, 0), false);
    } else {
        for (uint32_t c = threadIdx.x; c < x.in / 8u; c += blockDim.x) {
            const uint4 v = reinterpret_cast<const uint4 *>(x.x)[c];
            reinterpret_cast<uint4 *>(xs)[c] = v;
            if (blockIdx.x == 0 && x.x_out != x.x) reinterpret_cast<uint4 *>(x.x_out)[c] = v;
        }
    }
    __syncthreads();
}

/* Pass 1: every row's screened value and upper bound (ub), and the grid's largest lower bound (best).
 * XREG: a row is one batch (in <= 16 x 32 x kScreenBatch): each lane keeps the levels of its chunks' inputs
 * in registers (the integer path above) for every row. Otherwise the rows are read in batches against
 * x in shared memory, each code converted to FP32. */
template <bool XREG>
__global__ void __launch_bounds__(kGemvThreads, XREG ? kScreenIntBlocks : 4) screen_kernel(const __grid_constant__ hz_dscreen_args a) {
    extern __shared__ __align__(16) uint16_t xs[];
    __shared__ float red[kWarp + 1], redm[kWarp + 1];
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const uint32_t in = a.x.in, chunks = in / 16u, stride = gridDim.x * kGemvWarps;
    uint32_t row = blockIdx.x * kGemvWarps + warp;
    const uint4 *codes = reinterpret_cast<const uint4 *>(a.q);
    uint4 cv[kScreenBatch];
    /* the codes are never written by a step: the first row's are asked for before the wait */
    if (row < a.rows) load_batch(codes + (size_t)row * chunks, 0, lane, chunks, cv);
    griddep_wait();
    griddep_launch();
    screen_build_x(a.x, xs, red);
    float xmax;
    const float x1 = block_abs_sum_up(xs, in, red, redm, &xmax);
    const uint4 *xs4 = reinterpret_cast<const uint4 *>(xs);
    /* the integer path's step: sigma = max|x| / P rounded up (every block computes the same), its
     * inputs' levels, and the per-row terms' common factors */
    int xp[XREG ? 8 * kScreenBatch : 1];
    float sigma = 0.0f, sig_half = 0.0f;
    if (XREG) {
        const int P = screen_levels(in);
        sigma = __fdiv_ru(xmax, (float)P);
        const float inv = (sigma > 0.0f && isfinite(sigma)) ? __frcp_rn(sigma) : 0.0f;
        sig_half = __fmul_ru(sigma, kLevelErr);
#pragma unroll
        for (int u = 0; u < kScreenBatch; u++) {
            const uint32_t c = (uint32_t)u * kWarp + lane;
            const uint4 z = make_uint4(0, 0, 0, 0), x0 = c < chunks ? xs4[2u * c] : z, x1 = c < chunks ? xs4[2u * c + 1u] : z;
            const __half2 *h0 = reinterpret_cast<const __half2 *>(&x0), *h1 = reinterpret_cast<const __half2 *>(&x1);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 f0 = __half22float2(h0[j]), f1 = __half22float2(h1[j]);
                xp[8 * u + j] = pack_levels(f0.x, f0.y, inv, P);
                xp[8 * u + 4 + j] = pack_levels(f1.x, f1.y, inv, P);
            }
        }
    }
    float lmax = -INFINITY;
    while (row < a.rows) {
        const uint32_t next = row + stride;
        const uint4 *c4 = codes + (size_t)row * chunks;
        const float scale = __ldg(a.scale + row), coef = __ldg(a.coef + row);
        float z, e;
        if (XREG) {
            int acc = 0;
#pragma unroll
            for (int u = 0; u < kScreenBatch; u++) acc = dot16_levels(cv[u], xp + 8 * u, acc); /* zeros past the row */
            if (next < a.rows) load_batch(codes + (size_t)next * chunks, 0, lane, chunks, cv);
            const float qn = __ldg(a.qnorm + row);
            z = __fmul_rn(__fmul_rn(scale, sigma), __int2float_rn(warp_sum_int(acc)));
            e = __fadd_ru(__fadd_ru(__fmul_ru(coef, x1), __fmul_ru(qn, sig_half)), __fmul_ru(fabsf(z), kProductErr));
        } else {
            float acc = 0.0f;
            for (uint32_t c0 = 0;;) {
#pragma unroll
                for (int u = 0; u < kScreenBatch; u++) {
                    const uint32_t c = c0 + (uint32_t)u * kWarp + lane;
                    if (c < chunks) acc = dot16_codes(cv[u], reinterpret_cast<const __half2 *>(xs4 + 2u * c), acc);
                }
                c0 += (uint32_t)kScreenBatch * kWarp;
                if (c0 >= chunks) break;
                load_batch(c4, c0, lane, chunks, cv);
            }
            if (next < a.rows) load_batch(codes + (size_t)next * chunks, 0, lane, chunks, cv);
            z = __fmul_rn(scale, warp_sum(acc));
            e = __fmul_ru(coef, x1);
        }
        if (lane == 0) {
            const float lo = __fsub_rd(z, e);
            a.ub[row] = __fadd_ru(z, e);
            if (a.lb) a.lb[row] = lo;
            lmax = fmaxf(lmax, lo); /* a NaN bound is left out (its row is always read again) */
        }
        row = next;
    }
    const float bmax = block_reduce<true>(lmax, red);
    if (threadIdx.x == 0) {
        const unsigned long long tagged = (unsigned long long)__ldcg(&a.x.step->epoch) << 32 | ord_enc(bmax);
        atomicMax(a.best, tagged);
    }
}

/* Pass 2: the rows that can hold the maximum, summed as the decode GEMV sums them; their argmax. */
struct pick_params {
    hz_dscreen_args a;
    uint32_t *counter; /* blocks finished; back to 0 after each launch */
    float *bval;       /* each block's best value and row */
    uint32_t *bidx;
};

__global__ void __launch_bounds__(kGemvThreads) pick_kernel(const __grid_constant__ pick_params p) {
    extern __shared__ __align__(16) uint16_t xs[];
    __shared__ float wv[kGemvWarps];
    __shared__ uint32_t wi[kGemvWarps];
    __shared__ uint32_t last;
    const hz_dscreen_args &a = p.a;
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const uint32_t in = a.x.in, chunks = in / 8u;
    griddep_wait();
    griddep_launch();
    const uint32_t tiles = (a.rows + kWarp - 1u) / kWarp, gw = gridDim.x * kGemvWarps;
    uint32_t t = blockIdx.x * kGemvWarps + warp;
    /* The largest lower bound, this warp's first tile of upper bounds and x are asked for together, and
     * the tile's first row to sum again before x is staged: one round trip less than reading the
     * bounds after x's barrier. */
    const unsigned long long tagged = __ldcg(a.best);
    const uint32_t r0 = t * kWarp + lane;
    const float u0 = (t < tiles && r0 < a.rows) ? __ldcg(a.ub + r0) : 0.0f;
    /* a word from another step (never expected: the screen ran just before) lets every row through */
    const float m = (uint32_t)(tagged >> 32) == __ldcg(&a.x.step->epoch) ? ord_dec((uint32_t)tagged) : -INFINITY;
    /* the rows of tile t whose upper bound reaches m (NaN bounds are read again) */
    uint32_t mask = __ballot_sync(0xffffffffu, t < tiles && r0 < a.rows && !(u0 < m));
    uint4 wb[kBatch];
    uint32_t row = kNoIndex;
    const uint4 *w4 = nullptr;
    const auto next_row = [&]() { /* the lowest row left in mask, its first batch asked for */
        row = t * kWarp + (uint32_t)(__ffs(mask) - 1);
        mask &= mask - 1u;
        w4 = reinterpret_cast<const uint4 *>(a.w + (size_t)row * in);
        load_batch(w4, 0, lane, chunks, wb);
    };
    if (mask) next_row();
    for (uint32_t c = threadIdx.x; c < chunks; c += blockDim.x)
        reinterpret_cast<uint4 *>(xs)[c] = __ldcg(reinterpret_cast<const uint4 *>(a.x.x_out) + c);
    __syncthreads();
    const uint4 *xs4 = reinterpret_cast<const uint4 *>(xs);
    float best = -INFINITY;
    uint32_t bi = kNoIndex;
    unsigned long long summed = 0;
    while (t < tiles) {
        while (row != kNoIndex) {
            /* hz_decode_gemv's row: batches of kBatch chunks per lane, fmaf in chunk order, the xor
             * butterfly, + 0 (no bias); rows ascend within the warp */
            const float v = warp_sum(sum_row(w4, wb, xs4, lane, chunks)) + 0.0f;
            if (argmax_better(v, row, best, bi)) {
                best = v;
                bi = row;
            }
            summed++;
            row = kNoIndex;
            if (mask) next_row();
        }
        t += gw;
        if (t >= tiles) break;
        const uint32_t r = t * kWarp + lane;
        mask = __ballot_sync(0xffffffffu, r < a.rows && !(__ldcg(a.ub + r) < m));
        if (mask) next_row();
    }
    if (a.summed && lane == 0 && summed) atomicAdd(a.summed, summed);
    bi = block_argmax(best, bi, wv, wi);
    if (threadIdx.x == 0) {
        float v = -INFINITY; /* the winner's value: its warp's entry (a row is summed by one warp only) */
        for (uint32_t w = 0; w < kGemvWarps; w++)
            if (bi != kNoIndex && wi[w] == bi) v = wv[w];
        p.bval[blockIdx.x] = v;
        p.bidx[blockIdx.x] = bi;
    }
    /* The last block to finish sees every other block's best (fence before the ticket, fence after). */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(p.counter, 1u) == gridDim.x - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    bi = argmax_of_blocks(p.bval, p.bidx, gridDim.x, wv, wi);
    if (threadIdx.x == 0) {
        *a.argmax_out = (int32_t)bi;
        if (a.argmax_host) *a.argmax_host = (int32_t)bi; /* visible to the host once the grid completes */
        if (a.summed && a.summed_host) *a.summed_host = __ldcg(a.summed); /* every block added before its ticket */
        if (a.value_out) { /* the winner's value: its block's entry */
            for (uint32_t b = 0; b < gridDim.x; b++)
                if (__ldcg(p.bidx + b) == bi) *a.value_out = __ldcg(p.bval + b);
        }
        /* Every block read *best before its ticket: cleared for the next step, so that its tag never
         * has to outgrow an older one (the 32-bit epoch wraps after 2^32 steps) */
        *a.best = 0;
        *p.counter = 0; /* ready for the next launch */
    }
}

/* One warp per row: s = max|w| / 127, codes rint(w / s), coef and qnorm (decode_screen.cuh). */
__global__ void prepare_kernel(const uint16_t *w, uint32_t rows, uint32_t in, int8_t *q, float *scale, float *coef,
                               float *qnorm, float factor) {
    const uint32_t lane = threadIdx.x % kWarp;
    const uint32_t row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    if (row >= rows) return;
    const uint16_t *wr = w + (size_t)row * in;
    int8_t *qr = q + (size_t)row * in;
    float m = 0.0f;
    bool finite = true;
    for (uint32_t j = lane; j < in; j += kWarp) {
        const float v = fabsf(h2f(wr[j]));
        finite = finite && isfinite(v);
        m = fmaxf(m, v);
    }
    m = warp_max(m);
    finite = __all_sync(0xffffffffu, finite);
    float s = 0.0f, d = 0.0f, cf, qn = 0.0f;
    if (!finite || m == 0.0f) {
        for (uint32_t j = lane; j < in; j += kWarp) qr[j] = 0;
        cf = finite ? 0.0f : INFINITY;
    } else {
        s = m / 127.0f;
        int qa = 0; /* sum |q_j|: at most 127 x 16,384, exact as an int and as a float */
        for (uint32_t j = lane; j < in; j += kWarp) {
            const float v = h2f(wr[j]);
            const float c = fminf(127.0f, fmaxf(-127.0f, rintf(v / s)));
            qr[j] = (int8_t)c;
            qa += abs((int)c);
            d = fmaxf(d, fabsf(fmaf(-s, c, v)));
        }
        d = warp_max(d);
        cf = __fadd_ru(__fmul_ru(d, 1.0f + 0x1p-20f), __fmul_ru(m, factor));
        qn = __fmul_ru(s, (float)warp_sum_int(qa));
    }
    if (lane == 0) {
        scale[row] = s;
        coef[row] = cf;
        qnorm[row] = qn;
    }
}

} // namespace

/* ---- launch functions ------------------------------------------------------------------------------ */

extern "C" int hz_decode_screen_supported(uint32_t in) { return in > 0 && in % 16u == 0 && in <= kGemvMaxIn; }

extern "C" float hz_decode_screen_rounding_factor(uint32_t in) {
    const double u = std::ldexp(1.0, -24), nu = (double)in * u;
    const double want = 2.01 * (nu / (1.0 - nu) + u);
    float f = (float)want;
    if ((double)f < want) f = std::nextafter(f, INFINITY);
    return f;
}

extern "C" int hz_decode_screen_prepare(const uint16_t *w, uint32_t rows, uint32_t in, int8_t *q, float *scale,
                                        float *coef, float *qnorm, void *stream) {
    if (!w || !q || !scale || !coef || !qnorm || rows == 0)
        return hz_error(HZ_EINVAL, "lm_head screen: NULL argument or no rows");
    if (!hz_decode_screen_supported(in))
        return hz_error(HZ_EUNSUPPORTED, "lm_head screen: rows of %u values (a multiple of 16 up to %u)", in, kGemvMaxIn);
    const unsigned warps = 8, blocks = (unsigned)((rows + warps - 1u) / warps);
    prepare_kernel<<<blocks, warps * kWarp, 0, static_cast<cudaStream_t>(stream)>>>(
        w, rows, in, q, scale, coef, qnorm, hz_decode_screen_rounding_factor(in));
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the lm_head screen's preparation");
}

extern "C" int hz_decode_screen(const hz_dscreen_args *a, const hz_decode_dev *dev, const hz_klaunch *k) {
    if (!a || !dev || !k) return hz_error(HZ_EINVAL, "lm_head screen: NULL argument");
    if (!a->w || !a->q || !a->scale || !a->coef || !a->qnorm || !a->ub || !a->best || !a->argmax_out || !a->tail_scratch ||
        !a->x.x_out || !a->x.step || a->rows == 0 || a->rows > 0x7fffffffu)
        return hz_error(HZ_EINVAL, "lm_head screen: a buffer is missing or %u rows", a->rows);
    if (!hz_decode_screen_supported(a->x.in))
        return hz_error(HZ_EUNSUPPORTED, "lm_head screen: rows of %u values (a multiple of 16 up to %u)", a->x.in,
                        kGemvMaxIn);
    if (a->x.x_mode != HZ_DGEMV_X_PLAIN && a->x.x_mode != HZ_DGEMV_X_RESNORM)
        return hz_error(HZ_EUNSUPPORTED, "lm_head screen: x mode %u (plain or residual norm)", a->x.x_mode);
    if (!aligned16(a->w) || !aligned16(a->q) || !aligned16(a->x.x_out) ||
        (a->x.x_mode == HZ_DGEMV_X_PLAIN && !aligned16(a->x.x)))
        return hz_error(HZ_EINVAL, "lm_head screen: rows, codes and x must be 16-byte aligned");
    /* the x arguments are checked as the GEMV checks them, for a GEMV of these rows without a tail */
    hz_dgemv_args xc = a->x;
    memset(xc.seg, 0, sizeof xc.seg);
    xc.seg[0].w = a->w;
    xc.seg[0].y = a->ub;
    xc.seg[0].rows = a->rows;
    xc.seg[0].out_f32 = 1;
    xc.nseg = 1;
    xc.tail = HZ_DGEMV_TAIL_NONE;
    xc.ready = NULL;
    xc.tags = NULL;
    xc.zero = NULL;
    int st = dgemv_check(&xc, dev);
    if (st) return hz_error_prefix(st, "lm_head screen");
    /* x must be built as the GEMV builds it on its vector path (which the pick's sums and the logits on
     * demand repeat): every input 16-byte aligned */
    if (!dgemv_vec(&xc))
        return hz_error(HZ_EINVAL, "lm_head screen: the inputs of x must be 16-byte aligned (the GEMV's vector path)");
    hz_dscreen_args sa = *a;
    sa.x = xc;
    sa.x.seg[0].y = NULL; /* not written */
    uint64_t blocks = (a->rows + kGemvWarps - 1u) / kGemvWarps;
    if (blocks > dev->gemv_grid) blocks = dev->gemv_grid;
    const size_t smem = (size_t)a->x.in * 2u;
    /* rows of up to 2,048 values keep their inputs' levels in registers and take the integer path */
    const bool xreg = a->x.in <= 16u * kWarp * kScreenBatch;
    if (xreg && blocks > (uint64_t)kScreenIntBlocks * dev->sms) blocks = (uint64_t)kScreenIntBlocks * dev->sms;
    cudaError_t e = xreg ? launch(screen_kernel<true>, (unsigned)blocks, 1, kGemvThreads, smem, k, sa)
                         : launch(screen_kernel<false>, (unsigned)blocks, 1, kGemvThreads, smem, k, sa);
    if (e != cudaSuccess) return cuda_fail(e, "launch of the lm_head screen");
    pick_params p;
    memset(&p, 0, sizeof p);
    p.a = sa;
    uint8_t *t = static_cast<uint8_t *>(a->tail_scratch);
    p.counter = reinterpret_cast<uint32_t *>(t);
    p.bval = reinterpret_cast<float *>(t + 256);
    p.bidx = reinterpret_cast<uint32_t *>(t + 256 + (size_t)dev->gemv_grid * 4u);
    const uint64_t tiles = (a->rows + kWarp - 1u) / kWarp;
    uint64_t pblocks = (tiles + kGemvWarps - 1u) / kGemvWarps;
    if (pblocks > dev->gemv_grid) pblocks = dev->gemv_grid;
    e = launch(pick_kernel, (unsigned)pblocks, 1, kGemvThreads, smem, k, p);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the lm_head pick");
}
