/* Timing of the non-routed decode kernels (cuda/model/model_ops.cuh) at the real model shapes, with a
 * correctness check of the FP16 GEMV against a host FP64 reference on fresh random data (poisoned
 * output first). Medians of event-timed repeats after warm-up; prints one line per case.
 * Usage: bench_model_ops [repeats] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/fp16.h"

#include "../../../cuda/model/model_ops.cuh"

#define CK(x)                                                                                              \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) {                                                                           \
            printf("FAIL: %s: %s\n", #x, cudaGetErrorString(e_));                                          \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

static uint64_t g_rng = 12345;
static float urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef int (*op_fn)(void *ctx);

static float time_us(op_fn fn, void *ctx, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 20; i++) fn(ctx);
    float *t = malloc(sizeof(float) * (size_t)reps);
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a, 0));
        if (fn(ctx)) {
            printf("FAIL: launch\n");
            exit(1);
        }
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[i], a, b));
    }
    qsort(t, (size_t)reps, sizeof(float), cmp_f);
    float med = t[reps / 2] * 1000.0f;
    free(t);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return med;
}

typedef struct gemv_ctx {
    const uint16_t *x;
    uint32_t in;
    hz_mgemv_seg seg[4];
    uint32_t nseg;
} gemv_ctx;

static int run_gemv(void *p) {
    gemv_ctx *c = p;
    return hz_model_gemv(c->x, c->in, c->seg, c->nseg, NULL);
}

typedef struct attn_ctx {
    const uint16_t *q, *kc, *vc;
    uint16_t *out;
    float *scores;
    uint32_t heads, D, n_pos, stride;
} attn_ctx;

static int run_attn(void *p) {
    attn_ctx *c = p;
    return hz_model_attention(c->q, c->kc, c->vc, c->out, c->scores, c->stride, c->heads, c->heads, c->D, c->n_pos,
                              NULL);
}

static void *dev_random_f16(size_t n, float scale) {
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = hz_f32_to_f16(scale * urand());
    void *d;
    CK(cudaMalloc(&d, n * 2));
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* GEMV rows x in: checks against FP64 on the host, then times. Returns 0 when within tolerance. */
static int gemv_case(const char *name, uint32_t rows, uint32_t in, uint32_t nseg, int reps) {
    size_t wn = (size_t)rows * in;
    uint16_t *hw = malloc(wn * 2), *hx = malloc((size_t)in * 2);
    for (size_t i = 0; i < wn; i++) hw[i] = hz_f32_to_f16(urand() / sqrtf((float)in));
    for (uint32_t i = 0; i < in; i++) hx[i] = hz_f32_to_f16(urand());
    void *w[4], *x, *y[4];
    for (uint32_t s = 0; s < nseg; s++) {
        CK(cudaMalloc(&w[s], wn * 2));
        CK(cudaMemcpy(w[s], hw, wn * 2, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&y[s], (size_t)rows * 4));
        CK(cudaMemset(y[s], 0xff, (size_t)rows * 4)); /* NaN poison */
    }
    CK(cudaMalloc(&x, (size_t)in * 2));
    CK(cudaMemcpy(x, hx, (size_t)in * 2, cudaMemcpyHostToDevice));
    gemv_ctx c = {.x = x, .in = in, .nseg = nseg};
    for (uint32_t s = 0; s < nseg; s++) c.seg[s] = (hz_mgemv_seg){w[s], NULL, y[s], rows, 1};
    if (run_gemv(&c)) {
        printf("FAIL: %s launch\n", name);
        return 1;
    }
    CK(cudaDeviceSynchronize());
    float *hy = malloc((size_t)rows * 4);
    double worst = 0;
    for (uint32_t s = 0; s < nseg; s++) {
        CK(cudaMemcpy(hy, y[s], (size_t)rows * 4, cudaMemcpyDeviceToHost));
        for (uint32_t r = 0; r < rows; r++) {
            double ref = 0, mag = 0;
            for (uint32_t i = 0; i < in; i++) {
                double p = (double)hz_f16_to_f32(hw[(size_t)r * in + i]) * hz_f16_to_f32(hx[i]);
                ref += p;
                mag += fabs(p);
            }
            double err = fabs((double)hy[r] - ref) / (mag > 0 ? mag : 1);
            if (!(err <= worst)) worst = err; /* NaN sticks */
        }
    }
    float us = time_us(run_gemv, &c, reps);
    double bytes = (double)nseg * wn * 2;
    printf("gemv %-22s %6u x %-5u x%u  %8.2f us  %7.1f GB/s  max err/sum|p| %.2e %s\n", name, rows, in, nseg, us,
           bytes / (us * 1e3), worst, worst <= 1e-5 ? "ok" : "FAIL");
    for (uint32_t s = 0; s < nseg; s++) {
        cudaFree(w[s]);
        cudaFree(y[s]);
    }
    cudaFree(x);
    free(hw);
    free(hx);
    free(hy);
    return worst <= 1e-5 ? 0 : 1;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 200;
    if (reps < 10) reps = 10;
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    int bad = 0;
    bad |= gemv_case("dense 2048x2048", 2048, 2048, 1, reps);
    bad |= gemv_case("olmoe qkv (fused x3)", 2048, 2048, 3, reps);
    bad |= gemv_case("olmoe router", 64, 2048, 1, reps);
    bad |= gemv_case("qwen shared gate+up", 5632, 2048, 2, reps);
    bad |= gemv_case("qwen shared down", 2048, 5632, 1, reps);
    bad |= gemv_case("olmoe lm_head", 50304, 2048, 1, reps);
    bad |= gemv_case("qwen lm_head", 151936, 2048, 1, reps);
    for (uint32_t n_pos = 256; n_pos <= 4096; n_pos *= 4) {
        const uint32_t heads = 16, D = 128, ctx = 4096;
        attn_ctx a = {.heads = heads, .D = D, .n_pos = n_pos, .stride = ctx};
        a.q = dev_random_f16((size_t)heads * D, 1.0f);
        a.kc = dev_random_f16((size_t)ctx * heads * D, 1.0f);
        a.vc = dev_random_f16((size_t)ctx * heads * D, 1.0f);
        CK(cudaMalloc((void **)&a.out, (size_t)heads * D * 2));
        CK(cudaMalloc((void **)&a.scores, (size_t)heads * ctx * 4));
        float us = time_us(run_attn, &a, reps);
        printf("attention 16 heads x 128, %4u positions  %8.2f us  %7.1f GB/s (KV read)\n", n_pos, us,
               2.0 * n_pos * heads * D * 2 / (us * 1e3));
        cudaFree((void *)a.q);
        cudaFree((void *)a.kc);
        cudaFree((void *)a.vc);
        cudaFree(a.out);
        cudaFree(a.scores);
    }
    printf(bad ? "bench_model_ops: GEMV check FAILED\n" : "bench_model_ops: OK\n");
    return bad;
}
