/* INT4 "qpacked" matrices: the storage of routed experts.
 *
 * A matrix of `rows` x `k` values (row-major, nn.Linear [out, in]) is stored along K in blocks of
 * HZ_QBLOCK = 256 values with one FP16 scale per block; K is zero-padded to kp = round_up(k, 256).
 *
 * Codes: each value is a 4-bit code c in 0..15 meaning (c - 8) * scale. The quantizer uses
 * scale = fp16(absmax(block) / 7) and c - 8 = clamp(round(x / scale), -7, 7), so code 0 is never
 * written and every value is reconstructed within scale / 2 (see doc/qpack.md for the proof and the
 * edge cases: an all-zero block has scale 0; a scale that overflows FP16 is an error).
 *
 * Nibble layout (chosen for 16-byte GPU loads): row r's codes are kp / 2 contiguous bytes. They form
 * chunks of 16 bytes = 32 values; within chunk j (values 32j .. 32j + 31) byte i holds value 32j + i in
 * its low nibble and value 32j + 16 + i in its high nibble. Scales are a separate row-major array of
 * rows x (kp / 256) FP16 values.
 */
#ifndef HZ_QPACK_H
#define HZ_QPACK_H

#include <stdint.h>

#include "core/fp16.h"

#define HZ_QBLOCK 256u
#define HZ_QCHUNK 32u /* values per 16-byte chunk */

typedef struct hz_qmat_shape {
    uint32_t rows;
    uint32_t k;       /* logical K */
    uint32_t kp;      /* K padded to a multiple of HZ_QBLOCK */
    uint32_t nblocks; /* kp / HZ_QBLOCK */
    uint64_t q_bytes; /* rows * kp / 2 */
    uint64_t s_bytes; /* rows * nblocks * 2 */
} hz_qmat_shape;

void hz_qmat_shape_init(hz_qmat_shape *shape, uint32_t rows, uint32_t k);

/* Quantizes `src` (rows x k, row-major FP32) into q (shape.q_bytes) and s (rows x nblocks scales).
 * Errors: HZ_ERANGE when a value is not finite or a block's scale does not fit FP16; the message names
 * `what`, the row and the block. */
int hz_qpack_quantize(const float *src, uint32_t rows, uint32_t k, uint8_t *q, hz_f16 *s,
                      const char *what);

/* The signed code (-8..7) of value i of a row. */
static inline int hz_qpack_code(const uint8_t *q_row, uint32_t i) {
    uint32_t chunk = i / HZ_QCHUNK, j = i % HZ_QCHUNK;
    uint8_t byte = q_row[chunk * 16u + (j & 15u)];
    return (int)((j < 16u) ? (byte & 0x0fu) : (byte >> 4)) - 8;
}

/* Expands one row (q_row: kp / 2 bytes, s_row: nblocks scales) to its k logical values. */
void hz_qpack_dequantize_row(const uint8_t *q_row, const hz_f16 *s_row, uint32_t k, float *dst);

/* The three projections of one routed expert form one contiguous blob:
 *   gate codes | gate scales | up codes | up scales | down codes | down scales
 * gate and up are [inter x hidden], down is [hidden x inter]; every part starts at a multiple of
 * HZ_BLOB_PART_ALIGN bytes from the blob start. */
#define HZ_BLOB_PART_ALIGN 256u

typedef struct hz_expert_layout {
    uint32_t hidden;
    uint32_t inter;
    hz_qmat_shape gate, up, down;
    uint64_t gate_q, gate_s, up_q, up_s, down_q, down_s; /* byte offsets within the blob */
    uint64_t blob_bytes;                                   /* end of down scales, aligned to 256 */
} hz_expert_layout;

void hz_expert_layout_init(hz_expert_layout *layout, uint32_t hidden, uint32_t inter);

/* Quantizes one expert's FP32 gate [inter x hidden], up [inter x hidden] and down [hidden x inter]
 * into `blob` (layout->blob_bytes, padding zeroed). Errors as hz_qpack_quantize. */
int hz_expert_pack(const hz_expert_layout *layout, const float *gate, const float *up,
                   const float *down, uint8_t *blob, const char *what);

#endif
