/* The scalar W4A16 executor (see w4a16_scalar.cuh). Each kernel is written to be read: it decodes a
 * weight the way format/qpack.h defines it and does one FP32 multiply-add per weight. */
#include "w4a16_device.cuh"
#include "w4a16_scalar.cuh"

namespace {

constexpr int kGemvWarps = 8; /* one warp per output row */

/* out[row] = sum_i ((code(row, i) - 8) * scale(row, i / 256)) * x[i] for i < k, FP32. The blob comes
 * from `blob` or, when that is NULL, from blobs_dev[e]. */
__global__ void __launch_bounds__(kGemvWarps * 32)
    hz_scalar_gemv(const uint8_t *blob, const uint8_t *const *blobs_dev, int e, uint64_t q_off, uint64_t s_off,
                   uint32_t rows, uint32_t k, uint32_t kp, const __half *x, float *out) {
    const uint32_t lane = threadIdx.x & 31u;
    const uint32_t row = blockIdx.x * kGemvWarps + (threadIdx.x >> 5);
    if (row >= rows) return;
    if (!blob) blob = blobs_dev[e];
    const uint8_t *q = blob + q_off + (uint64_t)row * (kp / 2u);
    const __half *s = reinterpret_cast<const __half *>(blob + s_off) + (uint64_t)row * (kp / HZ_QBLOCK);
    float acc = 0.0f;
    for (uint32_t c = lane; c < kp / HZ_QCHUNK; c += 32u) {
        const uint4 v = *reinterpret_cast<const uint4 *>(q + 16u * c);
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
        const float scale = __half2float(s[(HZ_QCHUNK * c) / HZ_QBLOCK]);
        for (uint32_t i = 0; i < 16u; i++) {
            const uint32_t byte = (words[i / 4u] >> (8u * (i % 4u))) & 0xffu;
            const uint32_t v0 = HZ_QCHUNK * c + i, v1 = v0 + 16u; /* low nibble, high nibble */
            if (v0 < k) acc = fmaf((float)((int)(byte & 15u) - 8) * scale, __half2float(x[v0]), acc);
            if (v1 < k) acc = fmaf((float)((int)(byte >> 4) - 8) * scale, __half2float(x[v1]), acc);
        }
    }
    acc = hz_warp_sum(acc);
    if (lane == 0) out[row] = acc;
}

/* a[i] = fp16(silu(g[i]) * u[i]) for i < inter, 0 up to kp. */
__global__ void hz_scalar_act(const float *g, const float *u, uint32_t inter, uint32_t kp, __half *a) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= kp) return;
    a[i] = i < inter ? __float2half_rn(hz_silu_mul(g[i], u[i])) : __float2half_rn(0.0f);
}

/* s = acc[j] (or 0) + sum_e w[e] * ye[e][j] in the given expert order; then acc[j] = s, y[j] = fp16(s). */
__global__ void hz_scalar_combine(const float *ye, const float *w, uint32_t n, uint32_t hidden, __half *y,
                                  float *acc) {
    const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= hidden) return;
    float s = acc ? acc[j] : 0.0f;
    for (uint32_t e = 0; e < n; e++) s += w[e] * ye[(uint64_t)e * hidden + j];
    if (acc) acc[j] = s;
    if (y) y[j] = __float2half_rn(s);
}

uint64_t align256(uint64_t v) { return (v + 255u) / 256u * 256u; }

} // namespace

extern "C" int hz_w4a16_scalar_launch(const hz_w4a16_args *a, void *stream) {
    static const char who[] = "w4a16 scalar";
    const uint64_t need = hz_w4a16_scalar_scratch_bytes(a ? a->layout : NULL, a ? a->n : 0);
    int st = hz_w4a16_args_check(a, need, who);
    if (st != HZ_OK) return st;
    const hz_expert_layout *l = a->layout;
    cudaStream_t s = static_cast<cudaStream_t>(stream);

    uint8_t *scratch = static_cast<uint8_t *>(a->scratch);
    __half *inter = reinterpret_cast<__half *>(scratch);
    float *g = reinterpret_cast<float *>(scratch + align256((uint64_t)a->n * l->down.kp * 2u));
    float *u = reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(g) + align256((uint64_t)l->inter * 4u));
    float *ye = reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(u) + align256((uint64_t)l->inter * 4u));
    const uint8_t *const *dev = reinterpret_cast<const uint8_t *const *>(a->blobs_dev);
    const __half *x = static_cast<const __half *>(a->x);

    const unsigned gemv_threads = kGemvWarps * 32;
    for (uint32_t e = 0; e < a->n; e++) {
        const uint8_t *blob = a->blobs ? static_cast<const uint8_t *>(a->blobs[e]) : NULL;
        __half *ae = inter + (uint64_t)e * l->down.kp;
        const unsigned gi = (l->inter + kGemvWarps - 1) / kGemvWarps;
        hz_scalar_gemv<<<gi, gemv_threads, 0, s>>>(blob, dev, (int)e, l->gate_q, l->gate_s, l->inter, l->hidden,
                                                   l->gate.kp, x, g);
        hz_scalar_gemv<<<gi, gemv_threads, 0, s>>>(blob, dev, (int)e, l->up_q, l->up_s, l->inter, l->hidden,
                                                   l->up.kp, x, u);
        hz_scalar_act<<<(l->down.kp + 255) / 256, 256, 0, s>>>(g, u, l->inter, l->down.kp, ae);
        const unsigned gh = (l->hidden + kGemvWarps - 1) / kGemvWarps;
        hz_scalar_gemv<<<gh, gemv_threads, 0, s>>>(blob, dev, (int)e, l->down_q, l->down_s, l->hidden, l->inter,
                                                   l->down.kp, ae, ye + (uint64_t)e * l->hidden);
    }
    hz_scalar_combine<<<(l->hidden + 255) / 256, 256, 0, s>>>(ye, a->weights, a->n, l->hidden,
                                                              static_cast<__half *>(a->y), a->acc);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return hz_cuda_fail(e, who, "kernel launch");
    return HZ_OK;
}
