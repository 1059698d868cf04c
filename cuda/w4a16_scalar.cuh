/* The `scalar` W4A16 executor: one GEMV launch per expert and projection, plus a SiLU-and-multiply
 * launch per expert and one launch for the routing-weighted sum. It decodes every weight exactly as the
 * format defines it ((code - 8) * scale, then one FP32 multiply-add with the activation) and favours
 * being obviously right over being fast: it is the baseline the grouped executor is checked against
 * on the device. C-callable; see w4a16.cuh for the arguments and the numerics. */
#ifndef HZ_CUDA_W4A16_SCALAR_CUH
#define HZ_CUDA_W4A16_SCALAR_CUH

#include "w4a16.cuh"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues the whole layer on `stream` (a cudaStream_t). */
int hz_w4a16_scalar_launch(const hz_w4a16_args *args, void *stream);

#ifdef __cplusplus
}
#endif

#endif
