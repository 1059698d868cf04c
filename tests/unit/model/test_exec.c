/* The CPU reference W4A16 executor against a naive dequantize-then-matmul (double accumulation) on
 * random data, and its grouping invariance: splitting the experts into several calls, or running the
 * tokens one by one, gives bit-identical accumulators. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exec/exec.h"
#include "format/qpack.h"

static uint64_t g_rng = 12345u;
static float urand(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

typedef struct fixture {
    hz_expert_layout layout;
    uint32_t E, T, K;
    uint8_t **blobs;
    float **gate, **up, **down; /* dequantized, [rows x k] */
    hz_f16 *x;
    uint32_t *ids;
    float *w;
} fixture;

static void fixture_make(fixture *f, uint32_t hidden, uint32_t inter, uint32_t E, uint32_t T, uint32_t K) {
    memset(f, 0, sizeof *f);
    hz_expert_layout_init(&f->layout, hidden, inter);
    f->E = E, f->T = T, f->K = K;
    f->blobs = calloc(E, sizeof *f->blobs);
    f->gate = calloc(E, sizeof(float *));
    f->up = calloc(E, sizeof(float *));
    f->down = calloc(E, sizeof(float *));
    size_t n = (size_t)hidden * inter;
    float *g = malloc(n * sizeof(float)), *u = malloc(n * sizeof(float)), *d = malloc(n * sizeof(float));
    for (uint32_t e = 0; e < E; e++) {
        for (size_t i = 0; i < n; i++) {
            g[i] = urand() / sqrtf((float)hidden);
            u[i] = urand() / sqrtf((float)hidden);
            d[i] = urand() / sqrtf((float)inter);
        }
        /* a zero block and an outlier exercise the scale edge cases */
        if (e == 1)
            for (uint32_t i = 0; i < 256 && i < hidden; i++) g[i] = 0.0f;
        if (e == 2) u[5] = 3.0f;
        f->blobs[e] = aligned_alloc(256, (f->layout.blob_bytes + 255) / 256 * 256);
        assert_int_equal(hz_expert_pack(&f->layout, g, u, d, f->blobs[e], "test"), HZ_OK);
        const hz_expert_layout *L = &f->layout;
        f->gate[e] = malloc(n * sizeof(float));
        f->up[e] = malloc(n * sizeof(float));
        f->down[e] = malloc(n * sizeof(float));
        for (uint32_t r = 0; r < inter; r++) {
            hz_qpack_dequantize_row(f->blobs[e] + L->gate_q + (size_t)r * L->gate.kp / 2,
                                    (const hz_f16 *)(f->blobs[e] + L->gate_s) + (size_t)r * L->gate.nblocks,
                                    hidden, f->gate[e] + (size_t)r * hidden);
            hz_qpack_dequantize_row(f->blobs[e] + L->up_q + (size_t)r * L->up.kp / 2,
                                    (const hz_f16 *)(f->blobs[e] + L->up_s) + (size_t)r * L->up.nblocks,
                                    hidden, f->up[e] + (size_t)r * hidden);
        }
        for (uint32_t r = 0; r < hidden; r++)
            hz_qpack_dequantize_row(f->blobs[e] + L->down_q + (size_t)r * L->down.kp / 2,
                                    (const hz_f16 *)(f->blobs[e] + L->down_s) + (size_t)r * L->down.nblocks,
                                    inter, f->down[e] + (size_t)r * inter);
    }
    free(g);
    free(u);
    free(d);
    f->x = malloc((size_t)T * hidden * sizeof(hz_f16));
    for (size_t i = 0; i < (size_t)T * hidden; i++) f->x[i] = hz_f32_to_f16(2.0f * urand());
    f->ids = malloc((size_t)T * K * sizeof(uint32_t));
    f->w = malloc((size_t)T * K * sizeof(float));
    for (uint32_t t = 0; t < T; t++) {
        /* K distinct experts per token, starting at a random offset (unsorted on purpose) */
        uint32_t start = (uint32_t)((urand() + 1.0f) * 0.5f * (float)E) % E;
        for (uint32_t k = 0; k < K; k++) {
            f->ids[t * K + k] = (start + k * 3u) % E;
            f->w[t * K + k] = 0.05f + 0.5f * (urand() + 1.0f) * 0.5f;
        }
    }
}

static void fixture_free(fixture *f) {
    for (uint32_t e = 0; e < f->E; e++) {
        free(f->blobs[e]);
        free(f->gate[e]);
        free(f->up[e]);
        free(f->down[e]);
    }
    free(f->blobs);
    free(f->gate);
    free(f->up);
    free(f->down);
    free(f->x);
    free(f->ids);
    free(f->w);
}

/* Runs the executor over experts [lo, hi) (all of them routed or not) into acc. */
static void run_group(hz_executor *ex, const fixture *f, uint32_t t0, uint32_t nt, uint32_t lo, uint32_t hi,
                      float *acc) {
    uint32_t ids[64];
    const uint8_t *rows[64];
    for (uint32_t e = lo; e < hi; e++) {
        ids[e - lo] = e;
        rows[e - lo] = f->blobs[e];
    }
    hz_moe_call c = {
        .layout = &f->layout,
        .n_tokens = nt,
        .x = f->x + (size_t)t0 * f->layout.hidden,
        .top_k = f->K,
        .topk_ids = f->ids + (size_t)t0 * f->K,
        .topk_w = f->w + (size_t)t0 * f->K,
        .n_group = hi - lo,
        .group_ids = ids,
        .rows = rows,
        .acc = acc + (size_t)t0 * f->layout.hidden,
    };
    assert_int_equal(ex->ops->moe(ex, &c), HZ_OK);
}

static void check_against_naive(uint32_t hidden, uint32_t inter) {
    fixture f;
    fixture_make(&f, hidden, inter, 8, 5, 3);
    hz_executor *ex = NULL;
    assert_int_equal(hz_executor_create("reference", "cpu", &f.layout, &ex), HZ_OK);
    assert_string_equal(ex->ops->accum_dtype, "f32");
    float *acc = calloc((size_t)f.T * hidden, sizeof(float));
    run_group(ex, &f, 0, f.T, 0, f.E, acc);

    double *a = malloc(inter * sizeof(double));
    double max_err = 0.0, max_ref = 0.0;
    for (uint32_t t = 0; t < f.T; t++) {
        double *out = calloc(hidden, sizeof(double));
        for (uint32_t k = 0; k < f.K; k++) {
            uint32_t e = f.ids[t * f.K + k];
            for (uint32_t i = 0; i < inter; i++) {
                double g = 0, u = 0;
                for (uint32_t h = 0; h < hidden; h++) {
                    double xv = hz_f16_to_f32(f.x[(size_t)t * hidden + h]);
                    g += (double)f.gate[e][(size_t)i * hidden + h] * xv;
                    u += (double)f.up[e][(size_t)i * hidden + h] * xv;
                }
                a[i] = hz_round_f16((float)(g / (1.0 + exp(-g)) * u));
            }
            for (uint32_t j = 0; j < hidden; j++) {
                double y = 0;
                for (uint32_t i = 0; i < inter; i++) y += (double)f.down[e][(size_t)j * inter + i] * a[i];
                out[j] += (double)f.w[t * f.K + k] * y;
            }
        }
        for (uint32_t j = 0; j < hidden; j++) {
            double d = fabs(out[j] - (double)acc[(size_t)t * hidden + j]);
            if (d > max_err) max_err = d;
            if (fabs(out[j]) > max_ref) max_ref = fabs(out[j]);
        }
        free(out);
    }
    print_message("hidden %u inter %u: max |exec - naive| = %.3g, max |naive| = %.3g\n", hidden, inter,
                  max_err, max_ref);
    /* FP32 vs double accumulation of ~1e3 terms, plus an occasional one-ulp flip of an FP16 a_i
     * (measured about 1e-5 relative) */
    assert_true(max_ref > 0.01);
    assert_true(max_err <= 2e-4 * max_ref);
    free(a);
    free(acc);
    hz_executor_destroy(ex);
    fixture_free(&f);
}

static void test_exec_matches_naive(void **state) {
    (void)state;
    check_against_naive(256, 256);
    check_against_naive(512, 320); /* down K pads 320 -> 512 */
    check_against_naive(300, 200); /* both K pad, odd sizes */
}

static void test_exec_grouping_invariant(void **state) {
    (void)state;
    fixture f;
    fixture_make(&f, 256, 320, 8, 6, 4);
    const uint32_t H = f.layout.hidden;
    hz_executor *ex = NULL;
    assert_int_equal(hz_executor_create("auto", "cpu", &f.layout, &ex), HZ_OK);
    assert_string_equal(ex->ops->name, "reference");
    float *one = calloc((size_t)f.T * H, sizeof(float));
    float *split = calloc((size_t)f.T * H, sizeof(float));
    float *tok = calloc((size_t)f.T * H, sizeof(float));
    run_group(ex, &f, 0, f.T, 0, f.E, one);
    /* groups {0}, {1,2,3}, {4,5}, {6,7} */
    run_group(ex, &f, 0, f.T, 0, 1, split);
    run_group(ex, &f, 0, f.T, 1, 4, split);
    run_group(ex, &f, 0, f.T, 4, 6, split);
    run_group(ex, &f, 0, f.T, 6, 8, split);
    for (uint32_t t = 0; t < f.T; t++) {
        run_group(ex, &f, t, 1, 0, 3, tok);
        run_group(ex, &f, t, 1, 3, 8, tok);
    }
    assert_memory_equal(one, split, (size_t)f.T * H * sizeof(float));
    assert_memory_equal(one, tok, (size_t)f.T * H * sizeof(float));
    free(one);
    free(split);
    free(tok);
    hz_executor_destroy(ex);
    fixture_free(&f);
}

static void test_exec_bad_calls(void **state) {
    (void)state;
    hz_expert_layout L;
    hz_expert_layout_init(&L, 256, 256);
    hz_executor *ex = NULL;
    assert_int_equal(hz_executor_create("grouped", "cpu", &L, &ex), HZ_EUNSUPPORTED);
    assert_null(ex);
    assert_int_equal(hz_executor_create("reference", "cuda", &L, &ex), HZ_EUNSUPPORTED);
    assert_int_equal(hz_executor_create("reference", "cpu", &L, &ex), HZ_OK);
    hz_moe_call c;
    memset(&c, 0, sizeof c);
    assert_int_equal(ex->ops->moe(ex, &c), HZ_EINVAL);
    uint32_t ids[2] = {3, 1}, tk[2] = {1, 3};
    float w[2] = {0.5f, 0.5f}, acc[256] = {0};
    hz_f16 x[256] = {0};
    static uint8_t dummy[1];
    const uint8_t *rows[2] = {dummy, dummy};
    c = (hz_moe_call){.layout = &L, .n_tokens = 1, .x = x, .top_k = 2, .topk_ids = tk, .topk_w = w,
                      .n_group = 2, .group_ids = ids, .rows = rows, .acc = acc};
    assert_int_equal(ex->ops->moe(ex, &c), HZ_EINVAL); /* ids not ascending */
    hz_executor_destroy(ex);
    hz_executor_destroy(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_matches_naive),
        cmocka_unit_test(test_exec_grouping_invariant),
        cmocka_unit_test(test_exec_bad_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
