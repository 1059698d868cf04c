/* See w4a16_ref.h. Straight from the definition: every weight is decoded as (code - 8) * scale and
 * every sum is a plain FP32 loop in index order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "w4a16_ref.h"

/* One row of a qpacked matrix (row r of `shape` at q / s within the blob) dotted with v[0 .. k). */
static float row_dot(const hz_qmat_shape *shape, const uint8_t *q, const hz_f16 *s, uint32_t r, const float *v) {
    const uint8_t *qr = q + (uint64_t)r * (shape->kp / 2u);
    const hz_f16 *sr = s + (uint64_t)r * shape->nblocks;
    float sum = 0.0f;
    for (uint32_t i = 0; i < shape->k; i++) {
        float wv = (float)hz_qpack_code(qr, i) * hz_f16_to_f32(sr[i / HZ_QBLOCK]);
        sum += wv * v[i];
    }
    return sum;
}

int hz_test_w4a16_ref(const hz_expert_layout *l, uint32_t n, const uint8_t *const *blobs, const float *w,
                       const hz_f16 *x, hz_f16 *a_out, hz_f16 *y_out, float *acc_inout) {
    const uint32_t H = l->hidden, I = l->inter, ikp = l->down.kp;
    float *xf = malloc(sizeof(float) * H);
    float *a = malloc(sizeof(float) * I);
    float *s = calloc(H, sizeof(float));
    if (!xf || !a || !s) {
        free(xf);
        free(a);
        free(s);
        return -1;
    }
    for (uint32_t h = 0; h < H; h++) xf[h] = hz_f16_to_f32(x[h]);
    if (acc_inout) memcpy(s, acc_inout, sizeof(float) * H);
    for (uint32_t e = 0; e < n; e++) {
        const uint8_t *b = blobs[e];
        const hz_f16 *gs = (const hz_f16 *)(const void *)(b + l->gate_s);
        const hz_f16 *us = (const hz_f16 *)(const void *)(b + l->up_s);
        const hz_f16 *ds = (const hz_f16 *)(const void *)(b + l->down_s);
        for (uint32_t i = 0; i < I; i++) {
            float g = row_dot(&l->gate, b + l->gate_q, gs, i, xf);
            float u = row_dot(&l->up, b + l->up_q, us, i, xf);
            float silu = g / (1.0f + expf(-g));
            a[i] = hz_round_f16(silu * u);
        }
        if (a_out)
            for (uint32_t i = 0; i < ikp; i++) a_out[(uint64_t)e * ikp + i] = i < I ? hz_f32_to_f16(a[i]) : 0;
        for (uint32_t j = 0; j < H; j++) s[j] += w[e] * row_dot(&l->down, b + l->down_q, ds, j, a);
    }
    for (uint32_t j = 0; j < H; j++) y_out[j] = hz_f32_to_f16(s[j]);
    if (acc_inout) memcpy(acc_inout, s, sizeof(float) * H);
    free(xf);
    free(a);
    free(s);
    return 0;
}
