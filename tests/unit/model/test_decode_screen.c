/* The screened greedy pick (hz_decode_screen, cuda/model/decode_screen.cu) against the host (suite
 * 'gpu': needs a CUDA device, else it exits 77, meson's "skipped").
 *
 * The host sums every row in the decode GEMV's order (gemv_host_sum.h, which test_decode_gemv.c checks
 * bit for bit against the GEMV), on the x the screen stored; its argmax (largest, lowest row on ties) is
 * the answer. For every row the exact sum must lie between the lower and upper bounds the screen
 * stored; the pick must be the host's argmax and its value the host's sum bit for bit (the same order of
 * additions); the pick must leave the lower-bound word cleared. The rows include planted traps: a row
 * B just above a row A at a higher index with the same INT8 codes and scale (the screened values tie, so
 * the screen alone would pick A), and copies of B further on (exact ties: B must win); a run where the
 * screened values' own argmax differs from the exact one is counted, and at least one is required, so
 * the exact second pass is known to have been needed. "Tight" rows have their quantization errors
 * aligned with x, so that they use most of their bound: at least half is required, so a bound half as
 * large would have failed the bracket check; "tight levels" rows do the same for the integer path's
 * term for x's levels (codes of the sign of each input's level error, on an x whose inputs all but one
 * lie below half a level; on that x the random rows' bounds are wide, so they are not held to the
 * pruning rate below). Random rows must prune: fewer than 5% of them summed
 * again. Outputs start poisoned. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/core.h"
#include "core/fp16.h"
#include "horizon/horizon.h"

#include "../../../cuda/model/decode_screen.cuh"
#include "decode_test_dev.h"
#include "gemv_host_sum.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float urand(void) { return test_urand(&g_rng); }

/* The next FP16 value away from zero in the direction of `dir`'s sign. */
static uint16_t f16_step(uint16_t h, float dir) {
    const float v = hz_f16_to_f32(h);
    if ((v >= 0.0f) == (dir >= 0.0f)) return (uint16_t)(h + 1u); /* magnitude up, same sign */
    return (uint16_t)(h - 1u);                                   /* toward zero */
}

typedef struct {
    const char *name;
    uint32_t rows, in;
    int plain;   /* x given (PLAIN) with a wide dynamic range, else built by the residual norm */
    int traps;   /* plant A, B, copies of B */
    int same;    /* every row the same */
    int zeros;   /* some all-zero rows */
    int tight;   /* every fifth row with its error aligned: 1, its weights' quantization error with x; 2, its
                  * codes with the error of x's levels (the integer path, rows of at most 2,048 values) */
} shape;

/* The integer path's largest level for rows of n values (decode_screen.cuh): no sum of n products of a
 * code (|q| <= 127) and a level leaves int32, and a level fits 16 bits. */
static uint32_t levels_p(uint32_t n) {
    const uint32_t p = 0x7fffffffu / (127u * n);
    return p < 32767u ? p : 32767u;
}

static int failures = 0, flips = 0;
#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        if (!(cond)) {                                                                                     \
            printf("FAIL %s: ", sh->name);                                                                 \
            printf(__VA_ARGS__);                                                                           \
            printf("\n");                                                                                  \
            failures++;                                                                                    \
            goto out;                                                                                      \
        }                                                                                                  \
    } while (0)

static void *dalloc(size_t n) {
    void *d = NULL;
    return cudaMalloc(&d, n) == cudaSuccess ? d : NULL;
}

static void run_shape(const shape *sh, const hz_decode_dev *dev, cudaStream_t stream, uint32_t epoch) {
    const uint32_t R = sh->rows, N = sh->in;
    uint16_t *w = calloc((size_t)R * N, 2), *h = calloc(N, 2), *nw = calloc(N, 2), *x = calloc(N, 2);
    float *ub = calloc(R, 4), *lb = calloc(R, 4), *exact = calloc(R, 4), *scale = calloc(R, 4), value = NAN;
    int8_t *q = calloc((size_t)R * N, 1);
    uint16_t *d_w = NULL, *d_h = NULL, *d_nw = NULL, *d_x = NULL, *d_xo = NULL, *d_h2 = NULL;
    int8_t *d_q = NULL;
    float *d_scale = NULL, *d_coef = NULL, *d_qnorm = NULL, *d_ub = NULL, *d_lb = NULL, *d_value = NULL;
    unsigned long long *d_best = NULL, *d_summed = NULL, summed = 0, best_word = 1;
    int32_t *d_arg = NULL, arg = -7;
    hz_dstep *d_step = NULL;
    void *d_tail = NULL;
    if (!w || !h || !nw || !x || !ub || !lb || !exact || !scale || !q) {
        printf("FAIL %s: host allocation\n", sh->name);
        failures++;
        goto out;
    }
    for (uint32_t i = 0; i < N; i++) {
        h[i] = hz_f32_to_f16(urand() * 2.0f);
        nw[i] = hz_f32_to_f16(1.0f + 0.5f * urand());
        /* plain x: magnitudes from 2^-12 to 2^12 */
        x[i] = hz_f32_to_f16(ldexpf(urand(), (int)(i * 7u % 25u) - 12));
    }
    if (sh->tight == 2 && sh->plain) {
        /* x for the tight levels: one input at 1 (it sets sigma = 1 / P, rounded up), every other one
         * 0.32-0.44 of sigma, so its level is 0 and its whole value the level's error: the level term
         * then outweighs the weights' rounding term, which scales with sum |x| */
        const uint32_t P = levels_p(N);
        const float sigma = 1.0f / (float)P;
        x[0] = hz_f32_to_f16(1.0f);
        for (uint32_t i = 1; i < N; i++) {
            const float u = urand();
            x[i] = hz_f32_to_f16((u >= 0.0f ? 1.0f : -1.0f) * (0.32f + 0.12f * fabsf(u)) * sigma);
        }
    }
    for (size_t i = 0; i < (size_t)R * N; i++) w[i] = hz_f32_to_f16(0.05f * urand());
    if (sh->zeros)
        for (uint32_t r = 3; r < R; r += 97u) memset(w + (size_t)r * N, 0, (size_t)N * 2);
    if (sh->same)
        for (uint32_t r = 1; r < R; r++) memcpy(w + (size_t)r * N, w, (size_t)N * 2);

    d_w = dalloc((size_t)R * N * 2);
    d_q = dalloc((size_t)R * N);
    d_scale = dalloc((size_t)R * 4);
    d_coef = dalloc((size_t)R * 4);
    d_qnorm = dalloc((size_t)R * 4);
    d_ub = dalloc((size_t)R * 4);
    d_lb = dalloc((size_t)R * 4);
    d_value = dalloc(4);
    d_h = dalloc((size_t)N * 2);
    d_h2 = dalloc((size_t)N * 2);
    d_nw = dalloc((size_t)N * 2);
    d_x = dalloc((size_t)N * 2);
    d_xo = dalloc((size_t)N * 2);
    d_best = dalloc(8);
    d_summed = dalloc(8);
    d_arg = dalloc(4);
    d_step = dalloc(sizeof(hz_dstep));
    d_tail = dalloc(hz_decode_tail_bytes(dev));
    CHECK(d_w && d_q && d_scale && d_coef && d_qnorm && d_ub && d_lb && d_value && d_h && d_h2 && d_nw && d_x && d_xo && d_best &&
              d_summed && d_arg && d_step && d_tail,
          "device allocation");
    CHECK(cudaMemcpy(d_h, h, (size_t)N * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpy(d_nw, nw, (size_t)N * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemcpy(d_x, x, (size_t)N * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
              cudaMemset(d_best, 0, 8) == cudaSuccess && cudaMemset(d_summed, 0, 8) == cudaSuccess &&
              cudaMemset(d_tail, 0, hz_decode_tail_bytes(dev)) == cudaSuccess &&
              cudaMemset(d_xo, 0xff, (size_t)N * 2) == cudaSuccess &&
              cudaMemset(d_ub, 0xff, (size_t)R * 4) == cudaSuccess &&
              cudaMemset(d_lb, 0xff, (size_t)R * 4) == cudaSuccess && cudaMemset(d_value, 0xff, 4) == cudaSuccess &&
              cudaMemcpy(d_arg, &arg, 4, cudaMemcpyHostToDevice) == cudaSuccess,
          "uploads");
    hz_dstep st = {0, 0, epoch};
    CHECK(cudaMemcpy(d_step, &st, sizeof st, cudaMemcpyHostToDevice) == cudaSuccess, "step upload");

    hz_dscreen_args a;
    memset(&a, 0, sizeof a);
    a.x.in = N;
    a.x.step = d_step;
    a.x.x_out = d_xo;
    if (sh->plain) {
        a.x.x_mode = HZ_DGEMV_X_PLAIN;
        a.x.x = d_x;
    } else {
        a.x.x_mode = HZ_DGEMV_X_RESNORM;
        a.x.h_in = d_h;
        a.x.norm_w = d_nw;
        a.x.eps = 1e-5f;
        a.x.h_out = d_h2;
    }
    /* The traps and the tight rows need x: build it once with the screen itself (block 0 stores it), on
     * plain rows. */
    if (sh->traps || sh->tight) {
        CHECK(cudaMemcpy(d_w, w, (size_t)R * N * 2, cudaMemcpyHostToDevice) == cudaSuccess, "rows upload");
        CHECK(hz_decode_screen_prepare(d_w, R, N, d_q, d_scale, d_coef, d_qnorm, stream) == HZ_OK, "prepare: %s",
              hz_last_error_message());
        a.w = d_w, a.q = d_q, a.scale = d_scale, a.coef = d_coef, a.qnorm = d_qnorm, a.rows = R, a.ub = d_ub, a.best = d_best;
        a.argmax_out = d_arg, a.tail_scratch = d_tail;
        const hz_klaunch k0 = {stream, 0};
        CHECK(hz_decode_screen(&a, dev, &k0) == HZ_OK, "screen (x): %s", hz_last_error_message());
        CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");
        uint16_t *xb = calloc(N, 2);
        CHECK(xb && cudaMemcpy(xb, d_xo, (size_t)N * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "x download");
        /* Tight rows: largest magnitude 0.5 at column 0 (scale s = 0.5 / 127), every other weight
         * s (k + 0.4 sign(x_j)) for a random integer k, so its code is k and its error 0.4 s with x_j's
         * sign: the errors add up over the row as the bound assumes in the worst case. */
        const float s0 = 0.5f / 127.0f;
        for (uint32_t r = 0; sh->tight == 1 && r < R; r += 5u) {
            uint16_t *T = w + (size_t)r * N;
            T[0] = hz_f32_to_f16(hz_f16_to_f32(xb[0]) >= 0.0f ? 0.5f : -0.5f);
            for (uint32_t i = 1; i < N; i++) {
                const float k = rintf(100.0f * urand()), sg = hz_f16_to_f32(xb[i]) >= 0.0f ? 1.0f : -1.0f;
                T[i] = hz_f32_to_f16(s0 * (k + 0.4f * sg));
            }
        }
        /* Tight levels: the integer path quantizes x to levels p_j = rint(x_j / sigma), sigma = max|x| / P
         * rounded up (decode_screen.cuh). Each such row has exact codes (weights +-127 * 2^-10: scale
         * 2^-10, no quantization error) of the sign of x_j - sigma p_j wherever that error is 0.3-0.47 of
         * sigma (clear of the rounding's half-way point), zero elsewhere: the levels' errors add up over
         * the row as the bound's level term assumes in the worst case. */
        if (sh->tight == 2) {
            const uint32_t P = levels_p(N);
            float xmax = 0.0f;
            for (uint32_t i = 0; i < N; i++) xmax = fmaxf(xmax, fabsf(hz_f16_to_f32(xb[i])));
            const double sig = (double)xmax / (double)P;
            float sigma = (float)sig;
            if ((double)sigma < sig) sigma = nextafterf(sigma, INFINITY);
            const float inv = 1.0f / sigma, wv = 127.0f * 0x1p-10f;
            for (uint32_t r = 0; r < R; r += 5u) {
                uint16_t *T = w + (size_t)r * N;
                uint32_t used = 0;
                for (uint32_t i = 0; i < N; i++) {
                    const float t = hz_f16_to_f32(xb[i]) * inv, f = t - rintf(t);
                    T[i] = 0;
                    if (fabsf(f) > 0.3f && fabsf(f) < 0.47f) {
                        T[i] = hz_f32_to_f16(f > 0.0f ? wv : -wv);
                        used++;
                    }
                }
                if (!used) T[0] = hz_f32_to_f16(wv); /* the scale stays 2^-10 */
            }
        }
        if (sh->traps) {
            /* A: large weights of x's sign; its largest magnitude at column 0 (the scale), kept in B */
            const uint32_t ra = R / 3u, rb = R / 2u;
            uint16_t *A = w + (size_t)ra * N, *B = w + (size_t)rb * N;
            for (uint32_t i = 0; i < N; i++) {
                const float sgn = hz_f16_to_f32(xb[i]) >= 0.0f ? 1.0f : -1.0f;
                A[i] = hz_f32_to_f16(sgn * (0.25f + 0.2f * fabsf(urand())));
            }
            A[0] = hz_f32_to_f16(hz_f16_to_f32(xb[0]) >= 0.0f ? 0.5f : -0.5f);
            memcpy(B, A, (size_t)N * 2);
            /* B: a few weights one FP16 step further in x's direction, far below half an INT8 step
             * (0.5 / 127 / 2 ~ 2e-3 against steps of 2^-12 ~ 2.4e-4 near 0.25-0.45) */
            const float sa = 0.5f / 127.0f; /* A's scale, as the preparation computes it */
            for (uint32_t i = 1; i < N; i += 61u) {
                if (!(xb[i] & 0x7fffu)) continue;
                const uint16_t nb = f16_step(B[i], hz_f16_to_f32(xb[i]));
                if (rintf(hz_f16_to_f32(nb) / sa) == rintf(hz_f16_to_f32(A[i]) / sa)) B[i] = nb; /* same code */
            }
            for (uint32_t r = rb + 1u + (R - rb) / 3u; r < R; r += (R - rb) / 3u + 1u) memcpy(w + (size_t)r * N, B, (size_t)N * 2);
        }
        free(xb);
        CHECK(cudaMemset(d_best, 0, 8) == cudaSuccess, "best reset");
        st.epoch = epoch + 1u;
        CHECK(cudaMemcpy(d_step, &st, sizeof st, cudaMemcpyHostToDevice) == cudaSuccess, "step upload");
    }
    CHECK(cudaMemcpy(d_w, w, (size_t)R * N * 2, cudaMemcpyHostToDevice) == cudaSuccess, "rows upload");
    CHECK(hz_decode_screen_prepare(d_w, R, N, d_q, d_scale, d_coef, d_qnorm, stream) == HZ_OK, "prepare: %s",
          hz_last_error_message());
    a.w = d_w, a.q = d_q, a.scale = d_scale, a.coef = d_coef, a.qnorm = d_qnorm, a.rows = R, a.ub = d_ub, a.best = d_best;
    a.argmax_out = d_arg, a.summed = d_summed, a.tail_scratch = d_tail, a.lb = d_lb, a.value_out = d_value;
    arg = -7;
    CHECK(cudaMemcpy(d_arg, &arg, 4, cudaMemcpyHostToDevice) == cudaSuccess, "poison");
    const hz_klaunch k = {stream, 1};
    CHECK(hz_decode_screen(&a, dev, &k) == HZ_OK, "screen: %s", hz_last_error_message());
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync: %s", cudaGetErrorString(cudaGetLastError()));
    CHECK(cudaMemcpy(&arg, d_arg, 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(&summed, d_summed, 8, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(ub, d_ub, (size_t)R * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(lb, d_lb, (size_t)R * 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(&value, d_value, 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(&best_word, d_best, 8, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(x, d_xo, (size_t)N * 2, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(q, d_q, (size_t)R * N, cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(scale, d_scale, (size_t)R * 4, cudaMemcpyDeviceToHost) == cudaSuccess,
          "downloads");
    uint32_t best = 0, sbest = 0;
    double sbest_v = -INFINITY, tight_used = 0.0;
    for (uint32_t r = 0; r < R; r++) {
        exact[r] = gemv_row_sum(w + (size_t)r * N, x, N) + 0.0f; /* + 0: the GEMV's absent bias */
        CHECK(isfinite(exact[r]), "row %u: exact sum %g", r, exact[r]);
        CHECK(exact[r] <= ub[r], "row %u: exact %.9g above its upper bound %.9g", r, exact[r], ub[r]);
        CHECK(lb[r] <= exact[r], "row %u: exact %.9g below its lower bound %.9g", r, exact[r], lb[r]);
        if (sh->tight && r % 5u == 0) { /* how much of its bound the row's error used */
            const double half = ((double)ub[r] - lb[r]) / 2.0, mid = ((double)ub[r] + lb[r]) / 2.0;
            const double used = half > 0.0 ? fabs(mid - exact[r]) / half : 0.0;
            if (used > tight_used) tight_used = used;
        }
        if (exact[r] > exact[best]) best = r;
        double sv = 0.0; /* the screened value, in double: its argmax tells whether the second pass mattered */
        for (uint32_t i = 0; i < N; i++) sv += (double)q[(size_t)r * N + i] * hz_f16_to_f32(x[i]);
        sv *= scale[r];
        if (sv > sbest_v) {
            sbest_v = sv;
            sbest = r;
        }
    }
    CHECK(arg == (int32_t)best, "pick %d, the host's argmax %u (%.9g; the pick's %.9g)", arg, best, exact[best],
          arg >= 0 && (uint32_t)arg < R ? exact[arg] : NAN);
    /* the pick's value is the GEMV's sum of that row, bit for bit (the same order of additions) */
    CHECK(memcmp(&value, &exact[best], 4) == 0, "the pick's value %.9g is not the GEMV's sum %.9g of row %u", value,
          exact[best], best);
    CHECK(best_word == 0, "the pick left the lower-bound word at %#llx, not cleared", best_word);
    /* the tight rows come within a factor 2 of their bound: a bound half as large would have failed above */
    if (sh->tight) CHECK(tight_used >= 0.5, "the tight rows used only %.3f of their bound", tight_used);
    if (sbest != best) flips++;
    if (sh->same) CHECK(summed == R, "identical rows: %llu of %u summed again (all expected)", summed, R);
    if (!sh->same && !sh->traps && !sh->zeros && sh->tight != 2 && R >= 1000u)
        CHECK(summed * 20u < R, "%llu of %u rows summed again (random rows: fewer than 5%% expected)", summed, R);
    printf("%-34s rows %6u x %5u: pick %u, %llu rows summed again, screened argmax %s", sh->name, R, N, best,
           summed, sbest == best ? "agrees" : "differs");
    if (sh->tight) printf(", tight rows used %.3f of their bound", tight_used);
    printf("\n");
out:
    cudaFree(d_w), cudaFree(d_q), cudaFree(d_scale), cudaFree(d_coef), cudaFree(d_qnorm), cudaFree(d_ub), cudaFree(d_lb), cudaFree(d_h);
    cudaFree(d_value);
    cudaFree(d_h2), cudaFree(d_nw), cudaFree(d_x), cudaFree(d_xo), cudaFree(d_best), cudaFree(d_summed);
    cudaFree(d_arg), cudaFree(d_step), cudaFree(d_tail);
    free(w), free(h), free(nw), free(x), free(ub), free(lb), free(exact), free(scale), free(q);
}

/* Refusals: a width that is not a multiple of 16, a missing x store, SILU x. */
static void refusals(const hz_decode_dev *dev, cudaStream_t stream) {
    const shape s0 = {"refusals", 0, 0, 0, 0, 0, 0, 0}, *sh = &s0;
    hz_dscreen_args a;
    memset(&a, 0, sizeof a);
    const hz_klaunch k = {stream, 1};
    CHECK(hz_decode_screen(NULL, dev, &k) == HZ_EINVAL, "NULL arguments accepted");
    CHECK(hz_decode_screen(&a, dev, &k) == HZ_EINVAL, "empty arguments accepted");
    CHECK(!hz_decode_screen_supported(2056) && hz_decode_screen_supported(2048) && !hz_decode_screen_supported(0),
          "supported widths");
    CHECK(hz_decode_screen_prepare((const uint16_t *)8, 4, 24, (int8_t *)8, (float *)8, (float *)8, (float *)8, stream) ==
              HZ_EUNSUPPORTED,
          "width 24 accepted: %s", hz_last_error_message());
    CHECK(hz_decode_screen_rounding_factor(2048) > 2.01f * 2048.0f * 0x1p-24f, "rounding factor %g",
          (double)hz_decode_screen_rounding_factor(2048));
out:
    return;
}

int main(void) {
    cudaStream_t stream;
    hz_decode_dev dev;
    int rc = decode_test_device("test_decode_screen", 8192, &stream, &dev);
    if (rc) return rc;
    const shape shapes[] = {
        {"random, OLMoE lm_head shape", 50304, 2048, 0, 0, 0, 0, 0},
        {"random, residual norm", 4099, 1040, 0, 0, 0, 0, 0},
        {"random, plain x of wide range", 3001, 4096, 1, 0, 0, 0, 0},
        {"traps (tie by codes, exact ties)", 5003, 2048, 0, 1, 0, 0, 0},
        {"traps, plain x", 777, 1024, 1, 1, 0, 0, 0},
        {"traps, narrow rows", 257, 64, 0, 1, 0, 0, 0},
        {"identical rows", 300, 512, 0, 0, 1, 0, 0},
        {"zero rows", 2000, 256, 0, 0, 0, 1, 0},
        {"one row", 1, 16, 0, 0, 0, 0, 0},
        {"one tile", 32, 16, 1, 0, 0, 0, 0},
        {"tight rows", 3001, 2048, 0, 0, 0, 0, 1},
        {"tight rows, plain x", 1001, 1040, 1, 0, 0, 0, 1},
        {"tight rows and traps", 2003, 512, 0, 1, 0, 0, 1},
        {"tight levels", 3001, 2048, 1, 0, 0, 0, 2},
        {"tight levels, narrow rows", 1001, 272, 1, 0, 0, 0, 2},
    };
    uint32_t epoch = 1;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++, epoch += 2u) run_shape(&shapes[i], &dev, stream, epoch);
    /* more traps with fresh weights: each must pick B */
    for (int t = 0; t < 12; t++, epoch += 2u) {
        const shape s = {"traps, repeated", 1500u + 37u * (uint32_t)t, 2048, t & 1, 1, 0, 0, 0};
        run_shape(&s, &dev, stream, epoch);
    }
    refusals(&dev, stream);
    if (flips == 0) {
        printf("FAIL: the screened values' argmax never differed from the exact one: the traps did not work\n");
        failures++;
    }
    cudaStreamDestroy(stream);
    printf("%s: %d failures, the screen alone would have picked wrong in %d runs\n", failures ? "FAILED" : "OK",
           failures, flips);
    return failures ? 1 : 0;
}
