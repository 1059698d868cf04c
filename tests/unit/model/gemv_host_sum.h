/* The decode GEMV's FP32 sum of one row, repeated on the host in the kernel's order (cuda/model/
 * decode_ops.cu, decode_gemv.cuh), for the GPU tests that compare with it bit for bit
 * (test_decode_gemv.c, test_decode_screen.c): lane l of a row's warp adds, value by value with fmaf, the
 * 16-byte chunks l, l + 32, l + 64, ... of the row, value j of each chunk into accumulator j % 2, and
 * then acc0 + acc1 (decode_gemv.cuh's dot8_split; on the scalar path, for a width that is not a multiple
 * of 8, the values l, l + 32, ... into one accumulator); the 32 lane sums then meet as the warp's xor butterfly
 * adds them (offsets 16, 8, 4, 2, 1). No bias added. Include after core/fp16.h. */
#ifndef HZ_TESTS_UNIT_MODEL_GEMV_HOST_SUM_H
#define HZ_TESTS_UNIT_MODEL_GEMV_HOST_SUM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The 32 lane sums as warp_sum adds them: lane 0's result. */
static inline float gemv_butterfly(float lane[32]) {
    for (uint32_t o = 16; o > 0; o >>= 1) {
        float next[32];
        for (uint32_t l = 0; l < 32; l++) next[l] = lane[l] + lane[l ^ o];
        memcpy(lane, next, sizeof next);
    }
    return lane[0];
}

static inline float gemv_row_sum(const uint16_t *w, const uint16_t *x, uint32_t in) {
    const uint32_t vec = in % 8u == 0 ? 8u : 1u, pieces = in / vec;
    float lane[32];
    for (uint32_t l = 0; l < 32; l++) {
        float acc[2] = {0.0f, 0.0f};
        for (uint32_t c = l; c < pieces; c += 32u)
            for (uint32_t j = 0; j < vec; j++)
                acc[j % 2u] = fmaf(hz_f16_to_f32(w[c * vec + j]), hz_f16_to_f32(x[c * vec + j]), acc[j % 2u]);
        /* the vector path's two accumulators meet once; the scalar path keeps one */
        lane[l] = vec == 8u ? acc[0] + acc[1] : acc[0];
    }
    return gemv_butterfly(lane);
}

#endif
