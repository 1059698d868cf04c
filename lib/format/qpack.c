/* INT4 qpacked matrices: quantizer, dequantizer and the routed-expert blob layout (doc/qpack.md).
 *
 * Rounding: codes are round-half-away-from-zero of x / scale, evaluated in double precision. Both x
 * (FP32) and scale (FP16) are short enough that the double quotient decides every rounding exactly,
 * so the quantizer is deterministic across compilers and FP environments (no dependence on the
 * current rounding mode, as lrint would have). */
#include "format/qpack.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

void hz_qmat_shape_init(hz_qmat_shape *shape, uint32_t rows, uint32_t k) {
    /* k <= UINT32_MAX - 255 in every shape this library builds; a wrapping kp would be caught by the
     * callers' size checks because q_bytes would then be far smaller than rows * k / 2. */
    uint64_t kp = hz_align_up((uint64_t)k, HZ_QBLOCK);
    shape->rows = rows;
    shape->k = k;
    shape->kp = (uint32_t)kp;
    shape->nblocks = (uint32_t)(kp / HZ_QBLOCK);
    shape->q_bytes = (uint64_t)rows * kp / 2u;
    shape->s_bytes = (uint64_t)rows * (kp / HZ_QBLOCK) * 2u;
}

/* The smallest FP16 scale that the rule allows for a block whose largest magnitude is `absmax`.
 * Returns 0 on success, 1 when the scale does not fit FP16. */
static int block_scale(float absmax, hz_f16 *out_bits, float *out_scale) {
    float want = absmax / 7.0f;
    if (!hz_f16_fits(want)) return 1;
    hz_f16 bits = hz_f32_to_f16(want);
    float s = hz_f16_to_f32(bits);
    /* In the normal FP16 range rounding changes the scale by at most 2^-11 relative, so absmax / s
     * stays far below 7.5 and every code is within half a step. Among subnormal scales (absmax below
     * about 6e-4, and absmax / 7 rounding to zero in the extreme) the absolute rounding error can push
     * absmax / s beyond 7.5; one FP16 ulp up restores absmax <= 7.5 * s (doc/qpack.md, case B). */
    if (absmax > 0.0f && (double)absmax > 7.5 * (double)s) {
        bits = (hz_f16)(bits + 1u);
        s = hz_f16_to_f32(bits);
    }
    *out_bits = bits;
    *out_scale = s;
    return 0;
}

static inline void put_code(uint8_t *q_row, uint32_t i, unsigned code) {
    uint32_t chunk = i / HZ_QCHUNK, j = i % HZ_QCHUNK;
    uint8_t *byte = &q_row[chunk * 16u + (j & 15u)];
    if (j < 16u)
        *byte = (uint8_t)((*byte & 0xf0u) | code);
    else
        *byte = (uint8_t)((*byte & 0x0fu) | (code << 4));
}

int hz_qpack_quantize(const float *src, uint32_t rows, uint32_t k, uint8_t *q, hz_f16 *s,
                      const char *what) {
    if (!what) what = "matrix";
    if ((!src && rows && k) || !q || !s) return hz_error(HZ_EINVAL, "%s: NULL buffer", what);
    hz_qmat_shape shape;
    hz_qmat_shape_init(&shape, rows, k);
    if ((uint64_t)shape.kp < (uint64_t)k) return hz_error(HZ_EINVAL, "%s: K %u too large", what, k);
    uint64_t row_bytes = shape.kp / 2u;

    for (uint32_t r = 0; r < rows; r++) {
        const float *x = src + (uint64_t)r * k;
        uint8_t *q_row = q + (uint64_t)r * row_bytes;
        hz_f16 *s_row = s + (uint64_t)r * shape.nblocks;
        /* Code 8 is the value 0: padding columns decode to exact zeros whatever the scale. */
        memset(q_row, 0x88, (size_t)row_bytes);
        for (uint32_t b = 0; b < shape.nblocks; b++) {
            uint32_t c0 = b * HZ_QBLOCK;
            uint32_t c1 = c0 + HZ_QBLOCK < k ? c0 + HZ_QBLOCK : k;
            float absmax = 0.0f;
            for (uint32_t c = c0; c < c1; c++) {
                if (!isfinite(x[c]))
                    return hz_error(HZ_ERANGE, "%s: row %u, block %u: value at column %u is not finite (%g)",
                                    what, r, b, c, (double)x[c]);
                float a = fabsf(x[c]);
                if (a > absmax) absmax = a;
            }
            hz_f16 bits;
            float scale;
            if (block_scale(absmax, &bits, &scale))
                return hz_error(HZ_ERANGE,
                                "%s: row %u, block %u: absmax %g needs scale %g, above the FP16 maximum %g",
                                what, r, b, (double)absmax, (double)absmax / 7.0, (double)HZ_F16_MAX);
            s_row[b] = bits;
            if (scale == 0.0f) continue; /* all-zero block: every code stays 8 */
            double sd = (double)scale;
            for (uint32_t c = c0; c < c1; c++) {
                double t = round((double)x[c] / sd);
                if (t > 7.0) t = 7.0;
                if (t < -7.0) t = -7.0;
                put_code(q_row, c, (unsigned)((int)t + 8));
            }
        }
    }
    return HZ_OK;
}

void hz_qpack_dequantize_row(const uint8_t *q_row, const hz_f16 *s_row, uint32_t k, float *dst) {
    for (uint32_t b = 0; (uint64_t)b * HZ_QBLOCK < k; b++) {
        float scale = hz_f16_to_f32(s_row[b]);
        uint32_t c0 = b * HZ_QBLOCK;
        uint32_t c1 = c0 + HZ_QBLOCK < k ? c0 + HZ_QBLOCK : k;
        for (uint32_t c = c0; c < c1; c++) dst[c] = (float)hz_qpack_code(q_row, c) * scale;
    }
}

void hz_expert_layout_init(hz_expert_layout *layout, uint32_t hidden, uint32_t inter) {
    memset(layout, 0, sizeof *layout);
    layout->hidden = hidden;
    layout->inter = inter;
    hz_qmat_shape_init(&layout->gate, inter, hidden);
    hz_qmat_shape_init(&layout->up, inter, hidden);
    hz_qmat_shape_init(&layout->down, hidden, inter);
    uint64_t at = 0;
    layout->gate_q = at;
    at = hz_align_up(at + layout->gate.q_bytes, HZ_BLOB_PART_ALIGN);
    layout->gate_s = at;
    at = hz_align_up(at + layout->gate.s_bytes, HZ_BLOB_PART_ALIGN);
    layout->up_q = at;
    at = hz_align_up(at + layout->up.q_bytes, HZ_BLOB_PART_ALIGN);
    layout->up_s = at;
    at = hz_align_up(at + layout->up.s_bytes, HZ_BLOB_PART_ALIGN);
    layout->down_q = at;
    at = hz_align_up(at + layout->down.q_bytes, HZ_BLOB_PART_ALIGN);
    layout->down_s = at;
    at = hz_align_up(at + layout->down.s_bytes, HZ_BLOB_PART_ALIGN);
    layout->blob_bytes = at;
}

int hz_expert_pack(const hz_expert_layout *layout, const float *gate, const float *up,
                   const float *down, uint8_t *blob, const char *what) {
    if (!what) what = "expert";
    if (!layout || !gate || !up || !down || !blob) return hz_error(HZ_EINVAL, "%s: NULL argument", what);
    /* Scales are written as hz_f16 through the blob pointer; parts sit at multiples of 256. */
    if ((uintptr_t)blob % _Alignof(hz_f16) != 0)
        return hz_error(HZ_EINVAL, "%s: blob is not 2-byte aligned", what);
    memset(blob, 0, (size_t)layout->blob_bytes);

    struct {
        const char *name;
        const float *src;
        const hz_qmat_shape *shape;
        uint64_t q_off, s_off;
    } parts[3] = {
        {"gate_proj", gate, &layout->gate, layout->gate_q, layout->gate_s},
        {"up_proj", up, &layout->up, layout->up_q, layout->up_s},
        {"down_proj", down, &layout->down, layout->down_q, layout->down_s},
    };
    for (int i = 0; i < 3; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s.%s", what, parts[i].name);
        int st = hz_qpack_quantize(parts[i].src, parts[i].shape->rows, parts[i].shape->k,
                                   blob + parts[i].q_off, (hz_f16 *)(void *)(blob + parts[i].s_off), name);
        if (st != HZ_OK) return st;
    }
    return HZ_OK;
}
