/* lib/format/qpack: the error bound, K padding, the nibble layout, scale edge cases, expert blobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/core.h"
#include "format/qpack.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* Uniform in [-1, 1). */
static float rng_unit(void) { return (float)((double)(rng_next() >> 11) / 4503599627370496.0 - 1.0); }

/* Fills rows x k with values whose magnitude varies by block and by row, so scales cover many binades
 * (subnormal FP16 scales included). */
static void fill_random(float *x, uint32_t rows, uint32_t k) {
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t b = 0; b * HZ_QBLOCK < k; b++) {
            float mag = powf(10.0f, -8.0f + 11.0f * (rng_unit() + 1.0f) / 2.0f);
            for (uint32_t c = b * HZ_QBLOCK; c < k && c < (b + 1) * HZ_QBLOCK; c++)
                x[(uint64_t)r * k + c] = mag * rng_unit();
        }
    }
}

/* Every value within scale/2 of the original, with the scale as stored; padding codes are zero. */
static void check_bound(const float *x, uint32_t rows, uint32_t k, const uint8_t *q, const hz_f16 *s) {
    hz_qmat_shape sh;
    hz_qmat_shape_init(&sh, rows, k);
    float *deq = malloc(sizeof(float) * (k ? k : 1));
    assert_non_null(deq);
    for (uint32_t r = 0; r < rows; r++) {
        const uint8_t *q_row = q + (uint64_t)r * (sh.kp / 2);
        const hz_f16 *s_row = s + (uint64_t)r * sh.nblocks;
        hz_qpack_dequantize_row(q_row, s_row, k, deq);
        for (uint32_t c = 0; c < k; c++) {
            float scale = hz_f16_to_f32(s_row[c / HZ_QBLOCK]);
            double err = fabs((double)x[(uint64_t)r * k + c] - (double)deq[c]);
            if (!(err <= (double)scale / 2.0))
                fail_msg("row %u col %u: x=%.9g deq=%.9g err=%.9g scale=%.9g", r, c,
                         (double)x[(uint64_t)r * k + c], (double)deq[c], err, (double)scale);
            int code = hz_qpack_code(q_row, c);
            assert_true(code >= -7 && code <= 7);
        }
        for (uint32_t c = k; c < sh.kp; c++) assert_int_equal(hz_qpack_code(q_row, c), 0);
        /* the scale follows the rule: fp16(absmax / 7), one ulp up only where rounding undershot */
        for (uint32_t b = 0; b < sh.nblocks; b++) {
            float absmax = 0.0f;
            for (uint32_t c = b * HZ_QBLOCK; c < k && c < (b + 1) * HZ_QBLOCK; c++)
                absmax = fmaxf(absmax, fabsf(x[(uint64_t)r * k + c]));
            hz_f16 want = hz_f32_to_f16(absmax / 7.0f);
            assert_true(s_row[b] == want || s_row[b] == (hz_f16)(want + 1));
            if (s_row[b] != want) assert_true((double)absmax > 7.5 * (double)hz_f16_to_f32(want));
        }
    }
    free(deq);
}

static void test_roundtrip_bound_random(void **state) {
    (void)state;
    const uint32_t shapes[][2] = {{16, 2048}, {8, 1408}, {5, 320}, {3, 100}, {1, 256}, {4, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        uint32_t rows = shapes[i][0], k = shapes[i][1];
        hz_qmat_shape sh;
        hz_qmat_shape_init(&sh, rows, k);
        float *x = malloc(sizeof(float) * rows * k);
        uint8_t *q = malloc(sh.q_bytes);
        hz_f16 *s = malloc(sh.s_bytes);
        assert_non_null(x);
        assert_non_null(q);
        assert_non_null(s);
        for (int rep = 0; rep < 4; rep++) {
            fill_random(x, rows, k);
            assert_int_equal(hz_qpack_quantize(x, rows, k, q, s, "random"), HZ_OK);
            check_bound(x, rows, k, q, s);
        }
        free(x);
        free(q);
        free(s);
    }
}

static void test_k_padding(void **state) {
    (void)state;
    hz_qmat_shape sh;
    hz_qmat_shape_init(&sh, 4, 1408);
    assert_int_equal(sh.kp, 1536);
    assert_int_equal(sh.nblocks, 6);
    assert_int_equal(sh.q_bytes, 4u * 768u);
    assert_int_equal(sh.s_bytes, 4u * 6u * 2u);
    hz_qmat_shape_init(&sh, 2, 2048);
    assert_int_equal(sh.kp, 2048);
    assert_int_equal(sh.nblocks, 8);

    hz_qmat_shape_init(&sh, 4, 1408);
    float *x = malloc(sizeof(float) * 4 * 1408);
    uint8_t *q = malloc(sh.q_bytes);
    hz_f16 *s = malloc(sh.s_bytes);
    float *deq = malloc(sizeof(float) * sh.kp);
    assert_non_null(x);
    assert_non_null(q);
    assert_non_null(s);
    assert_non_null(deq);
    for (uint32_t i = 0; i < 4 * 1408; i++) x[i] = 3.0f * rng_unit();
    assert_int_equal(hz_qpack_quantize(x, 4, 1408, q, s, "down_proj"), HZ_OK);
    for (uint32_t r = 0; r < 4; r++) {
        /* expanding the padded K as if it were data gives exact zeros past 1408 */
        hz_qpack_dequantize_row(q + r * (sh.kp / 2), s + r * sh.nblocks, sh.kp, deq);
        for (uint32_t c = 1408; c < sh.kp; c++) assert_true(deq[c] == 0.0f);
        /* the last block holds 128 real values and its scale comes from them alone */
        float absmax = 0.0f;
        for (uint32_t c = 1280; c < 1408; c++) absmax = fmaxf(absmax, fabsf(x[r * 1408 + c]));
        assert_int_equal(s[r * sh.nblocks + 5], hz_f32_to_f16(absmax / 7.0f));
    }
    check_bound(x, 4, 1408, q, s);
    free(x);
    free(q);
    free(s);
    free(deq);
}

static void test_nibble_layout(void **state) {
    (void)state;
    /* absmax 7 gives scale exactly 1, so integer inputs map to known codes */
    float x[HZ_QBLOCK];
    for (uint32_t c = 0; c < HZ_QBLOCK; c++) x[c] = (float)((int)(c % 15) - 7);
    uint8_t q[HZ_QBLOCK / 2];
    hz_f16 s[1];
    assert_int_equal(hz_qpack_quantize(x, 1, HZ_QBLOCK, q, s, "layout"), HZ_OK);
    assert_true(hz_f16_to_f32(s[0]) == 1.0f);
    for (uint32_t chunk = 0; chunk < HZ_QBLOCK / HZ_QCHUNK; chunk++) {
        for (uint32_t i = 0; i < 16; i++) {
            uint8_t byte = q[chunk * 16 + i];
            uint32_t lo = chunk * 32 + i, hi = chunk * 32 + 16 + i;
            assert_int_equal(byte & 0x0f, (int)x[lo] + 8);
            assert_int_equal(byte >> 4, (int)x[hi] + 8);
        }
    }
}

static void test_all_zero_block(void **state) {
    (void)state;
    float x[2 * HZ_QBLOCK];
    for (uint32_t c = 0; c < HZ_QBLOCK; c++) x[c] = 0.0f;
    x[7] = -0.0f;
    for (uint32_t c = HZ_QBLOCK; c < 2 * HZ_QBLOCK; c++) x[c] = rng_unit();
    uint8_t q[HZ_QBLOCK];
    hz_f16 s[2];
    float deq[2 * HZ_QBLOCK];
    assert_int_equal(hz_qpack_quantize(x, 1, 2 * HZ_QBLOCK, q, s, "zeros"), HZ_OK);
    assert_int_equal(s[0], 0);
    assert_true(hz_f16_to_f32(s[1]) > 0.0f);
    hz_qpack_dequantize_row(q, s, 2 * HZ_QBLOCK, deq);
    for (uint32_t c = 0; c < HZ_QBLOCK; c++) {
        assert_true(deq[c] == 0.0f);
        assert_int_equal(hz_qpack_code(q, c), 0);
    }
    check_bound(x, 1, 2 * HZ_QBLOCK, q, s);
}

static void test_single_outlier(void **state) {
    (void)state;
    float x[HZ_QBLOCK];
    for (uint32_t c = 0; c < HZ_QBLOCK; c++) x[c] = 0.01f * rng_unit();
    x[100] = 100.0f;
    uint8_t q[HZ_QBLOCK / 2];
    hz_f16 s[1];
    assert_int_equal(hz_qpack_quantize(x, 1, HZ_QBLOCK, q, s, "outlier"), HZ_OK);
    float scale = hz_f16_to_f32(s[0]);
    assert_true(scale >= 100.0f / 7.5f && scale <= 100.0f / 6.5f);
    assert_int_equal(hz_qpack_code(q, 100), 7);
    check_bound(x, 1, HZ_QBLOCK, q, s);
    /* the outlier's scale swamps the rest of the block: every small value collapses to 0 */
    float deq[HZ_QBLOCK];
    hz_qpack_dequantize_row(q, s, HZ_QBLOCK, deq);
    for (uint32_t c = 0; c < HZ_QBLOCK; c++)
        if (c != 100) assert_true(deq[c] == 0.0f);
}

static void test_tiny_scales(void **state) {
    (void)state;
    /* absmax / 7 below half the smallest FP16 subnormal would round the scale to 0 */
    float x[HZ_QBLOCK];
    memset(x, 0, sizeof x);
    x[3] = 1e-9f;
    x[4] = -5e-10f;
    uint8_t q[HZ_QBLOCK / 2];
    hz_f16 s[1];
    assert_int_equal(hz_qpack_quantize(x, 1, HZ_QBLOCK, q, s, "tiny"), HZ_OK);
    assert_int_equal(s[0], 1); /* 2^-24, the smallest subnormal */
    check_bound(x, 1, HZ_QBLOCK, q, s);
    /* a subnormal scale that fp16 rounding made too small: absmax / 7 = 1.45 * 2^-24 rounds to 2^-24 */
    const float ulp = 5.9604644775390625e-8f;
    x[3] = 7.0f * 1.45f * ulp;
    x[4] = 0.0f;
    assert_int_equal(hz_f32_to_f16(x[3] / 7.0f), 1);
    assert_int_equal(hz_qpack_quantize(x, 1, HZ_QBLOCK, q, s, "tiny"), HZ_OK);
    assert_int_equal(s[0], 2);
    check_bound(x, 1, HZ_QBLOCK, q, s);
    /* a sweep of absmax across the subnormal range */
    for (int i = 0; i < 2000; i++) {
        float absmax = powf(10.0f, -10.0f + 6.0f * (float)i / 2000.0f);
        for (uint32_t c = 0; c < HZ_QBLOCK; c++) x[c] = absmax * rng_unit();
        x[i % HZ_QBLOCK] = (i & 1) ? absmax : -absmax;
        assert_int_equal(hz_qpack_quantize(x, 1, HZ_QBLOCK, q, s, "sweep"), HZ_OK);
        check_bound(x, 1, HZ_QBLOCK, q, s);
    }
}

static void test_scale_overflow(void **state) {
    (void)state;
    float x[2 * HZ_QBLOCK];
    for (uint32_t c = 0; c < 2 * HZ_QBLOCK; c++) x[c] = rng_unit();
    uint8_t q[HZ_QBLOCK];
    hz_f16 s[2];
    /* absmax 7 x 65504: the scale is exactly the FP16 maximum */
    x[300] = 7.0f * HZ_F16_MAX;
    assert_int_equal(hz_qpack_quantize(x, 1, 2 * HZ_QBLOCK, q, s, "edge"), HZ_OK);
    assert_true(hz_f16_to_f32(s[1]) == HZ_F16_MAX);
    check_bound(x, 1, 2 * HZ_QBLOCK, q, s);

    /* an FP32 checkpoint value of 1e6 needs a scale of 142857 */
    x[300] = 1e6f;
    assert_int_equal(hz_qpack_quantize(x, 1, 2 * HZ_QBLOCK, q, s, "layers.3.experts.5.up_proj"), HZ_ERANGE);
    const char *m = hz_last_error_message();
    assert_non_null(strstr(m, "layers.3.experts.5.up_proj"));
    assert_non_null(strstr(m, "row 0"));
    assert_non_null(strstr(m, "block 1"));
    /* just past the largest scale that still rounds to a finite FP16 value */
    x[300] = -7.0f * 65520.0f;
    assert_int_equal(hz_qpack_quantize(x, 1, 2 * HZ_QBLOCK, q, s, "w"), HZ_ERANGE);
    x[300] = 3e38f;
    assert_int_equal(hz_qpack_quantize(x, 1, 2 * HZ_QBLOCK, q, s, "w"), HZ_ERANGE);
}

static void test_nonfinite(void **state) {
    (void)state;
    float x[3 * HZ_QBLOCK];
    for (uint32_t c = 0; c < 3 * HZ_QBLOCK; c++) x[c] = rng_unit();
    uint8_t q[3 * HZ_QBLOCK / 2];
    hz_f16 s[3];
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        x[600] = bad[i];
        assert_int_equal(hz_qpack_quantize(x, 1, 3 * HZ_QBLOCK, q, s, "gate_proj"), HZ_ERANGE);
        const char *m = hz_last_error_message();
        assert_non_null(strstr(m, "gate_proj"));
        assert_non_null(strstr(m, "block 2"));
        assert_non_null(strstr(m, "column 600"));
    }
}

static void test_layout_olmoe(void **state) {
    (void)state;
    hz_expert_layout l;
    hz_expert_layout_init(&l, 2048, 1024);
    assert_int_equal(l.gate.rows, 1024);
    assert_int_equal(l.gate.k, 2048);
    assert_int_equal(l.down.rows, 2048);
    assert_int_equal(l.down.kp, 1024);
    assert_int_equal(l.gate_q, 0);
    assert_int_equal(l.gate_s, 1048576);
    assert_int_equal(l.up_q, 1064960);
    assert_int_equal(l.up_s, 2113536);
    assert_int_equal(l.down_q, 2129920);
    assert_int_equal(l.down_s, 3178496);
    assert_int_equal(l.blob_bytes, 3194880);
}

static void test_layout_qwen(void **state) {
    (void)state;
    hz_expert_layout l;
    hz_expert_layout_init(&l, 2048, 1408);
    assert_int_equal(l.gate.kp, 2048);
    assert_int_equal(l.down.k, 1408);
    assert_int_equal(l.down.kp, 1536);
    assert_int_equal(l.down.nblocks, 6);
    assert_int_equal(l.gate_s, 1441792);
    assert_int_equal(l.up_q, 1464320);
    assert_int_equal(l.up_s, 2906112);
    assert_int_equal(l.down_q, 2928640);
    assert_int_equal(l.down_s, 4501504);
    assert_int_equal(l.blob_bytes, 4526080);
    /* 96 routed experts per token (24 layers x top-4) move about 434.5 MB */
    assert_int_equal(l.blob_bytes * 96, 434503680ull);
    const uint64_t offs[] = {l.gate_q, l.gate_s, l.up_q, l.up_s, l.down_q, l.down_s, l.blob_bytes};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) assert_int_equal(offs[i] % HZ_BLOB_PART_ALIGN, 0);
}

static void test_expert_pack(void **state) {
    (void)state;
    const uint32_t hidden = 256, inter = 320;
    hz_expert_layout l;
    hz_expert_layout_init(&l, hidden, inter);
    /* gate scales end at 256*... : 320 rows x 1 block x 2 = 640 bytes, so padding follows them */
    assert_int_equal(l.up_q, hz_align_up(l.gate_s + 640, 256));
    float *gate = malloc(sizeof(float) * inter * hidden);
    float *up = malloc(sizeof(float) * inter * hidden);
    float *down = malloc(sizeof(float) * hidden * inter);
    uint8_t *blob = malloc(l.blob_bytes);
    assert_non_null(gate);
    assert_non_null(up);
    assert_non_null(down);
    assert_non_null(blob);
    fill_random(gate, inter, hidden);
    fill_random(up, inter, hidden);
    fill_random(down, hidden, inter);
    memset(blob, 0xa5, l.blob_bytes);
    assert_int_equal(hz_expert_pack(&l, gate, up, down, blob, "layers.0.experts.1"), HZ_OK);
    check_bound(gate, inter, hidden, blob + l.gate_q, (const hz_f16 *)(const void *)(blob + l.gate_s));
    check_bound(up, inter, hidden, blob + l.up_q, (const hz_f16 *)(const void *)(blob + l.up_s));
    check_bound(down, hidden, inter, blob + l.down_q, (const hz_f16 *)(const void *)(blob + l.down_s));
    /* alignment gaps are zero bytes */
    for (uint64_t i = l.gate_s + l.gate.s_bytes; i < l.up_q; i++) assert_int_equal(blob[i], 0);
    for (uint64_t i = l.up_s + l.up.s_bytes; i < l.down_q; i++) assert_int_equal(blob[i], 0);
    for (uint64_t i = l.down_s + l.down.s_bytes; i < l.blob_bytes; i++) assert_int_equal(blob[i], 0);

    down[5 * inter + 300] = NAN;
    assert_int_equal(hz_expert_pack(&l, gate, up, down, blob, "layers.0.experts.1"), HZ_ERANGE);
    assert_non_null(strstr(hz_last_error_message(), "layers.0.experts.1.down_proj"));
    assert_non_null(strstr(hz_last_error_message(), "row 5"));
    assert_non_null(strstr(hz_last_error_message(), "block 1"));
    free(gate);
    free(up);
    free(down);
    free(blob);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_bound_random),
        cmocka_unit_test(test_k_padding),
        cmocka_unit_test(test_nibble_layout),
        cmocka_unit_test(test_all_zero_block),
        cmocka_unit_test(test_single_outlier),
        cmocka_unit_test(test_tiny_scales),
        cmocka_unit_test(test_scale_overflow),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_layout_olmoe),
        cmocka_unit_test(test_layout_qwen),
        cmocka_unit_test(test_expert_pack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
