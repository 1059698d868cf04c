/* Timing of the non-routed decode kernels at the real model shapes, with correctness checks, and of
 * whole decode steps.
 *
 *   bench_model_ops [repeats]
 *     device ceiling: device-to-device copy bandwidth (read + write) measured in the same run;
 *     GEMV: the decode GEMV (cuda/model/decode_ops.cuh), the older hz_model_gemv and cuBLAS
 *       (cublasGemmEx, N = 1, FP16 in, FP32 compute and out) on the same shapes, each checked against a
 *       host FP64 reference on fresh random data (outputs poisoned first) and timed two ways:
 *         single: median of event-timed single launches (launch latency included),
 *         graph:  20 launches captured in one CUDA graph (the decode GEMV with programmatic dependent
 *                 launch, as in the decode step), per-launch mean, median over replays;
 *       weights rotate over enough copies to exceed the L2 cache, so every launch streams from HBM.
 *       The "pick" line says which of custom and cuBLAS measured faster in a graph.
 *     argmax tail: an lm_head-shaped GEMV whose largest row is duplicated further down: the tail must
 *       return the lower row, and the argmax of the logits it wrote.
 *     attention: the split decode attention against a host FP64 reference (default splits and 1) and
 *       timed against the older one-block-per-head kernel, KV rotated past the L2 cache.
 *   bench_model_ops --attention-check
 *     the attention's checks above alone (1 to 4,096 positions, every split and group setting), untimed
 *     and without cuBLAS: what compute-sanitizer runs on the full-size head_dim of 128.
 *   bench_model_ops --screen [repeats]
 *     the lm_head's greedy pick at OLMoE-1B-7B's and Qwen1.5-MoE-A2.7B's shapes (50,304 and 151,936 rows
 *     of 2,048, random weights): the argmax GEMV against the screen (cuda/model/decode_screen.cuh, its
 *     two kernels), each in a graph as time_graph launches them, with the bytes each reads against the
 *     device-to-device copy ceiling measured in the same run; both must pick the same row.
 *   bench_model_ops --step olmoe|qwen [experts] [steps]
 *     writes a random model with the full-size layer shapes of OLMoE-1B-7B or Qwen1.5-MoE-A2.7B
 *     (all layers, hidden, heads, vocab, expert widths; `experts` routed experts per layer, default
 *     16, top-k as published, so the bytes a token reads are the published model's), opens it on
 *     cuda:0 at full residency with the grouped executor, and times greedy decode steps through the
 *     public API (graph + PDL, eager + PDL, eager) near position 64 and near position 1024; then the
 *     non-routed kernels of one step at those shapes (each in a graph, times the layer count) to
 *     split the step into non-routed kernels and the rest (routed experts, launch gaps, host).
 *     Each mode prints a hash of the greedy tokens it produced (FNV-1a): equal hashes, equal tokens.
 *     HZ_BENCH_GRAPH_ONLY=1 times the graph mode only and skips the breakdown. HZ_BENCH_LAYERS=N
 *     builds the model with N layers instead of the preset's. HZ_BENCH_SWEEP=
 *     NAME=v1,v2,... instead times the graph mode once per value, with the environment variable NAME
 *     set to it before the session (and its graph) is made: run-time knobs compared in one process
 *     on one model. HZ_BENCH_MODEL=path opens that artifact instead of writing one (hz-bench's own,
 *     from scripts/bench --steps models; it must have the preset's shape), HZ_BENCH_MAX_CONTEXT=N makes
 *     sessions of N positions instead of 2048 (hz-bench's are 255; the steps near 1024 are then
 *     skipped).
 *     Built with -Dtimeline=true (cuda/timeline.h), the graph mode also runs 20 steps after positions
 *     32..96 with the kernel timeline armed and prints, per kernel role, when launches were placed,
 *     became ready and ended against what they depend on (doc/benchmarks.md, sixth round), and for
 *     the GEMVs the same per block, split into blocks placed before their dependency ended and after
 *     (ninth round).
 * Exit status 0 when every check passed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/core.h"
#include "core/fp16.h"
#include "format/artifact.h"
#include "format/hfconfig.h"
#include "format/qpack.h"
#include "horizon/horizon.h"
#include "model/forward_cuda.h"

#include "../../../cuda/model/decode_ops.cuh"
#include "../../../cuda/model/decode_screen.cuh"
#include "../../../cuda/model/model_ops.cuh"
#include "../../../cuda/timeline.h"

#define CK(x)                                                                                              \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) {                                                                           \
            printf("FAIL: %s: %s\n", #x, cudaGetErrorString(e_));                                          \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

#define ROTATE_BYTES (256ull << 20) /* weights / KV per case: past the H200's 50 MB L2 */
#define GRAPH_OPS 20

static uint64_t g_rng = 12345;
static float urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float median(float *t, int n) {
    qsort(t, (size_t)n, sizeof(float), cmp_f);
    return t[n / 2];
}

static cudaStream_t g_stream;
static hz_decode_dev g_dev;
static cublasHandle_t g_blas;
static double g_copy_gbs;

/* One operation under test: i selects the rotation copy. */
typedef int (*op_fn)(void *ctx, int i, cudaStream_t s);

/* Median of event-timed single launches, microseconds. */
static float time_single(op_fn fn, void *ctx, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 10; i++)
        if (fn(ctx, i, g_stream)) return -1;
    float *t = malloc(sizeof(float) * (size_t)reps);
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a, g_stream));
        if (fn(ctx, i, g_stream)) return -1;
        CK(cudaEventRecord(b, g_stream));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[i], a, b));
    }
    float med = median(t, reps) * 1000.0f;
    free(t);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return med;
}

/* GRAPH_OPS launches (rotating copies) captured in one graph; per-launch mean of each replay,
 * median over replays, microseconds. -1 when the capture failed. */
static float time_graph(op_fn fn, void *ctx, int reps) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    int bad = 0;
    for (int i = 0; i < GRAPH_OPS && !bad; i++) bad = fn(ctx, i, g_stream);
    cudaError_t e = cudaStreamEndCapture(g_stream, &graph);
    if (bad || e != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        printf("  (graph capture failed: %s)\n", bad ? hz_last_error_message() : cudaGetErrorString(e));
        (void)cudaGetLastError();
        if (graph) cudaGraphDestroy(graph);
        return -1;
    }
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(exec, g_stream));
    int n = reps / 4 > 5 ? reps / 4 : 5;
    float *t = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) {
        CK(cudaEventRecord(a, g_stream));
        CK(cudaGraphLaunch(exec, g_stream));
        CK(cudaEventRecord(b, g_stream));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[i], a, b));
    }
    float med = median(t, n) * 1000.0f / GRAPH_OPS;
    free(t);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    return med;
}

static void *dev_random_f16(size_t n, float scale, float base) {
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = hz_f32_to_f16(base + scale * urand());
    void *d;
    CK(cudaMalloc(&d, n * 2));
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* Device-to-device copy bandwidth (bytes read + written per second), median of 7. */
static double copy_ceiling(void) {
    const size_t n = 512u << 20;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemset(a, 1, n));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float t[7];
    for (int i = 0; i < 9; i++) {
        CK(cudaEventRecord(e0, g_stream));
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, g_stream));
        CK(cudaEventRecord(e1, g_stream));
        CK(cudaEventSynchronize(e1));
        if (i >= 2) CK(cudaEventElapsedTime(&t[i - 2], e0, e1));
    }
    cudaFree(a);
    cudaFree(b);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return 2.0 * (double)n / (median(t, 7) * 1e-3) / 1e9;
}

/* ---- GEMV ------------------------------------------------------------------------------------------ */

typedef struct gemv_ctx {
    uint32_t rows, in, nseg, copies;
    uint16_t **w; /* [copies] each nseg x rows x in (segments contiguous) */
    uint16_t *x;
    float *y;     /* nseg x rows FP32 */
    int pdl;
} gemv_ctx;

static int run_custom(void *p, int i, cudaStream_t s) {
    gemv_ctx *c = p;
    hz_dgemv_args a;
    memset(&a, 0, sizeof a);
    a.nseg = c->nseg;
    a.in = c->in;
    a.x_mode = HZ_DGEMV_X_PLAIN;
    a.x = c->x;
    const uint16_t *w = c->w[i % (int)c->copies];
    for (uint32_t k = 0; k < c->nseg; k++)
        a.seg[k] = (hz_mgemv_seg){w + (size_t)k * c->rows * c->in, NULL, c->y + (size_t)k * c->rows, c->rows, 1};
    hz_klaunch kl = {s, c->pdl};
    return hz_decode_gemv(&a, &g_dev, &kl);
}

static int run_old(void *p, int i, cudaStream_t s) {
    gemv_ctx *c = p;
    hz_mgemv_seg seg[4];
    const uint16_t *w = c->w[i % (int)c->copies];
    for (uint32_t k = 0; k < c->nseg; k++)
        seg[k] = (hz_mgemv_seg){w + (size_t)k * c->rows * c->in, NULL, c->y + (size_t)k * c->rows, c->rows, 1};
    return hz_model_gemv(c->x, c->in, seg, c->nseg, s);
}

/* cuBLAS: the segments are one contiguous [nseg*rows x in] row-major matrix, i.e. column-major
 * [in x nseg*rows]; y = W x is op(A) = A^T times x. */
static int run_cublas(void *p, int i, cudaStream_t s) {
    gemv_ctx *c = p;
    const float one = 1.0f, zero = 0.0f;
    const int m = (int)(c->rows * c->nseg);
    if (cublasSetStream(g_blas, s) != CUBLAS_STATUS_SUCCESS) return 1;
    cublasStatus_t st = cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, m, 1, (int)c->in, &one, c->w[i % (int)c->copies],
                                     CUDA_R_16F, (int)c->in, c->x, CUDA_R_16F, (int)c->in, &zero, c->y, CUDA_R_32F, m,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}

/* Worst |y - ref| / sum|w x| over all rows, against FP64 on the host; y poisoned (NaN) before. */
static double gemv_check(gemv_ctx *c, op_fn fn, const uint16_t *hw, const uint16_t *hx) {
    const size_t ny = (size_t)c->nseg * c->rows;
    CK(cudaMemset(c->y, 0xff, ny * 4));
    if (fn(c, 0, g_stream)) return INFINITY;
    CK(cudaStreamSynchronize(g_stream));
    float *hy = malloc(ny * 4);
    CK(cudaMemcpy(hy, c->y, ny * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t r = 0; r < ny; r++) {
        double ref = 0, mag = 0;
        for (uint32_t i = 0; i < c->in; i++) {
            double p = (double)hz_f16_to_f32(hw[r * c->in + i]) * hz_f16_to_f32(hx[i]);
            ref += p;
            mag += fabs(p);
        }
        double err = fabs((double)hy[r] - ref) / (mag > 0 ? mag : 1);
        if (!(err <= worst)) worst = err; /* NaN sticks */
    }
    free(hy);
    return worst;
}

static void gemv_line(const char *impl, float single, float graph, double bytes, double err) {
    printf("    %-8s single %8.2f us %7.1f GB/s | graph %8.2f us %7.1f GB/s %5.1f%% of copy | err %.1e %s\n", impl,
           single, bytes / (single * 1e3), graph, graph > 0 ? bytes / (graph * 1e3) : 0.0,
           graph > 0 ? 100.0 * bytes / (graph * 1e3) / g_copy_gbs : 0.0, err, err <= 1e-5 ? "ok" : "FAIL");
}

/* One GEMV shape: correctness of all three, then timing. Returns 0 when all are within tolerance. */
static int gemv_case(const char *name, uint32_t rows, uint32_t in, uint32_t nseg, int reps) {
    gemv_ctx c = {.rows = rows, .in = in, .nseg = nseg, .pdl = 1};
    const size_t wn = (size_t)nseg * rows * in;
    const double bytes = (double)wn * 2;
    c.copies = (uint32_t)((ROTATE_BYTES + wn * 2 - 1) / (wn * 2));
    if (c.copies > 64) c.copies = 64;
    if (c.copies < 2) c.copies = 2;
    uint16_t *hw = malloc(wn * 2), *hx = malloc((size_t)in * 2);
    for (size_t i = 0; i < wn; i++) hw[i] = hz_f32_to_f16(urand() / sqrtf((float)in));
    for (uint32_t i = 0; i < in; i++) hx[i] = hz_f32_to_f16(urand());
    c.w = malloc(sizeof *c.w * c.copies);
    for (uint32_t k = 0; k < c.copies; k++) {
        CK(cudaMalloc((void **)&c.w[k], wn * 2));
        CK(cudaMemcpy(c.w[k], hw, wn * 2, cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc((void **)&c.x, (size_t)in * 2));
    CK(cudaMemcpy(c.x, hx, (size_t)in * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&c.y, (size_t)nseg * rows * 4));
    double e_new = gemv_check(&c, run_custom, hw, hx);
    double e_old = gemv_check(&c, run_old, hw, hx);
    double e_blas = gemv_check(&c, run_cublas, hw, hx);
    printf("gemv %-24s %6u x %-5u x%u (%.1f MB, %u copies)\n", name, rows, in, nseg, bytes / 1e6, c.copies);
    float s_new = time_single(run_custom, &c, reps), g_new = time_graph(run_custom, &c, reps);
    float s_old = time_single(run_old, &c, reps), g_old = time_graph(run_old, &c, reps);
    float s_blas = time_single(run_cublas, &c, reps), gr_blas = time_graph(run_cublas, &c, reps);
    gemv_line("custom", s_new, g_new, bytes, e_new);
    gemv_line("old", s_old, g_old, bytes, e_old);
    gemv_line("cuBLAS", s_blas, gr_blas, bytes, e_blas);
    if (g_new > 0 && gr_blas > 0)
        printf("    pick: %s (graph: custom %.2f us, cuBLAS %.2f us)\n", g_new <= gr_blas ? "custom" : "cuBLAS", g_new,
               gr_blas);
    for (uint32_t k = 0; k < c.copies; k++) cudaFree(c.w[k]);
    free(c.w);
    cudaFree(c.x);
    cudaFree(c.y);
    free(hw);
    free(hx);
    return e_new <= 1e-5 && e_old <= 1e-5 && e_blas <= 1e-5 ? 0 : 1;
}

/* The argmax tail: rows V x in with row `top` scaled up (the maximum) and copied to row `dup` > top. */
static int argmax_case(uint32_t V, uint32_t in) {
    const uint32_t top = 777 % V, dup = V - 3;
    uint16_t *hw = malloc((size_t)V * in * 2), *hx = malloc((size_t)in * 2);
    for (uint32_t i = 0; i < in; i++) hx[i] = hz_f32_to_f16(urand());
    for (size_t i = 0; i < (size_t)V * in; i++) hw[i] = hz_f32_to_f16(urand() / sqrtf((float)in));
    for (uint32_t i = 0; i < in; i++) { /* row top = 16 * sign(x) / in: logit ~8, others ~0.3 */
        hw[(size_t)top * in + i] = hz_f32_to_f16(hz_f16_to_f32(hx[i]) >= 0 ? 16.0f / in : -16.0f / in);
        hw[(size_t)dup * in + i] = hw[(size_t)top * in + i];
    }
    uint16_t *w, *x;
    float *y;
    int32_t *am;
    void *tail;
    CK(cudaMalloc((void **)&w, (size_t)V * in * 2));
    CK(cudaMemcpy(w, hw, (size_t)V * in * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&x, (size_t)in * 2));
    CK(cudaMemcpy(x, hx, (size_t)in * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&y, (size_t)V * 4));
    CK(cudaMalloc((void **)&am, 4));
    CK(cudaMalloc(&tail, hz_decode_tail_bytes(&g_dev)));
    CK(cudaMemset(tail, 0, hz_decode_tail_bytes(&g_dev)));
    int bad = 0;
    for (int rep = 0; rep < 3 && !bad; rep++) { /* the counter must be back at 0 after each launch */
        CK(cudaMemset(am, 0xff, 4));
        hz_dgemv_args a;
        memset(&a, 0, sizeof a);
        a.seg[0] = (hz_mgemv_seg){w, NULL, y, V, 1};
        a.nseg = 1;
        a.in = in;
        a.x_mode = HZ_DGEMV_X_PLAIN;
        a.x = x;
        a.tail = HZ_DGEMV_TAIL_ARGMAX;
        a.argmax_out = am;
        a.tail_scratch = tail;
        hz_klaunch kl = {g_stream, 1};
        if (hz_decode_gemv(&a, &g_dev, &kl)) {
            printf("FAIL: argmax tail launch: %s\n", hz_last_error_message());
            bad = 1;
            break;
        }
        CK(cudaStreamSynchronize(g_stream));
        float *hy = malloc((size_t)V * 4);
        int32_t got;
        CK(cudaMemcpy(hy, y, (size_t)V * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&got, am, 4, cudaMemcpyDeviceToHost));
        uint32_t ref = 0;
        for (uint32_t r = 1; r < V; r++)
            if (hy[r] > hy[ref]) ref = r;
        if (got != (int32_t)ref || ref != top || hy[dup] != hy[top]) {
            printf("FAIL: argmax tail: got %d, argmax of its logits %u, expected row %u (tie with %u: %s)\n", (int)got,
                   ref, top, dup, hy[dup] == hy[top] ? "yes" : "no");
            bad = 1;
        }
        free(hy);
    }
    if (!bad) printf("argmax tail %u x %u: row %u (tied with row %u) over 3 launches: ok\n", V, in, top, dup);
    cudaFree(w);
    cudaFree(x);
    cudaFree(y);
    cudaFree(am);
    cudaFree(tail);
    free(hw);
    free(hx);
    return bad;
}

/* ---- the lm_head screen against the argmax GEMV ---------------------------------------------------- */

typedef struct screen_ctx {
    hz_dgemv_args gemv;
    hz_dscreen_args screen;
} screen_ctx;

static int run_argmax_gemv(void *p, int i, cudaStream_t s) {
    (void)i;
    const hz_klaunch kl = {s, 1};
    return hz_decode_gemv(&((screen_ctx *)p)->gemv, &g_dev, &kl);
}

static int run_screen(void *p, int i, cudaStream_t s) {
    (void)i;
    const hz_klaunch kl = {s, 1};
    return hz_decode_screen(&((screen_ctx *)p)->screen, &g_dev, &kl);
}

static int screen_case(const char *name, uint32_t V, uint32_t in, int reps) {
    uint16_t *w = dev_random_f16((size_t)V * in, 1.0f / sqrtf((float)in), 0.0f), *x = dev_random_f16(in, 1.0f, 0.0f);
    uint16_t *xo;
    int8_t *q;
    float *y, *scale, *coef, *qnorm, *ub;
    unsigned long long *best;
    int32_t *am;
    void *tail;
    hz_dstep *step;
    const hz_dstep st0 = {0, 0, 1};
    CK(cudaMalloc((void **)&xo, (size_t)in * 2));
    CK(cudaMalloc((void **)&q, (size_t)V * in));
    CK(cudaMalloc((void **)&y, (size_t)V * 4));
    CK(cudaMalloc((void **)&scale, (size_t)V * 4));
    CK(cudaMalloc((void **)&coef, (size_t)V * 4));
    CK(cudaMalloc((void **)&qnorm, (size_t)V * 4));
    CK(cudaMalloc((void **)&ub, (size_t)V * 4));
    CK(cudaMalloc((void **)&best, 8));
    CK(cudaMalloc((void **)&am, 8));
    CK(cudaMalloc(&tail, hz_decode_tail_bytes(&g_dev)));
    CK(cudaMalloc((void **)&step, sizeof(hz_dstep)));
    CK(cudaMemset(tail, 0, hz_decode_tail_bytes(&g_dev)));
    CK(cudaMemset(best, 0, 8));
    CK(cudaMemcpy(step, &st0, sizeof st0, cudaMemcpyHostToDevice));
    int bad = hz_decode_screen_prepare(w, V, in, q, scale, coef, qnorm, g_stream) != HZ_OK;
    screen_ctx c;
    memset(&c, 0, sizeof c);
    c.gemv.seg[0] = (hz_mgemv_seg){w, NULL, y, V, 1};
    c.gemv.nseg = 1;
    c.gemv.in = in;
    c.gemv.x_mode = HZ_DGEMV_X_PLAIN;
    c.gemv.x = x;
    c.gemv.tail = HZ_DGEMV_TAIL_ARGMAX;
    c.gemv.argmax_out = am;
    c.gemv.tail_scratch = tail;
    c.screen.x = c.gemv;
    c.screen.x.x_out = xo;
    c.screen.x.step = step;
    c.screen.w = w, c.screen.q = q, c.screen.scale = scale, c.screen.coef = coef, c.screen.qnorm = qnorm, c.screen.rows = V;
    c.screen.ub = ub, c.screen.best = best, c.screen.argmax_out = am + 1, c.screen.tail_scratch = tail;
    int32_t got[2] = {-1, -2};
    CK(cudaMemsetAsync(am, 0xff, 8, g_stream));
    if (!bad) bad = run_argmax_gemv(&c, 0, g_stream) || run_screen(&c, 0, g_stream);
    if (!bad) CK(cudaStreamSynchronize(g_stream)); /* g_stream does not synchronise with the legacy stream */
    if (!bad) CK(cudaMemcpy(got, am, 8, cudaMemcpyDeviceToHost));
    if (bad || got[0] != got[1]) {
        printf("FAIL: %s: %s (GEMV row %d, screen row %d)\n", name, bad ? hz_last_error_message() : "picks differ",
               (int)got[0], (int)got[1]);
        bad = 1;
    } else {
        const float tg = time_graph(run_argmax_gemv, &c, reps), ts = time_graph(run_screen, &c, reps);
        const double gb_g = (double)V * in * 2 / 1e9, gb_s = ((double)V * in + (double)V * 16) / 1e9;
        printf("%-28s argmax GEMV %8.2f us (%7.1f GB/s, %.1f%% of the copy ceiling) | screen %8.2f us (%7.1f GB/s "
               "over its INT8 pass, %.1f%%) | %.2fx | row %d both\n",
               name, tg, gb_g / (tg * 1e-6), 100.0 * gb_g / (tg * 1e-6) / g_copy_gbs, ts, gb_s / (ts * 1e-6),
               100.0 * gb_s / (ts * 1e-6) / g_copy_gbs, tg / ts, (int)got[0]);
    }
    cudaFree(w), cudaFree(x), cudaFree(xo), cudaFree(q), cudaFree(y), cudaFree(scale), cudaFree(coef), cudaFree(qnorm);
    cudaFree(ub), cudaFree(best), cudaFree(am), cudaFree(tail), cudaFree(step);
    return bad;
}

/* ---- attention --------------------------------------------------------------------------------------- */

typedef struct attn_ctx {
    uint32_t heads, D, ctx, n_pos, splits, copies, groups;
    uint16_t *q, *k, *v, *out;
    uint16_t **kc, **vc; /* [copies] */
    float *rope, *scores, *part;
    uint32_t *count;
    hz_dstep *step;
} attn_ctx;

static int run_attn_new(void *p, int i, cudaStream_t s) {
    attn_ctx *c = p;
    hz_dattn_args a = {.q = c->q, .k = c->k, .v = c->v, .rope = c->rope, .step = c->step,
                       .kc = c->kc[i % (int)c->copies], .vc = c->vc[i % (int)c->copies], .out = c->out,
                       .part = c->part, .count = c->count, .splits = c->splits, .heads = c->heads,
                       .kv_heads = c->heads, .head_dim = c->D, .groups = c->groups};
    hz_klaunch kl = {s, 1};
    return hz_decode_attention(&a, &kl);
}

static int run_attn_old(void *p, int i, cudaStream_t s) {
    attn_ctx *c = p;
    return hz_model_attention(c->q, c->kc[i % (int)c->copies], c->vc[i % (int)c->copies], c->out, c->scores, c->ctx,
                              c->heads, c->heads, c->D, c->n_pos, s);
}

/* Host FP64 reference of run_attn_new with identity RoPE and no q/k norm; worst |gpu - ref|. */
static double attn_check(attn_ctx *c) {
    const uint32_t H = c->heads, D = c->D, KD = H * D, pos = c->n_pos - 1;
    CK(cudaMemset(c->out, 0xff, (size_t)KD * 2));
    if (run_attn_new(c, 0, g_stream)) return INFINITY;
    CK(cudaStreamSynchronize(g_stream));
    uint16_t *q = malloc((size_t)KD * 2), *out = malloc((size_t)KD * 2);
    uint16_t *kc = malloc((size_t)c->n_pos * KD * 2), *vc = malloc((size_t)c->n_pos * KD * 2);
    uint16_t *k = malloc((size_t)KD * 2), *v = malloc((size_t)KD * 2);
    CK(cudaMemcpy(q, c->q, (size_t)KD * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(k, c->k, (size_t)KD * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(v, c->v, (size_t)KD * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out, c->out, (size_t)KD * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(kc, c->kc[0], (size_t)c->n_pos * KD * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(vc, c->vc[0], (size_t)c->n_pos * KD * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    /* the kernel stored k and v at row pos: they must be the inputs (identity RoPE, no norm) */
    if (memcmp(kc + (size_t)pos * KD, k, (size_t)KD * 2) || memcmp(vc + (size_t)pos * KD, v, (size_t)KD * 2)) worst = INFINITY;
    double *sc = malloc(sizeof(double) * c->n_pos);
    for (uint32_t h = 0; h < H && worst < INFINITY; h++) {
        double mx = -INFINITY, sum = 0;
        for (uint32_t j = 0; j < c->n_pos; j++) {
            double d = 0;
            for (uint32_t e = 0; e < D; e++)
                d += (double)hz_f16_to_f32(q[h * D + e]) * hz_f16_to_f32(kc[(size_t)j * KD + h * D + e]);
            sc[j] = d / sqrt((double)D);
            if (sc[j] > mx) mx = sc[j];
        }
        for (uint32_t j = 0; j < c->n_pos; j++) sum += (sc[j] = exp(sc[j] - mx));
        for (uint32_t e = 0; e < D; e++) {
            double o = 0;
            for (uint32_t j = 0; j < c->n_pos; j++) o += sc[j] / sum * hz_f16_to_f32(vc[(size_t)j * KD + h * D + e]);
            double err = fabs((double)hz_f16_to_f32(out[h * D + e]) - o);
            if (!(err <= worst)) worst = err;
        }
    }
    free(sc);
    free(q);
    free(out);
    free(kc);
    free(vc);
    free(k);
    free(v);
    return worst;
}

/* reps 0: the four checks only, no timing (--attention-check: no cuBLAS, for compute-sanitizer) */
static int attention_case(uint32_t n_pos, int reps) {
    const uint32_t heads = 16, D = 128, ctx = 4096, KD = heads * D;
    attn_ctx c = {.heads = heads, .D = D, .ctx = ctx, .n_pos = n_pos};
    const size_t kv_bytes = (size_t)ctx * KD * 2;
    c.copies = (uint32_t)((ROTATE_BYTES + 2 * kv_bytes - 1) / (2 * kv_bytes));
    c.kc = malloc(sizeof *c.kc * c.copies);
    c.vc = malloc(sizeof *c.vc * c.copies);
    for (uint32_t k = 0; k < c.copies; k++) {
        c.kc[k] = dev_random_f16((size_t)ctx * KD, 1.0f, 0.0f);
        c.vc[k] = dev_random_f16((size_t)ctx * KD, 1.0f, 0.0f);
    }
    c.q = dev_random_f16(KD, 1.0f, 0.0f);
    c.k = dev_random_f16(KD, 1.0f, 0.0f);
    c.v = dev_random_f16(KD, 1.0f, 0.0f);
    CK(cudaMalloc((void **)&c.out, (size_t)KD * 2));
    CK(cudaMalloc((void **)&c.scores, (size_t)heads * ctx * 4));
    float *rope = calloc((size_t)ctx * D, sizeof(float)); /* identity: cos 1, sin 0 */
    for (uint32_t p = 0; p < ctx; p++)
        for (uint32_t i = 0; i < D / 2; i++) rope[(size_t)p * D + i] = 1.0f;
    CK(cudaMalloc((void **)&c.rope, (size_t)ctx * D * 4));
    CK(cudaMemcpy(c.rope, rope, (size_t)ctx * D * 4, cudaMemcpyHostToDevice));
    free(rope);
    const uint32_t max_splits = hz_decode_attention_splits(&g_dev, heads, ctx);
    CK(cudaMalloc((void **)&c.part, (size_t)heads * max_splits * (D + 2) * 4));
    CK(cudaMalloc((void **)&c.count, (size_t)heads * 4));
    CK(cudaMemset(c.count, 0, (size_t)heads * 4));
    CK(cudaMalloc((void **)&c.step, sizeof(hz_dstep)));
    hz_dstep st = {0, n_pos - 1, 0};
    CK(cudaMemcpy(c.step, &st, sizeof st, cudaMemcpyHostToDevice));
    int bad = 0;
    /* groups 2 is the launch below 256 positions (hz_decode_attention_groups): the one-pass warp kernel
     * for this head_dim unless HZ_GPU_ATTN_WARP=0; past 256 positions it reads the later rows from the
     * cache, which the step never asks of it but must still be right */
    const uint32_t try_splits[4] = {max_splits, 1, 3, max_splits}, try_groups[4] = {1, 1, 1, 2};
    for (int t = 0; t < 4; t++) {
        c.splits = try_splits[t] <= max_splits ? try_splits[t] : max_splits;
        c.groups = try_groups[t];
        double err = attn_check(&c);
        printf("attention 16 x 128, %4u positions, %2u splits, groups %u: max |gpu - fp64| %.2e %s\n", n_pos,
               c.splits, c.groups, err, err <= 2e-3 ? "ok" : "FAIL");
        if (!(err <= 2e-3)) bad = 1;
    }
    c.splits = max_splits;
    if (reps > 0) {
        const double kv_read = 2.0 * n_pos * KD * 2;
        c.groups = 2;
        float s_two = time_single(run_attn_new, &c, reps), g_two = time_graph(run_attn_new, &c, reps);
        c.groups = 1;
        float s_new = time_single(run_attn_new, &c, reps), g_new = time_graph(run_attn_new, &c, reps);
        float s_old = time_single(run_attn_old, &c, reps), g_old = time_graph(run_attn_old, &c, reps);
        printf("    groups 2    single %8.2f us | graph %8.2f us %7.1f GB/s (KV read)\n", s_two, g_two,
               g_two > 0 ? kv_read / (g_two * 1e3) : 0.0);
        printf("    split (%2u) single %8.2f us | graph %8.2f us %7.1f GB/s (KV read)\n", c.splits, s_new, g_new,
               g_new > 0 ? kv_read / (g_new * 1e3) : 0.0);
        printf("    old         single %8.2f us | graph %8.2f us %7.1f GB/s (KV read)\n", s_old, g_old,
               g_old > 0 ? kv_read / (g_old * 1e3) : 0.0);
    }
    for (uint32_t k = 0; k < c.copies; k++) {
        cudaFree(c.kc[k]);
        cudaFree(c.vc[k]);
    }
    free(c.kc);
    free(c.vc);
    cudaFree(c.q);
    cudaFree(c.k);
    cudaFree(c.v);
    cudaFree(c.out);
    cudaFree(c.scores);
    cudaFree(c.rope);
    cudaFree(c.part);
    cudaFree(c.count);
    cudaFree(c.step);
    return bad;
}

/* Every attention case: positions below 256 (the step's groups-2 launches), then 256, 1,024 and 4,096. */
static int attention_cases(int reps) {
    const uint32_t short_pos[4] = {1, 17, 100, 200};
    int bad = 0;
    for (int i = 0; i < 4; i++) bad |= attention_case(short_pos[i], reps);
    for (uint32_t n_pos = 256; n_pos <= 4096; n_pos *= 4) bad |= attention_case(n_pos, reps);
    return bad;
}

/* ---- the non-routed kernels of one step, at a model's shapes --------------------------------------------- */

/* The buffers of one layer's non-routed kernels; launches as forward_cuda.c's enqueue_step does. */
typedef struct layer_ctx {
    const hz_model_config *c;
    uint32_t layers; /* distinct weight sets (rotated) */
    uint16_t **wqkv, **wo, **wr, **norm, *lm, *qb;
    uint16_t **shg, **shd; /* Qwen: gate+up [2S x H], down [H x S] */
    uint16_t *h, *h2, *q, *k, *v, *att, *proj, *rlog, *xn, *shdo, *sgate, *kc, *vc;
    float *acc, *rope, *part, *logits, *sg, *su;
    uint32_t *count, *route;
    const void **rows;
    int32_t *am;
    void *tail;
    hz_dstep *step;
    uint32_t splits;
    int which; /* 0 qkv, 1 attention, 2 o, 3 router, 4 shared down, 5 lm_head */
} layer_ctx;

static int run_layer_op(void *p, int i, cudaStream_t s) {
    layer_ctx *L = p;
    const hz_model_config *c = L->c;
    const uint32_t H = c->hidden, D = c->head_dim, QD = c->heads * D, KD = c->kv_heads * D, S = c->shared_inter;
    const int l = i % (int)L->layers;
    hz_klaunch kl = {s, 1};
    hz_dgemv_args a;
    memset(&a, 0, sizeof a);
    a.in = H;
    a.eps = 1e-5f;
    switch (L->which) {
    case 0: /* qkv, input norm of h + moe */
        a.seg[0] = (hz_mgemv_seg){L->wqkv[l], c->qkv_bias ? L->qb : NULL, L->q, QD, 0};
        a.seg[1] = (hz_mgemv_seg){L->wqkv[l] + (size_t)QD * H, c->qkv_bias ? L->qb : NULL, L->k, KD, 0};
        a.seg[2] = (hz_mgemv_seg){L->wqkv[l] + (size_t)(QD + KD) * H, c->qkv_bias ? L->qb : NULL, L->v, KD, 0};
        a.nseg = 3;
        a.x_mode = HZ_DGEMV_X_RESNORM;
        a.h_in = L->h;
        a.acc = L->acc;
        a.shared = S ? L->shdo : NULL;
        a.shared_gate = S ? L->sgate : NULL;
        a.norm_w = L->norm[l];
        a.h_out = L->h2;
        return hz_decode_gemv(&a, &g_dev, &kl);
    case 1: {
        hz_dattn_args at = {.q = L->q, .k = L->k, .v = L->v, .q_norm = c->qk_norm ? L->norm[l] : NULL,
                            .k_norm = c->qk_norm ? L->norm[l] : NULL, .eps = 1e-5f, .rope = L->rope, .step = L->step,
                            .kc = L->kc, .vc = L->vc, .out = L->att, .part = L->part, .count = L->count,
                            .splits = L->splits, .heads = c->heads, .kv_heads = c->kv_heads, .head_dim = D};
        return hz_decode_attention(&at, &kl);
    }
    case 2:
        a.seg[0] = (hz_mgemv_seg){L->wo[l], NULL, L->proj, H, 0};
        a.nseg = 1;
        a.in = QD;
        a.x_mode = HZ_DGEMV_X_PLAIN;
        a.x = L->att;
        return hz_decode_gemv(&a, &g_dev, &kl);
    case 3: /* router (+ shared gate/up/gate logit), post-attention norm, route tail */
        a.seg[0] = (hz_mgemv_seg){L->wr[l], NULL, L->rlog, c->experts, 0};
        a.nseg = 1;
        if (S) {
            a.seg[1] = (hz_mgemv_seg){L->shg[l], NULL, L->sg, S, 1};
            a.seg[2] = (hz_mgemv_seg){L->shg[l] + (size_t)S * H, NULL, L->su, S, 1};
            a.seg[3] = (hz_mgemv_seg){L->wr[l], NULL, L->sgate, 1, 0};
            a.nseg = 4;
        }
        a.x_mode = HZ_DGEMV_X_RESNORM;
        a.h_in = L->h;
        a.d = L->proj;
        a.norm_w = L->norm[l];
        a.h_out = L->h2;
        a.x_out = L->xn;
        a.zero = L->acc;
        a.zero_n = H;
        a.tail = HZ_DGEMV_TAIL_ROUTE;
        a.top_k = c->top_k;
        a.ids_out = L->route;
        a.w_out = (float *)(L->route + c->top_k);
        a.tail_scratch = L->tail;
        return hz_decode_gemv(&a, &g_dev, &kl);
    case 4:
        a.seg[0] = (hz_mgemv_seg){L->shd[l], NULL, L->shdo, H, 0};
        a.nseg = 1;
        a.in = S;
        a.x_mode = HZ_DGEMV_X_SILU;
        a.g = L->sg;
        a.u = L->su;
        return hz_decode_gemv(&a, &g_dev, &kl);
    default:
        a.seg[0] = (hz_mgemv_seg){L->lm, NULL, L->logits, c->vocab, 1};
        a.nseg = 1;
        a.x_mode = HZ_DGEMV_X_RESNORM;
        a.h_in = L->h;
        a.acc = L->acc;
        a.shared = S ? L->shdo : NULL;
        a.shared_gate = S ? L->sgate : NULL;
        a.norm_w = L->norm[0];
        a.tail = HZ_DGEMV_TAIL_ARGMAX;
        a.argmax_out = L->am;
        a.tail_scratch = L->tail;
        return hz_decode_gemv(&a, &g_dev, &kl);
    }
}

/* Times each non-routed kernel of a step at each of npos positions (in a graph, weights of up to 8
 * distinct layers rotated) and prints the per-step sums: layers x (qkv + attention + o + router
 * [+ shared down]) + lm_head, into sums[] (microseconds). */
static void nonrouted_breakdown(const hz_model_config *c, const uint32_t *pos, int npos, double *sums,
                                const double *step_ms, uint32_t max_ctx, int reps) {
    const uint32_t H = c->hidden, D = c->head_dim, QD = c->heads * D, KD = c->kv_heads * D, S = c->shared_inter;
    const uint32_t nl = c->layers < 8 ? c->layers : 8;
    layer_ctx L = {.c = c, .layers = nl};
    L.wqkv = calloc(nl, sizeof *L.wqkv);
    L.wo = calloc(nl, sizeof *L.wo);
    L.wr = calloc(nl, sizeof *L.wr);
    L.norm = calloc(nl, sizeof *L.norm);
    L.shg = calloc(nl, sizeof *L.shg);
    L.shd = calloc(nl, sizeof *L.shd);
    for (uint32_t l = 0; l < nl; l++) {
        L.wqkv[l] = dev_random_f16((size_t)(QD + 2 * KD) * H, 1.0f / sqrtf((float)H), 0.0f);
        L.wo[l] = dev_random_f16((size_t)H * QD, 1.0f / sqrtf((float)QD), 0.0f);
        L.wr[l] = dev_random_f16((size_t)c->experts * H, 8.0f / sqrtf((float)H), 0.0f);
        L.norm[l] = dev_random_f16(H > QD ? H : QD, 0.1f, 1.0f);
        if (S) {
            L.shg[l] = dev_random_f16((size_t)2 * S * H, 1.0f / sqrtf((float)H), 0.0f);
            L.shd[l] = dev_random_f16((size_t)H * S, 1.0f / sqrtf((float)S), 0.0f);
        }
    }
    L.lm = dev_random_f16((size_t)c->vocab * H, 1.0f / sqrtf((float)H), 0.0f);
    L.qb = dev_random_f16(QD, 0.1f, 0.0f);
    L.h = dev_random_f16(H, 1.0f, 0.0f);
    L.h2 = dev_random_f16(H, 1.0f, 0.0f);
    L.q = dev_random_f16(QD, 1.0f, 0.0f);
    L.k = dev_random_f16(KD, 1.0f, 0.0f);
    L.v = dev_random_f16(KD, 1.0f, 0.0f);
    L.att = dev_random_f16(QD, 1.0f, 0.0f);
    L.proj = dev_random_f16(H, 1.0f, 0.0f);
    L.rlog = dev_random_f16(c->experts, 1.0f, 0.0f);
    L.xn = dev_random_f16(H, 1.0f, 0.0f);
    L.shdo = dev_random_f16(H, 1.0f, 0.0f);
    L.sgate = dev_random_f16(8, 1.0f, 0.0f);
    L.kc = dev_random_f16((size_t)max_ctx * KD, 1.0f, 0.0f);
    L.vc = dev_random_f16((size_t)max_ctx * KD, 1.0f, 0.0f);
    CK(cudaMalloc((void **)&L.acc, (size_t)H * 4));
    CK(cudaMemset(L.acc, 0, (size_t)H * 4));
    CK(cudaMalloc((void **)&L.sg, (size_t)(S ? S : 1) * 4));
    CK(cudaMemset(L.sg, 0, (size_t)(S ? S : 1) * 4));
    CK(cudaMalloc((void **)&L.su, (size_t)(S ? S : 1) * 4));
    CK(cudaMemset(L.su, 0, (size_t)(S ? S : 1) * 4));
    CK(cudaMalloc((void **)&L.rope, (size_t)max_ctx * D * 4));
    CK(cudaMemset(L.rope, 0, (size_t)max_ctx * D * 4));
    L.splits = hz_decode_attention_splits(&g_dev, c->heads, max_ctx);
    CK(cudaMalloc((void **)&L.part, (size_t)c->heads * L.splits * (D + 2) * 4));
    CK(cudaMalloc((void **)&L.count, (size_t)c->heads * 4));
    CK(cudaMemset(L.count, 0, (size_t)c->heads * 4));
    CK(cudaMalloc((void **)&L.logits, (size_t)c->vocab * 4));
    CK(cudaMalloc((void **)&L.route, 2u * 64u * 4u));
    CK(cudaMalloc((void **)&L.am, 4));
    CK(cudaMalloc(&L.tail, hz_decode_tail_bytes(&g_dev)));
    CK(cudaMemset(L.tail, 0, hz_decode_tail_bytes(&g_dev)));
    CK(cudaMalloc((void **)&L.step, sizeof(hz_dstep)));
    static const char *names[6] = {"qkv GEMV + input norm", "attention (+ q/k norm, RoPE, KV store)", "o GEMV",
                                   "router GEMV + norm + top-k tail", "shared down GEMV + SiLU", "lm_head GEMV + norm + argmax"};
    for (int k = 0; k < npos; k++) {
        printf("  breakdown at position %u (each kernel alone in a graph of %d, random data):\n", pos[k], GRAPH_OPS);
        hz_dstep st = {0, pos[k], 0};
        CK(cudaMemcpy(L.step, &st, sizeof st, cudaMemcpyHostToDevice));
        double sum = 0;
        for (int w = 0; w < 6; w++) {
            if (w == 4 && !S) continue;
            L.which = w;
            float t = time_graph(run_layer_op, &L, reps);
            const double n = w == 5 ? 1.0 : (double)c->layers;
            printf("    %-40s %8.2f us x %2.0f = %8.1f us\n", names[w], t, n, t * n);
            sum += t * n;
        }
        sums[k] = sum;
        printf("    %-40s %26.1f us\n", "non-routed kernels per step", sum);
        printf("    %-40s %26.1f us\n", "whole step (graph + pdl, public API)", step_ms[k] * 1e3);
        printf("    %-40s %26.1f us\n", "rest: routed experts, gaps, host", step_ms[k] * 1e3 - sum);
    }
    for (uint32_t l = 0; l < nl; l++) {
        cudaFree(L.wqkv[l]);
        cudaFree(L.wo[l]);
        cudaFree(L.wr[l]);
        cudaFree(L.norm[l]);
        if (S) {
            cudaFree(L.shg[l]);
            cudaFree(L.shd[l]);
        }
    }
    void *bufs[] = {L.lm, L.qb, L.h, L.h2, L.q, L.k, L.v, L.att, L.proj, L.rlog, L.xn, L.shdo, L.sgate, L.kc, L.vc,
                    L.acc, L.sg, L.su, L.rope, L.part, L.count, L.logits, L.route, L.am, L.tail, L.step};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    free(L.wqkv);
    free(L.wo);
    free(L.wr);
    free(L.norm);
    free(L.shg);
    free(L.shd);
}

/* ---- whole decode steps of a generated model --------------------------------------------------------------- */

static uint64_t g_fill = 0x9e3779b97f4a7c15ull;
/* Fast uniform [-1, 1) for hundreds of millions of weights. */
static inline float frand(void) {
    g_fill ^= g_fill << 13;
    g_fill ^= g_fill >> 7;
    g_fill ^= g_fill << 17;
    return (float)(int32_t)(g_fill >> 32) * (1.0f / 2147483648.0f);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Writes the model: random non-routed tensors (scaled as tests/unit/model/tiny_model.c), routed
 * experts cycled from a pool of four random ones (the bytes a token reads do not depend on which). */
static int write_model(const char *path, const hz_model_config *cfg) {
    hz_artifact_writer *w = NULL;
    int st = hz_artifact_writer_create(path, cfg, "bf16", "0123456789abcdef0123456789abcdef", &w);
    if (st) return st;
    hz_tensor_spec *specs = NULL;
    uint32_t n = 0;
    st = hz_arch_nonrouted_tensors(cfg, &specs, &n);
    for (uint32_t i = 0; i < n && !st; i++) {
        const hz_tensor_spec *sp = &specs[i];
        const uint64_t numel = sp->shape[0] * (sp->ndim > 1 ? sp->shape[1] : 1u);
        hz_f16 *buf = malloc(numel * sizeof(hz_f16));
        if (!buf) {
            st = HZ_ENOMEM;
            break;
        }
        float scale = sp->ndim > 1 ? 1.0f / sqrtf((float)sp->shape[1]) : 0.1f, base = 0.0f;
        if (ends_with(sp->name, "norm.weight")) base = 1.0f;
        if (strstr(sp->name, "embed_tokens")) scale = 1.0f;
        if (ends_with(sp->name, "mlp.gate.weight")) scale *= 8.0f;
        for (uint64_t j = 0; j < numel; j++) buf[j] = hz_f32_to_f16(base + scale * frand());
        st = hz_artifact_writer_begin_tensor(w, sp->name, sp->ndim, sp->shape);
        if (!st) st = hz_artifact_writer_write(w, buf, numel * sizeof(hz_f16));
        if (!st) st = hz_artifact_writer_end_tensor(w);
        free(buf);
    }
    free(specs);
    hz_expert_layout layout;
    hz_expert_layout_init(&layout, cfg->hidden, cfg->expert_inter);
    const size_t gi = (size_t)cfg->expert_inter * cfg->hidden;
    float *g = malloc(gi * 4), *u = malloc(gi * 4), *d = malloc(gi * 4);
    uint8_t *pool = malloc(4 * layout.blob_bytes);
    if (!st && (!g || !u || !d || !pool)) st = HZ_ENOMEM;
    const float sg = 1.0f / sqrtf((float)cfg->hidden), sd = 1.0f / sqrtf((float)cfg->expert_inter);
    for (int k = 0; k < 4 && !st; k++) {
        for (size_t j = 0; j < gi; j++) {
            g[j] = sg * frand();
            u[j] = sg * frand();
            d[j] = sd * frand();
        }
        st = hz_expert_pack(&layout, g, u, d, pool + (size_t)k * layout.blob_bytes, "bench expert");
    }
    for (uint32_t l = 0; l < cfg->layers && !st; l++)
        for (uint32_t e = 0; e < cfg->experts && !st; e++)
            st = hz_artifact_writer_add_expert(w, l, e, pool + (size_t)((l * 7u + e) % 4u) * layout.blob_bytes);
    free(g);
    free(u);
    free(d);
    free(pool);
    if (st) {
        hz_artifact_writer_abort(w);
        return st;
    }
    return hz_artifact_writer_finish(w, NULL);
}

/* One greedy step; the token it produced is folded into *trace (FNV-1a), so runs can be compared for
 * identical output. */
static int traced_step(hz_session *s, int32_t *tok, uint64_t *trace) {
    const int st = hz_decode_step(s, *tok, tok);
    *trace = (*trace ^ (uint32_t)*tok) * 0x100000001b3ull;
    return st;
}

/* Greedy steps through the public API; ms per step over [from, from + n) after running up to `from`. */
static double time_steps(hz_session *s, uint32_t from, uint32_t n, int32_t *tok, uint64_t *trace) {
    int st = HZ_OK;
    while (hz_session_position(s) < from && !st) st = traced_step(s, tok, trace);
    double t0 = hz_now_seconds();
    for (uint32_t i = 0; i < n && !st; i++) st = traced_step(s, tok, trace);
    double dt = hz_now_seconds() - t0;
    if (st) {
        printf("FAIL: decode step: %s\n", hz_last_error_message());
        return -1;
    }
    return dt * 1e3 / n;
}

/* The same session's captured step graph replayed n times back to back at the current position (each
 * replay rewrites that position's KV row with the same token), one synchronisation at the end: the
 * device time of a step without the host's part (argmax read-back, wait, next launch). ms per replay;
 * 0 when the session has no graph. The position does not advance. */
static double time_replays(hz_session *s, uint32_t n, int32_t tok) {
    hz_gpu_session *g = s->gpu;
    const uint32_t pos = hz_session_position(s);
    hz_decode_graph *graph = g ? hz_gpu_session_graph(s, pos) : NULL;
    if (!graph) return 0;
    cudaStream_t q = (cudaStream_t)s->model->gpu->queue;
    int st = hz_decode_graph_launch(graph, tok, pos, g->dstep, NULL, q); /* warm */
    if (!st && cudaStreamSynchronize(q) != cudaSuccess) st = HZ_EDEVICE;
    double t0 = hz_now_seconds();
    for (uint32_t i = 0; i < n && !st; i++) st = hz_decode_graph_launch(graph, tok, pos, g->dstep, NULL, q);
    if (!st && cudaStreamSynchronize(q) != cudaSuccess) st = HZ_EDEVICE;
    double dt = hz_now_seconds() - t0;
    if (st) {
        printf("FAIL: graph replay: %s\n", hz_last_error_message());
        return -1;
    }
    return dt * 1e3 / n;
}

#ifdef HZ_TIMELINE
/* ---- kernel timeline of whole steps (built with -Dtimeline=true) ---------------------------------------- */

/* experts: the fused kernel (timeline tag 0); gate_up and down: the two-pass kernels (tags 1 and 2) */
enum { TL_QKV, TL_ATTN, TL_O, TL_ROUTER, TL_ROUTE, TL_EXPERTS, TL_GU, TL_DN, TL_SHDOWN, TL_LMHEAD, TL_ROLES };
static const char *const tl_names[TL_ROLES] = {"qkv GEMV", "attention", "o GEMV",  "router GEMV", "route",
                                               "experts",  "gate_up",   "down",    "shared down", "lm_head"};

typedef struct {
    uint32_t kind, info, info2, blocks, role;
    uint64_t tag, t0, w0, t1; /* first entry, first wait return, last exit */
    uint64_t m[3];            /* per mark, the latest block's: 0 prologue done, 1 and 2 the router
                               * tail's start and end (cuda/model/decode_ops.cu) */
    uint32_t first;           /* its records: r[first .. first + blocks) after tl_group */
} tl_launch;

static int tl_cmp_rec(const void *x, const void *y) {
    const hz_tl_rec *a = x, *b = y;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (a->tag != b->tag) return a->tag < b->tag ? -1 : 1;
    return a->t_entry < b->t_entry ? -1 : a->t_entry > b->t_entry;
}

static int tl_cmp_launch(const void *x, const void *y) {
    const tl_launch *a = x, *b = y;
    return a->t0 < b->t0 ? -1 : a->t0 > b->t0;
}

static uint32_t tl_role(const tl_launch *l, const hz_model_config *c) {
    if (l->kind == HZ_TL_ATTN) return TL_ATTN;
    if (l->kind == HZ_TL_EXPERTS) return l->tag == 1 ? TL_GU : l->tag == 2 ? TL_DN : TL_EXPERTS;
    if (l->kind == HZ_TL_ROUTE) return TL_ROUTE; /* the router tail as its own kernel (OLMoE) */
    if (l->info == c->vocab) return TL_LMHEAD;
    if (c->shared_inter && l->info2 == c->shared_inter) return TL_SHDOWN;
    if (l->info == (c->heads + 2u * c->kv_heads) * c->head_dim) return TL_QKV;
    if (l->info == c->hidden && l->info2 == c->heads * c->head_dim) return TL_O;
    return TL_ROUTER;
}

/* Launches of one step from the records of every instrumented kernel: same kind and tag, and a block
 * that entered before the launch's blocks so far all left (the expert kernel has tag 0 in every layer,
 * and one layer's launch ends before the next layer's begins). Sorted by first entry. */
static uint32_t tl_group(hz_tl_rec *r, uint32_t n, tl_launch *out, uint32_t max, const hz_model_config *c) {
    qsort(r, n, sizeof *r, tl_cmp_rec);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        tl_launch *cur = m ? &out[m - 1] : NULL;
        if (!cur || cur->kind != r[i].kind || cur->tag != r[i].tag || r[i].t_entry > cur->t1) {
            if (m == max) break;
            cur = &out[m++];
            *cur = (tl_launch){.kind = r[i].kind, .info = r[i].info, .info2 = r[i].info2, .tag = r[i].tag,
                               .t0 = r[i].t_entry, .w0 = UINT64_MAX, .t1 = 0, .first = i};
        }
        cur->blocks++;
        if (r[i].t_wait && r[i].t_wait < cur->w0) cur->w0 = r[i].t_wait;
        if (r[i].t_exit > cur->t1) cur->t1 = r[i].t_exit;
        for (int k = 0; k < 3; k++)
            if (r[i].t_mark[k] > cur->m[k]) cur->m[k] = r[i].t_mark[k];
    }
    qsort(out, m, sizeof *out, tl_cmp_launch);
    for (uint32_t i = 0; i < m; i++) {
        out[i].role = tl_role(&out[i], c);
        if (out[i].w0 == UINT64_MAX) out[i].w0 = out[i].t0;
    }
    return m;
}

/* Runs `steps` more greedy steps with the timeline armed and prints, per role of a layer (layers 1 and
 * up), the means of: start - dep (the first block's entry against the end of what it depends on),
 * ready - dep (the first return from the grid-dependency wait), end - ready, and the blocks; then the
 * mean step span and the sum of (end - dep) over one layer's dependency chain. */
static void timeline_report(hz_session *s, const hz_model_config *c, uint32_t steps, int32_t *tok, uint64_t *trace) {
    enum { MAXR = 65536 * 3, MAXL = 4096 };
    hz_tl_rec *rec = malloc(sizeof *rec * MAXR);
    tl_launch *ln = malloc(sizeof *ln * MAXL);
    double sum[TL_ROLES][7] = {{0}}, span = 0;
    double blk[TL_ROLES][2][7] = {{{0}}}; /* per role, before / after: count and sums (see below) */
    /* per role: sums over launches of the blocks' exit times against the dependency's end at the
     * median, the 90th percentile and the last block, and the launches counted */
    double qexit[TL_ROLES][4] = {{0}};
    float *exits = malloc(sizeof *exits * MAXR); /* us: float is ample, and median's cmp_f sorts it */
    uint32_t cnt[TL_ROLES] = {0}, nsteps = 0;
    uint64_t tick = 0; /* the smallest step seen between two blocks' entries: the timer's resolution at best */
    int printed = 0;
    if (!rec || !ln || !exits) goto out;
    for (uint32_t k = 0; k < steps; k++) {
        hz_tl_arm_gemv(1);
        hz_tl_arm_attn(1);
        hz_tl_arm_experts(1);
        hz_tl_arm_model(1);
        hz_tl_arm_router(1);
        if (traced_step(s, tok, trace)) {
            printf("FAIL: timeline step: %s\n", hz_last_error_message());
            goto out;
        }
        uint32_t n = hz_tl_take_gemv(rec, MAXR);
        n += hz_tl_take_attn(rec + n, MAXR - n);
        n += hz_tl_take_experts(rec + n, MAXR - n);
        n += hz_tl_take_model(rec + n, MAXR - n);
        n += hz_tl_take_router(rec + n, MAXR - n);
        hz_tl_arm_gemv(0);
        hz_tl_arm_attn(0);
        hz_tl_arm_experts(0);
        hz_tl_arm_model(0);
        hz_tl_arm_router(0);
        const uint32_t m = tl_group(rec, n, ln, MAXL, c);
        for (uint32_t i = 1; i < n; i++) /* records are sorted by entry within a launch */
            if (rec[i].kind == rec[i - 1].kind && rec[i].tag == rec[i - 1].tag && rec[i].t_entry > rec[i - 1].t_entry) {
                const uint64_t d = rec[i].t_entry - rec[i - 1].t_entry;
                if (!tick || d < tick) tick = d;
            }
        if (m == 0) continue;
        uint64_t last_end[TL_ROLES] = {0};
        uint32_t layer = 0;
        for (uint32_t i = 0; i < m; i++) {
            const tl_launch *l = &ln[i];
            /* what the launch waits for: the previous kernel of the chain; q/k/v and lm_head wait for
             * the layer's MoE output, the routed experts and (Qwen) the shared down */
            uint64_t moe_end = last_end[TL_EXPERTS] > last_end[TL_SHDOWN] ? last_end[TL_EXPERTS] : last_end[TL_SHDOWN];
            if (last_end[TL_DN] > moe_end) moe_end = last_end[TL_DN];
            uint64_t dep = moe_end;
            switch (l->role) {
            case TL_ATTN: dep = last_end[TL_QKV]; break;
            case TL_O: dep = last_end[TL_ATTN]; break;
            case TL_ROUTER: dep = last_end[TL_O]; break;
            case TL_ROUTE: dep = last_end[TL_ROUTER]; break;
            case TL_EXPERTS: /* after the route kernel where the layer has one (it ends after its router) */
            case TL_GU:
                dep = last_end[TL_ROUTE] > last_end[TL_ROUTER] ? last_end[TL_ROUTE] : last_end[TL_ROUTER];
                break;
            case TL_DN: dep = last_end[TL_GU]; break;
            case TL_SHDOWN: dep = last_end[TL_ROUTER]; break;
            default: break; /* TL_QKV, TL_LMHEAD */
            }
            if (l->role == TL_QKV) layer++;
            if (!dep) dep = l->t0;
            if (k == steps / 2 && layer == c->layers / 2 + 1 && printed < 8) {
                printf("    step %u, layer %u: %-12s blocks %4u  start %+8.2f  ready %+8.2f  end %+8.2f us (against its dependency's end)\n",
                       k, layer - 1, tl_names[l->role], l->blocks, ((double)l->t0 - (double)dep) * 1e-3,
                       ((double)l->w0 - (double)dep) * 1e-3, ((double)l->t1 - (double)dep) * 1e-3);
                printed++;
            }
            if (layer > 1 || l->role == TL_LMHEAD) {
                sum[l->role][0] += ((double)l->t0 - (double)dep) * 1e-3;
                sum[l->role][1] += ((double)l->w0 - (double)dep) * 1e-3;
                sum[l->role][2] += ((double)l->t1 - (double)l->w0) * 1e-3;
                sum[l->role][3] += l->blocks;
                for (int q = 0; q < 3; q++)
                    sum[l->role][4 + q] += l->m[q] ? ((double)l->m[q] - (double)l->w0) * 1e-3 : 0.0;
                cnt[l->role]++;
                /* GEMV and expert-kernel blocks that entered before the dependency ended (placed early) and after it:
                 * entry, wait, prologue end, exit against dep; prologue and rows as durations */
                uint32_t nx = 0;
                for (uint32_t b = 0; (l->kind == HZ_TL_GEMV || l->kind == HZ_TL_EXPERTS) && b < l->blocks; b++) {
                    const hz_tl_rec *q = &rec[l->first + b];
                    exits[nx++] = (float)(((double)q->t_exit - (double)dep) * 1e-3);
                    const int late = q->t_entry >= dep;
                    const double w = (double)(q->t_wait ? q->t_wait : q->t_entry), m0 = (double)q->t_mark[0];
                    double *v = blk[l->role][late];
                    v[0] += 1;
                    v[1] += ((double)q->t_entry - (double)dep) * 1e-3;
                    v[2] += (w - (double)dep) * 1e-3;
                    v[3] += q->t_mark[0] ? (m0 - (double)dep) * 1e-3 : 0.0;
                    v[4] += ((double)q->t_exit - (double)dep) * 1e-3;
                    v[5] += q->t_mark[0] ? (m0 - (w > (double)dep ? w : (double)dep)) * 1e-3 : 0.0;
                    v[6] += q->t_mark[0] ? ((double)q->t_exit - m0) * 1e-3 : 0.0;
                }
                if (nx) { /* how late the launch's last blocks leave, against its median block */
                    qsort(exits, nx, sizeof *exits, cmp_f);
                    qexit[l->role][0] += exits[nx / 2];
                    qexit[l->role][1] += exits[(nx * 9u) / 10u];
                    qexit[l->role][2] += exits[nx - 1];
                    qexit[l->role][3] += 1;
                }
            }
            last_end[l->role] = l->t1;
        }
        /* the step's head (layer 0 up to its router) and its end, against the first launch's entry */
        if (k == steps / 2)
            for (uint32_t i = 0; i < m; i++)
                if (i < 7 || ln[i].role == TL_LMHEAD)
                    printf("    step %u, launch %u: %-12s blocks %4u  start %+8.2f  ready %+8.2f  end %+8.2f us (against the step's first entry)\n",
                           k, i, tl_names[ln[i].role], ln[i].blocks, ((double)ln[i].t0 - (double)ln[0].t0) * 1e-3,
                           ((double)ln[i].w0 - (double)ln[0].t0) * 1e-3, ((double)ln[i].t1 - (double)ln[0].t0) * 1e-3);
        span += (double)(ln[m - 1].t1 - ln[0].t0) * 1e-3;
        nsteps++;
    }
    printf("  timeline over %u steps (smallest globaltimer step seen: %llu ns), layers 1..%u, means per launch (us):\n",
           nsteps, (unsigned long long)tick, c->layers - 1);
    printf("    %-12s %7s %10s %10s %10s %10s %10s %10s %10s\n", "role", "blocks", "start-dep", "ready-dep", "end-ready",
           "end-dep", "prologue", "route@", "routed@");
    double chain = 0;
    for (int r = 0; r < TL_ROLES; r++) {
        if (!cnt[r]) continue;
        const double a = sum[r][0] / cnt[r], b = sum[r][1] / cnt[r], d = sum[r][2] / cnt[r];
        printf("    %-12s %7.0f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", tl_names[r], sum[r][3] / cnt[r], a, b, d,
               b + d, sum[r][4] / cnt[r], sum[r][5] / cnt[r], sum[r][6] / cnt[r]);
        if (r != TL_SHDOWN && r != TL_LMHEAD) chain += b + d;
    }
    printf("    main-stream chain per layer (sum of end-dep): %.2f us; step span %.1f us\n", chain,
           nsteps ? span / nsteps : 0.0);
    printf("    (prologue, route@, routed@: the launch's latest marks 0, 1, 2 against its first wait: GEMVs:\n"
           "     x built, routing begun, routed; attention: q/k/v read, first chunk (one pass: tiles) in, chunks\n"
           "     (tiles) done; gate_up: warp 0's tile in, a block's last tile in, its sums done; down:\n"
           "     intermediate staged, rows summed)\n");
    printf("  GEMV and expert-kernel blocks placed before / after their dependency ended, means per block against it\n"
           "  (us; prologue@: a GEMV's x built, gate_up's warp 0 tile in, down's intermediate staged):\n");
    printf("    %-12s %-6s %8s %9s %9s %9s %9s %9s %9s\n", "role", "blocks", "per", "entry", "ready", "prologue@",
           "exit", "prologue", "rows");
    for (int r = 0; r < TL_ROLES; r++)
        for (int g = 0; g < 2; g++) {
            const double *v = blk[r][g];
            if (v[0] == 0) continue;
            printf("    %-12s %-6s %8.1f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", tl_names[r], g ? "after" : "before",
                   v[0] / cnt[r], v[1] / v[0], v[2] / v[0], v[3] / v[0], v[4] / v[0], v[5] / v[0], v[6] / v[0]);
        }
    printf("  their blocks' exits per launch, against the dependency's end (us; means over launches):\n");
    printf("    %-12s %9s %9s %9s\n", "role", "median", "90%", "last");
    for (int r = 0; r < TL_ROLES; r++)
        if (qexit[r][3] > 0)
            printf("    %-12s %9.2f %9.2f %9.2f\n", tl_names[r], qexit[r][0] / qexit[r][3], qexit[r][1] / qexit[r][3],
                   qexit[r][2] / qexit[r][3]);
out:
    free(exits);
    free(rec);
    free(ln);
}
#endif

static int step_bench(const char *arch, uint32_t experts, uint32_t nsteps, int reps) {
    hz_model_config cfg;
    int qwen = strcmp(arch, "qwen") == 0;
    int st = hz_config_preset(qwen ? HZ_ARCH_QWEN2MOE : HZ_ARCH_OLMOE, qwen ? "qwen1.5-moe-a2.7b" : "olmoe-1b-7b", &cfg);
    if (st) return 1;
    if (experts >= cfg.top_k) cfg.experts = experts;
    /* HZ_BENCH_LAYERS=N: the model with N layers instead of the preset's (steps of several depths
     * split a step into a per-layer part and a fixed part: lm_head, the step's head and its end) */
    const char *nl = getenv("HZ_BENCH_LAYERS");
    if (nl && *nl) {
        const long v = strtol(nl, NULL, 10);
        if (v < 1 || v > (long)cfg.layers) {
            printf("FAIL: HZ_BENCH_LAYERS=%s (1..%u)\n", nl, cfg.layers);
            return 1;
        }
        cfg.layers = (uint32_t)v;
    }
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/hz-bench-step-%s-%d.hzq", tmp && *tmp ? tmp : "/tmp", arch, (int)getpid());
    printf("step %s shape: %u layers, hidden %u, %u heads x %u, vocab %u, %u experts top-%u of width %u%s%s\n", arch,
           cfg.layers, cfg.hidden, cfg.heads, cfg.head_dim, cfg.vocab, cfg.experts, cfg.top_k, cfg.expert_inter,
           qwen ? ", shared expert " : "", qwen ? "5632" : "");
    /* HZ_BENCH_MODEL=path: that artifact instead of a model written here (e.g. the one hz-bench runs,
     * scripts/bench --steps models; it must have the preset's shape, or the figures name another) */
    const char *given = getenv("HZ_BENCH_MODEL");
    const int own = !(given && *given);
    double t0 = hz_now_seconds();
    if (own) {
        st = write_model(path, &cfg);
        if (st) {
            printf("FAIL: writing %s: %s\n", path, hz_last_error_message());
            return 1;
        }
        printf("  model written in %.1f s\n", hz_now_seconds() - t0);
    } else {
        snprintf(path, sizeof path, "%s", given);
        printf("  model: %s\n", path);
    }
    hz_host_backing *b = NULL;
    hz_device *d = NULL;
    hz_cache *c = NULL;
    hz_model *m = NULL;
    hz_cache_options co;
    hz_cache_options_init(&co);
    hz_model_options mo;
    hz_model_options_init(&mo);
    mo.executor = "grouped";
    st = hz_host_backing_open(path, NULL, &b);
    if (own) unlink(path); /* the backing holds its own copy */
    if (!st) st = hz_device_open("cuda:0", &d);
    if (!st) st = hz_cache_create(b, d, &co, &c);
    if (!st) st = hz_model_create(b, d, c, &mo, &m);
    int bad = st != HZ_OK;
    if (st) printf("FAIL: opening the model: %s\n", hz_last_error_message());
    /* a given artifact must have the shape printed above, which the figures are labelled with */
    if (!bad && !own &&
        (m->cfg.arch != cfg.arch || m->cfg.layers != cfg.layers || m->cfg.hidden != cfg.hidden ||
         m->cfg.experts != cfg.experts || m->cfg.top_k != cfg.top_k || m->cfg.expert_inter != cfg.expert_inter ||
         m->cfg.vocab != cfg.vocab)) {
        printf("FAIL: %s: %u layers, hidden %u, %u experts top-%u of width %u, vocab %u: not the shape above\n", path,
               m->cfg.layers, m->cfg.hidden, m->cfg.experts, m->cfg.top_k, m->cfg.expert_inter, m->cfg.vocab);
        bad = 1;
    }
    static const struct {
        const char *name;
        int graph, pdl;
    } modes[3] = {{"graph + pdl", 1, 1}, {"eager + pdl", 0, 1}, {"eager", 0, 0}};
    double graph_ms[2] = {0, 0};
    /* HZ_BENCH_GRAPH_ONLY=1: the graph + pdl mode only, no kernel breakdown (quick comparisons of
     * builds or of HZ_W4A16_PATH). */
    const char *only = getenv("HZ_BENCH_GRAPH_ONLY");
    int nmodes = only && strcmp(only, "1") == 0 ? 1 : 3;
    /* HZ_BENCH_SWEEP=NAME=v1,v2,...: the graph + pdl mode once per value, NAME set to it before the
     * session (and its graph) is made: same-process comparisons of a run-time knob. */
    char sweep[256] = "", *sweep_vals[16];
    int nsweep = 0;
    const char *sw = getenv("HZ_BENCH_SWEEP");
    if (sw && strchr(sw, '=') && strlen(sw) < sizeof sweep) {
        snprintf(sweep, sizeof sweep, "%s", sw);
        char *eq = strchr(sweep, '=');
        *eq = '\0';
        for (char *v = strtok(eq + 1, ","); v && nsweep < 16; v = strtok(NULL, ",")) sweep_vals[nsweep++] = v;
        if (nsweep) nmodes = nsweep;
    }
    for (int md = 0; md < nmodes && !bad; md++) {
        if (nsweep) {
            setenv(sweep, sweep_vals[md], 1);
            printf("  %s=%s\n", sweep, sweep_vals[md]);
        }
        hz_session *s = NULL;
        hz_session_options so;
        hz_session_options_init(&so);
        so.max_context = 2048;
        /* HZ_BENCH_MAX_CONTEXT: a session as hz-bench's (255; the positions past it are not timed then) */
        hz_env_u32("HZ_BENCH_MAX_CONTEXT", 64, 65536, &so.max_context);
        st = hz_session_create(m, &so, &s);
        const int mi = nsweep ? 0 : md;
        if (!st) st = hz_gpu_session_set_decode(s, modes[mi].graph, modes[mi].pdl, 0);
        if (st) {
            printf("FAIL: session: %s\n", hz_last_error_message());
            bad = 1;
            break;
        }
        int32_t tok = 1;
        uint64_t trace = 0xcbf29ce484222325ull;
        double a = time_steps(s, 32, nsteps, &tok, &trace);
#ifdef HZ_TIMELINE
        if (md == 0) timeline_report(s, &cfg, 20, &tok, &trace); /* the 20 positions after those */
#endif
        /* around position 200: where hz-bench's measured steps are (attention over 2 to 5 chunks) */
        double mid = time_steps(s, 200 - nsteps / 2, nsteps, &tok, &trace);
        /* device time of the same step without the host's part, at the position after those */
        const double rep = modes[mi].graph ? time_replays(s, nsteps, tok) : 0;
        double b2 = so.max_context >= 1024 + nsteps ? time_steps(s, 1024 - nsteps / 2, nsteps, &tok, &trace) : 0.0;
        char *js = NULL;
        const char *path_s = "?";
        char dp[64] = "?";
        if (hz_session_stats_json(s, &js) == HZ_OK) {
            const char *p = strstr(js, "\"decode_path\":\"");
            if (p) {
                p += strlen("\"decode_path\":\"");
                size_t i = 0;
                while (p[i] && p[i] != '"' && i + 1 < sizeof dp) {
                    dp[i] = p[i];
                    i++;
                }
                dp[i] = '\0';
            }
            path_s = dp;
        }
        if (a < 0 || mid < 0 || b2 < 0 || rep < 0) bad = 1;
        if (rep > 0)
            printf("  %-12s replayed back to back at pos %u: %.3f ms/step (%.1f us a step less than through the API at ~200)\n",
                   modes[mi].name, 200 + nsteps - nsteps / 2, rep, (mid - rep) * 1e3);
        char far[64] = "pos ~1024 - (past max_context)";
        if (b2 > 0) snprintf(far, sizeof far, "pos ~1024 %.3f ms/step = %7.1f tok/s", b2, 1e3 / b2);
        printf("  %-12s (%s): pos 32..%u %.3f ms/step = %7.1f tok/s | pos ~200 %.3f ms/step = %7.1f tok/s | %s | "
               "tokens %016llx\n",
               modes[mi].name, path_s, 32 + nsteps, a, 1e3 / a, mid, 1e3 / mid, far, (unsigned long long)trace);
        if (js && md == 0 && strstr(js, "\"graph_fallback\":\"")) printf("  %s\n", strstr(js, "\"graph_fallback\""));
        hz_free(js);
        if (md == 0) {
            graph_ms[0] = a;
            graph_ms[1] = b2;
        }
        hz_session_destroy(s);
    }
    if (!bad && nmodes == 3) {
        const uint32_t pos[2] = {32 + nsteps / 2, 1024};
        double sums[2];
        nonrouted_breakdown(&cfg, pos, graph_ms[1] > 0 ? 2 : 1, sums, graph_ms, 2048, reps); /* ~1024: if timed */
    }
    if (m && hz_model_destroy(m)) bad = 1;
    if (c && hz_cache_destroy(c)) bad = 1;
    if (d && hz_device_close(d)) bad = 1;
    hz_host_backing_close(b);
    return bad;
}

int main(int argc, char **argv) {
    const int step_mode = argc > 1 && strcmp(argv[1], "--step") == 0;
    int reps = !step_mode && argc > 1 && argv[1][0] != '-' ? atoi(argv[1]) : 200;
    if (reps < 10) reps = 10;
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    if (hz_decode_device_info(g_stream, 5632, &g_dev)) { /* as a Qwen model sets it up */
        printf("FAIL: %s\n", hz_last_error_message());
        return 1;
    }
    printf("device: %s, %d SMs, L2 %d MB; decode GEMV grid bound %u blocks\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20, g_dev.gemv_grid);
    if (step_mode) {
        const char *arch = argc > 2 ? argv[2] : "olmoe";
        const uint32_t experts = argc > 3 ? (uint32_t)atoi(argv[3]) : 16u;
        const uint32_t nsteps = argc > 4 ? (uint32_t)atoi(argv[4]) : 64u;
        int bad = step_bench(arch, experts, nsteps < 8 ? 8 : nsteps, 40);
        printf(bad ? "bench_model_ops --step: FAILED\n" : "bench_model_ops --step: OK\n");
        return bad;
    }
    if (argc > 1 && strcmp(argv[1], "--attention-check") == 0) { /* the attention's checks alone, untimed */
        const int bad = attention_cases(0);
        printf(bad ? "bench_model_ops --attention-check: FAILED\n" : "bench_model_ops --attention-check: OK\n");
        return bad;
    }
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS) {
        printf("FAIL: cublasCreate\n");
        return 1;
    }
    void *ws;
    CK(cudaMalloc(&ws, 32u << 20));
    if (cublasSetWorkspace(g_blas, ws, 32u << 20) != CUBLAS_STATUS_SUCCESS) printf("(cublasSetWorkspace failed)\n");
    g_copy_gbs = copy_ceiling();
    printf("device-to-device copy: %.1f GB/s (read + write): the bandwidth ceiling below\n", g_copy_gbs);
    int bad = 0;
    if (argc > 1 && strcmp(argv[1], "--screen") == 0) {
        reps = argc > 2 ? atoi(argv[2]) : 200;
        if (reps < 10) reps = 10;
        bad |= screen_case("olmoe lm_head 50304x2048", 50304, 2048, reps);
        bad |= screen_case("qwen lm_head 151936x2048", 151936, 2048, reps);
        printf(bad ? "bench_model_ops --screen: FAILED\n" : "bench_model_ops --screen: OK\n");
        cublasDestroy(g_blas);
        cudaFree(ws);
        return bad;
    }
    bad |= gemv_case("dense 2048x2048 (o_proj)", 2048, 2048, 1, reps);
    bad |= gemv_case("olmoe qkv (fused x3)", 2048, 2048, 3, reps);
    bad |= gemv_case("olmoe router", 64, 2048, 1, reps);
    bad |= gemv_case("qwen shared gate+up", 5632, 2048, 2, reps);
    bad |= gemv_case("qwen shared down", 2048, 5632, 1, reps);
    bad |= gemv_case("olmoe lm_head", 50304, 2048, 1, reps);
    bad |= gemv_case("qwen lm_head", 151936, 2048, 1, reps);
    bad |= argmax_case(50304, 2048);
    bad |= attention_cases(reps);
    cublasDestroy(g_blas);
    cudaFree(ws);
    printf(bad ? "bench_model_ops: a check FAILED\n" : "bench_model_ops: OK\n");
    return bad;
}
