/* CPU reference for one token's routed experts, written for the GPU tests from the numerics that
 * cuda/w4a16.cuh states (the library's own CPU executor, lib/exec/exec_ref.c, is written separately;
 * two independent references agreeing is part of the evidence). */
#ifndef HZ_TEST_W4A16_REF_H
#define HZ_TEST_W4A16_REF_H

#include <stdint.h>

#include "core/fp16.h"
#include "format/qpack.h"

/* blobs: n host copies of expert blobs; w: routing weights; x: FP16 [hidden].
 * a_out (optional): [n x down.kp] FP16 intermediate (zeros past inter), as the GPU executors keep it.
 * y_out: FP16 [hidden]. acc_inout (optional): FP32 [hidden], the starting sums, updated.
 * Returns 0, or -1 when out of memory. */
int hz_test_w4a16_ref(const hz_expert_layout *l, uint32_t n, const uint8_t *const *blobs, const float *w,
                       const hz_f16 *x, hz_f16 *a_out, hz_f16 *y_out, float *acc_inout);

#endif
