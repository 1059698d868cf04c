/* The two kernels hz-ceilings needs, behind C launchers (ceil_kernels.cu).
 *
 * Both work on 32-bit words of a known pattern, so a measurement can prove it touched every byte:
 * the reduction's result must equal the host-computed sum of the pattern (ceil_pattern_sum). */
#ifndef HZ_CEIL_KERNELS_H
#define HZ_CEIL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define CEIL_HD __host__ __device__
#else
#define CEIL_HD
#endif

/* Word i of the pattern: a multiplicative hash of i (never a long run of equal or zero words, so no
 * compression or zero-page effect can flatter a figure). */
static inline CEIL_HD uint32_t ceil_pattern_word(uint64_t i) {
    return (uint32_t)(i * UINT64_C(0x9E3779B1) + UINT64_C(0x7F4A7C15));
}

/* Writes the pattern into words [0, n_words) of dev on stream. */
cudaError_t ceil_fill(uint32_t *dev, size_t n_words, cudaStream_t stream);

/* Adds every 32-bit word of dev[0, n_bytes) (n_bytes a multiple of 16, dev 16-byte aligned) into
 * *out (modulo 2^64; the caller zeroes *out first). blocks x threads is the launch shape; the loop is
 * grid-strided, so any shape reads every word once. */
cudaError_t ceil_sum(const void *dev, size_t n_bytes, unsigned blocks, unsigned threads, unsigned long long *out,
                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* HZ_CEIL_KERNELS_H */
