/* The decode step's greedy pick without reading the whole FP16 lm_head (cuda/model/decode_screen.cu),
 * behind a plain C interface (included from lib/model/forward_cuda.c and the GPU tests).
 *
 * Why: at batch 1 the lm_head GEMV reads vocab x hidden FP16 weights for one argmax: 206 MB per token
 * for OLMoE-1B-7B, 622 MB for Qwen1.5-MoE-A2.7B, the largest single read of a step. A greedy step
 * needs only the row with the largest logit. An INT8 copy of the rows (one FP32 scale per row) gives
 * every logit to within a bound that is proven, not estimated; only the rows whose upper bound
 * reaches the largest lower bound can hold the maximum, and only those are read again in FP16 and
 * summed exactly as the lm_head GEMV sums them. The pick is therefore the GEMV's argmax (largest
 * value, lowest row on ties) whenever the logits are finite, for about half the bytes.
 *
 * The bound, per row i with FP16 weights w, INT8 codes q, scale s = max|w| / 127 (FP32) and the
 * step's FP16 input x (doc/numerics.md, "The lm_head screen"):
 *   |screened_i - exact_i| <= coef_i * sum_j |x_j|,
 *   coef_i = max_j |w_j - s q_j| (1 + 2^-20) + max|w| * 2.01 (gamma_n + u)   (rounded up),
 * where exact_i is the GEMV's FP32 sum in any order (gamma_n = n u / (1 - n u), u = 2^-24, n = the row
 * length), screened_i = fl(s * fl(sum_j q_j x_j)). Rows of at most 2,048 values take an integer path
 * instead: x is quantized once per step to levels p_j = rint(x_j / sigma) with sigma = max|x| / P
 * (rounded up; P = min(32767, (2^31 - 1) / (127 n)), so the exact integer t_i = sum_j q_j p_j fits an
 * int32), screened_i = fl(fl(s sigma) fl(t_i)), and the bound gains two terms:
 *   |screened_i - exact_i| <= coef_i * sum_j |x_j| + qnorm_i * sigma (1/2 + 2^-7) + |screened_i| 2^-21,
 *   qnorm_i = s sum_j |q_j|   (rounded up),
 * the levels' error (|x_j - sigma p_j| <= sigma (1/2 + 2^-7)) and the two final products' rounding.
 * The kernels round the bound's products and sums up (and the lower bound down), so the rounding of
 * the bound itself cannot hide a row.
 *
 * Every function only enqueues work; it returns HZ_OK, HZ_EINVAL / HZ_EUNSUPPORTED (arguments, shape),
 * or HZ_EDEVICE naming the CUDA call that failed. */
#ifndef HZ_CUDA_MODEL_DECODE_SCREEN_CUH
#define HZ_CUDA_MODEL_DECODE_SCREEN_CUH

#include "decode_ops.cuh"

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
extern "C" {
#else
#include <stddef.h>
#include <stdint.h>
#endif

/* Whether rows of `in` values can be screened: in a multiple of 16 (16 INT8 codes per 16-byte load), at
 * most the GEMV's widest input. */
int hz_decode_screen_supported(uint32_t in);

/* The per-row factor of the bound for rows of `in` values: 2.01 (gamma_in + u), rounded up. */
float hz_decode_screen_rounding_factor(uint32_t in);

/* Builds the INT8 copy of `rows` FP16 rows of `in` values (device memory, row-major): q [rows x in]
 * codes, scale [rows], coef [rows] and qnorm [rows] (device memory). One warp per row, on `stream`. A
 * row with a non-finite weight gets coef = +inf (always read again in FP16); an all-zero row gets s = 0,
 * coef = 0 and qnorm = 0. */
int hz_decode_screen_prepare(const uint16_t *w, uint32_t rows, uint32_t in, int8_t *q, float *scale, float *coef,
                             float *qnorm, void *stream);

/* One screened greedy pick, two kernels on k->stream (the second launched with programmatic dependent
 * launch when k->pdl):
 *   screen: x built by every block from `x` as hz_decode_gemv builds it (x.x_mode, x.in and the fields
 *           of that mode; block 0 stores x into x.x_out, which must be set: the pick and the exact
 *           logits on demand read it there); per row the screened value and its upper bound into
 *           ub[rows]; the largest lower bound, tagged with step->epoch, into *best by atomic max;
 *   pick:   every row whose upper bound reaches that lower bound summed from the FP16 rows `w` exactly as
 *           hz_decode_gemv sums a row (bit-identical), the largest of them (lowest row on ties) into
 *           *argmax_out and, when given, *argmax_host (pinned host memory, its device address); the
 *           number of rows summed added to *summed when given (and its new total stored into
 *           *summed_host when that is given too).
 * x.seg, x.nseg and x.tail are ignored. `best` (8 bytes) must be zero before the first use; the pick
 * clears it again, and the epoch in its high half names the step (x.step is required). `tail_scratch` is the
 * GEMV tails' (hz_decode_tail_bytes; it returns to zero after every launch). */
typedef struct hz_dscreen_args {
    hz_dgemv_args x;
    const uint16_t *w;
    const int8_t *q;
    const float *scale, *coef, *qnorm;
    uint32_t rows;
    float *ub;
    unsigned long long *best;
    int32_t *argmax_out;
    int32_t *argmax_host;
    unsigned long long *summed;
    /* Optional (with summed): the last block stores *summed's new total here (pinned host memory, its
     * device address), for the host to read without a copy. */
    unsigned long long *summed_host;
    /* Optional, for tests: each row's lower bound (lb[rows]) and the winner's FP32 value (*value_out). */
    float *lb;
    float *value_out;
    void *tail_scratch;
} hz_dscreen_args;

int hz_decode_screen(const hz_dscreen_args *a, const hz_decode_dev *dev, const hz_klaunch *k);

#ifdef __cplusplus
}
#endif

#endif
