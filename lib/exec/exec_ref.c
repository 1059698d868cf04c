/* The CPU reference W4A16 executor: the definition of the routed-expert numerics (see exec.h).
 *
 * Work is organised so that each qpacked block is expanded once per call and then used for every token
 * routed to the expert (prefill reuses it T times); the expansion lives in a 256-float stack buffer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

typedef struct ref_exec {
    hz_executor base;
    hz_expert_layout layout;
} ref_exec;

/* Expands block `b` of a qpacked row into 256 floats. The value of code c is (c - 8) * scale; a
 * 16-entry table computes each distinct product once (identical values: the product is exact). */
static void expand_block(const uint8_t *q_row, const hz_f16 *s_row, uint32_t b, float w[HZ_QBLOCK]) {
    float scale = hz_f16_to_f32(s_row[b]);
    float lut[16];
    for (int c = 0; c < 16; c++) lut[c] = (float)(c - 8) * scale;
    const uint8_t *q = q_row + (size_t)b * (HZ_QBLOCK / 2u);
    for (uint32_t chunk = 0; chunk < HZ_QBLOCK / HZ_QCHUNK; chunk++) {
        const uint8_t *bytes = q + chunk * 16u;
        float *dst = w + chunk * HZ_QCHUNK;
        for (uint32_t i = 0; i < 16u; i++) {
            dst[i] = lut[bytes[i] & 0x0fu];
            dst[16u + i] = lut[bytes[i] >> 4];
        }
    }
}

/* FP32 dot product of one 256-value block: eight interleaved partial sums (vectorisable without
 * reassociation flags), combined pairwise. */
static float dot_block(const float *w, const float *x) {
    float s[8] = {0};
    for (uint32_t i = 0; i < HZ_QBLOCK; i += 8)
        for (uint32_t l = 0; l < 8; l++) s[l] += w[i + l] * x[i + l];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static float silu(float g) { return g / (1.0f + expf(-g)); }

static int ref_moe(hz_executor *base, const hz_moe_call *c) {
    ref_exec *ex = (ref_exec *)base;
    int st = hz_moe_call_check(c);
    if (st) return st;
    const hz_expert_layout *L = c->layout;
    if (L->hidden != ex->layout.hidden || L->inter != ex->layout.inter)
        return hz_error(HZ_EINVAL, "reference executor: layout %ux%u, executor built for %ux%u",
                        L->hidden, L->inter, ex->layout.hidden, ex->layout.inter);
    const uint32_t H = L->hidden, I = L->inter, T = c->n_tokens, K = c->top_k;
    const uint32_t hkp = L->gate.kp, ikp = L->down.kp; /* padded K of gate/up (hidden), down (inter) */

    /* Scratch: x in FP32 zero-padded to hkp per token, a zero-padded to ikp per routed token, the
     * per-token lists and partial sums. Allocated per call so that sessions on different threads can
     * share one executor. */
    size_t nx = (size_t)T * hkp, na = (size_t)T * ikp;
    float *xf = hz_calloc(nx + na + 3u * (size_t)T, sizeof(float));
    uint32_t *tok = hz_malloc((size_t)T * sizeof(uint32_t));
    if (!xf || !tok) {
        free(xf);
        free(tok);
        return HZ_ENOMEM;
    }
    float *a = xf + nx, *wt = a + na, *sg = wt + T, *su = sg + T;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < H; h++) xf[(size_t)t * hkp + h] = hz_f16_to_f32(c->x[(size_t)t * H + h]);

    float w0[HZ_QBLOCK], w1[HZ_QBLOCK];
    for (uint32_t g = 0; g < c->n_group; g++) {
        const uint32_t e = c->group_ids[g];
        /* Tokens routed to e, with their weights. */
        uint32_t m = 0;
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t k = 0; k < K; k++)
                if (c->topk_ids[(size_t)t * K + k] == e) {
                    tok[m] = t;
                    wt[m] = c->topk_w[(size_t)t * K + k];
                    m++;
                    break;
                }
        if (m == 0) continue;
        const uint8_t *blob = c->rows[g];
        const uint8_t *gq = blob + L->gate_q, *uq = blob + L->up_q, *dq = blob + L->down_q;
        const hz_f16 *gs = (const hz_f16 *)(blob + L->gate_s), *us = (const hz_f16 *)(blob + L->up_s);
        const hz_f16 *ds = (const hz_f16 *)(blob + L->down_s);

        /* gate and up, fused with SiLU-and-multiply; a rounded to FP16 as the GPU path stores it. */
        for (uint32_t i = 0; i < I; i++) {
            const uint8_t *gqr = gq + (size_t)i * (hkp / 2u), *uqr = uq + (size_t)i * (hkp / 2u);
            const hz_f16 *gsr = gs + (size_t)i * L->gate.nblocks, *usr = us + (size_t)i * L->up.nblocks;
            for (uint32_t l = 0; l < m; l++) sg[l] = su[l] = 0.0f;
            for (uint32_t b = 0; b < L->gate.nblocks; b++) {
                expand_block(gqr, gsr, b, w0);
                expand_block(uqr, usr, b, w1);
                for (uint32_t l = 0; l < m; l++) {
                    const float *xb = xf + (size_t)tok[l] * hkp + (size_t)b * HZ_QBLOCK;
                    sg[l] += dot_block(w0, xb);
                    su[l] += dot_block(w1, xb);
                }
            }
            for (uint32_t l = 0; l < m; l++) a[(size_t)l * ikp + i] = hz_round_f16(silu(sg[l]) * su[l]);
        }
        /* down, then the weighted add into each token's FP32 accumulator. */
        for (uint32_t j = 0; j < H; j++) {
            const uint8_t *dqr = dq + (size_t)j * (ikp / 2u);
            const hz_f16 *dsr = ds + (size_t)j * L->down.nblocks;
            for (uint32_t l = 0; l < m; l++) sg[l] = 0.0f;
            for (uint32_t b = 0; b < L->down.nblocks; b++) {
                expand_block(dqr, dsr, b, w0);
                for (uint32_t l = 0; l < m; l++) sg[l] += dot_block(w0, a + (size_t)l * ikp + (size_t)b * HZ_QBLOCK);
            }
            for (uint32_t l = 0; l < m; l++) c->acc[(size_t)tok[l] * H + j] += wt[l] * sg[l];
        }
    }
    free(xf);
    free(tok);
    return HZ_OK;
}

static void ref_destroy(hz_executor *base) { free(base); }

static const hz_executor_ops ref_ops = {
    .name = "reference",
    .accum_dtype = "f32",
    .device_kind = "cpu",
    .moe = ref_moe,
    .destroy = ref_destroy,
};

int hz_exec_reference_create(const hz_expert_layout *layout, hz_executor **out) {
    if (out) *out = NULL;
    if (!layout || !out) return hz_error(HZ_EINVAL, "reference executor: NULL argument");
    if (layout->gate.k != layout->hidden || layout->down.k != layout->inter ||
        layout->gate.kp % HZ_QBLOCK || layout->down.kp % HZ_QBLOCK || layout->up.kp != layout->gate.kp)
        return hz_error(HZ_EINVAL, "reference executor: inconsistent expert layout (hidden %u, inter %u)",
                        layout->hidden, layout->inter);
    ref_exec *ex = hz_calloc(1, sizeof *ex);
    if (!ex) return HZ_ENOMEM;
    ex->base.ops = &ref_ops;
    ex->layout = *layout;
    *out = &ex->base;
    return HZ_OK;
}
