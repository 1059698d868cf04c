/* Device pieces of the decode GEMV shared by its two kernels: the general GEMV (decode_ops.cu) and the
 * router GEMV run as one thread-block cluster (decode_router.cu). The row loads in batches of 16-byte
 * chunks and the residual add + RMSNorm that builds x, so that both kernels compute bit-identical
 * values; and, host side, the checks of their arguments. Internal to each translation unit (anonymous namespace). */
#ifndef HZ_CUDA_MODEL_DECODE_GEMV_CUH
#define HZ_CUDA_MODEL_DECODE_GEMV_CUH

#include "decode_gate.cuh"
#include "decode_launch.cuh"
#include "decode_ops.cuh"
#include "ops_common.cuh"

namespace {

constexpr int kGemvWarps = 8;          /* 256-thread blocks, one row per warp at a time */
constexpr int kGemvThreads = kGemvWarps * kWarp;
constexpr int kBatch = 8;              /* 16-byte chunks per lane in flight for one row */
constexpr uint32_t kGemvMaxIn = 16384; /* x staged in shared memory: 32 KB */

/* Issues the loads of chunks c0 + u*32 + lane (u < B) of one row; past the row: zeros. */
template <int B>
__device__ __forceinline__ void load_batch(const uint4 *w4, uint32_t c0, uint32_t lane, uint32_t chunks,
                                           uint4 (&wv)[B]) {
#pragma unroll
    for (int u = 0; u < B; u++) {
        const uint32_t c = c0 + (uint32_t)u * kWarp + lane;
        wv[u] = c < chunks ? ld_stream(w4 + c) : make_uint4(0, 0, 0, 0);
    }
}

/* A lane's row sum runs as two FMA chains, the even and the odd values of each 16-byte chunk, added
 * once at the end. One chain of 64 dependent FMAs was the router cluster's row (about 1,000 cycles,
 * clock64 in block 0; H200, 2026-12-02). Two chains: OLMoE step 0.566-0.567 -> 0.560-0.561 ms at
 * positions 32-96; four spilled in the general GEMV (8 bytes at its 64-register cap) and were slower
 * than two (doc/benchmarks.md, forty-sixth round).
 * dot8_split is ops_common.cuh's dot8 with two accumulators: eight FP16 weights times eight FP16
 * activations in FP32, values 0, 2, 4, 6 into even, 1, 3, 5, 7 into odd. */
__device__ __forceinline__ void dot8_split(uint4 w, uint4 x, float &even, float &odd) {
    const __half2 *wh = reinterpret_cast<const __half2 *>(&w);
    const __half2 *xh = reinterpret_cast<const __half2 *>(&x);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 a = __half22float2(wh[i]), b = __half22float2(xh[i]);
        even = fmaf(a.x, b.x, even);
        odd = fmaf(a.y, b.y, odd);
    }
}

template <int B>
__device__ __forceinline__ void fma_batch(const uint4 (&wv)[B], const uint4 *xs4, uint32_t c0, uint32_t lane,
                                          uint32_t chunks, float &even, float &odd) {
#pragma unroll
    for (int u = 0; u < B; u++) {
        const uint32_t c = c0 + (uint32_t)u * kWarp + lane;
        if (c < chunks) dot8_split(wv[u], xs4[c], even, odd);
    }
}

/* One row's FP32 lane sum against x, its first batch already in wv (loaded ahead): the lane's chunks in
 * order into the two chains (dot8_split), then even + odd; each later batch loaded once the one before
 * is summed. The decode GEMV, the router cluster and the screen's pick all sum a row this way, so the
 * pick's values are the GEMV's bit for bit (and tests/unit/model/gemv_host_sum.h repeats it on the
 * host). */
template <int B>
__device__ __forceinline__ float sum_row(const uint4 *w4, uint4 (&wv)[B], const uint4 *xs4, uint32_t lane,
                                         uint32_t chunks) {
    float even = 0.0f, odd = 0.0f;
    for (uint32_t c0 = 0;;) {
        fma_batch(wv, xs4, c0, lane, chunks, even, odd);
        c0 += (uint32_t)B * kWarp;
        if (c0 >= chunks) break;
        load_batch(w4, c0, lane, chunks, wv);
    }
    return even + odd;
}

/* h = src (+ delta) for one element, formula for formula as forward.c (doc/numerics.md). */
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

/* The norm weights' chunk `threadIdx.x` (VEC, RESNORM; zeros otherwise), loaded before the kernel's
 * dependency wait: weights are never written by a step, and build_resnorm then multiplies by them
 * right after its reduction instead of starting another round trip to L2 there. Kernel timeline
 * (H200, 2026-11-30, OLMoE step): the router's prologue 1.46 -> 1.17 us, the q/k/v GEMV's 3.53 ->
 * 3.34. Only the router cluster takes it: in the general GEMV (64 registers per thread) the chunk
 * spilled, and the step was slower (0.650 -> 0.656 ms at positions 32-96). */
template <bool VEC>
__device__ __forceinline__ uint4 norm_w_first(const hz_dgemv_args &a) {
    if (!VEC || a.x_mode != HZ_DGEMV_X_RESNORM || threadIdx.x >= a.in / 8u) return make_uint4(0, 0, 0, 0);
    return __ldg(reinterpret_cast<const uint4 *>(a.norm_w) + threadIdx.x);
}

/* x = the residual add + RMSNorm of the arguments into xs (FP16), every block alike; block 0 also
 * stores h and x. VEC: 8 consecutive values per thread with 16-byte loads; nw0: norm_w_first, used
 * where have_nw0. */
template <bool VEC>
__device__ void build_resnorm(const hz_dgemv_args &a, uint16_t *xs, float *red, uint4 nw0, bool have_nw0) {
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
            const uint4 wv = have_nw0 && c == threadIdx.x ? nw0 : reinterpret_cast<const uint4 *>(a.norm_w)[c];
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

/* The host copy of a router's selection that the arguments ask for (hz_dgemv_args.host_*). */
__device__ __forceinline__ RouteHost route_host(const hz_dgemv_args &a) {
    RouteHost h;
    if (a.host_tag_out) {
        h.ids = a.host_ids;
        h.w = a.host_w;
        h.tag_out = a.host_tag_out;
        h.tag = a.host_tag_epoch ? (uint64_t)__ldcg(&a.step->epoch) << 16 | a.host_tag : a.host_tag;
    }
    return h;
}

/* ---- host side ---------------------------------------------------------------------------------- */

/* The arguments of a decode GEMV launch, with a status and message naming what is wrong. */
inline int dgemv_check(const hz_dgemv_args *a, const hz_decode_dev *dev) {
    if (!a || a->nseg == 0 || a->nseg > HZ_MGEMV_MAX_SEGS || a->in == 0)
        return hz_error(HZ_EINVAL, "decode gemv: bad arguments");
    if (a->in > kGemvMaxIn)
        return hz_error(HZ_EUNSUPPORTED, "decode gemv: %u inputs (at most %u)", a->in, kGemvMaxIn);
    for (uint32_t s = 0; s < a->nseg; s++)
        if (!a->seg[s].w || !a->seg[s].y || a->seg[s].rows == 0)
            return hz_error(HZ_EINVAL, "decode gemv: segment %u has no weights, output or rows", s);
    if ((a->host_ids || a->host_w || a->host_tag_out) &&
        (!a->host_ids || !a->host_w || !a->host_tag_out || a->tail != HZ_DGEMV_TAIL_ROUTE))
        return hz_error(HZ_EINVAL, "decode gemv: the host copy of the routing needs ids, weights and a tag word, "
                                   "and the router tail");
    if (a->gate_on) {
        if (!a->host_tag_out || a->ready || a->gate.n != a->top_k || (a->gate.table && a->gate.ids != a->ids_out))
            return hz_error(HZ_EINVAL, "decode gemv: the experts' gate in the router needs the host copy of the "
                                       "routing, no ready flags, top_k rows and the router's ids");
        const int gst = gate_args_check(&a->gate);
        if (gst) return hz_error_prefix(gst, "decode gemv");
    }
    if (a->host_tag_epoch && (!a->host_tag_out || !a->step || a->host_tag > 0xffffu))
        return hz_error(HZ_EINVAL, "decode gemv: a tag from the step's epoch needs the tag word, the step and a "
                                   "tag below 65536");
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
    if (a->ready && (a->tail != HZ_DGEMV_TAIL_ROUTE || !a->step))
        return hz_error(HZ_EINVAL, "decode gemv: ready flags need the router tail and the step");
    if (a->tags && (a->tail != HZ_DGEMV_TAIL_ROUTE || !a->step || a->seg[0].out_f32))
        return hz_error(HZ_EINVAL, "decode gemv: router tags need the router tail, the step and FP16 logits");
    if (a->tail == HZ_DGEMV_TAIL_ARGMAX && (!a->seg[0].out_f32 || !a->argmax_out))
        return hz_error(HZ_EINVAL, "decode gemv: the argmax tail needs FP32 output and a destination");
    if (a->tail > HZ_DGEMV_TAIL_ARGMAX) return hz_error(HZ_EINVAL, "decode gemv: tail %u", a->tail);
    return HZ_OK;
}

/* The 16-byte path needs every vector it reads 16-byte aligned and whole chunks of 8 values. */
inline bool dgemv_vec(const hz_dgemv_args *a) {
    bool v = a->in % 8u == 0;
    for (uint32_t s = 0; s < a->nseg; s++) v = v && aligned16(a->seg[s].w);
    if (a->x_mode == HZ_DGEMV_X_PLAIN) v = v && aligned16(a->x);
    if (a->x_mode == HZ_DGEMV_X_SILU) v = v && aligned16(a->g) && aligned16(a->u);
    if (a->x_mode == HZ_DGEMV_X_RESNORM)
        v = v && aligned16(a->embed) && aligned16(a->h_in) && aligned16(a->d) && aligned16(a->acc) &&
            aligned16(a->shared) && aligned16(a->norm_w) && aligned16(a->h_out) && aligned16(a->x_out);
    return v;
}

} // namespace

#endif
