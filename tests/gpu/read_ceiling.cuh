/* Benchmark-only: the time floor of reading a routed-expert layer's bytes. Reads `n` device ranges of
 * `bytes` each (16-byte aligned, a multiple of 16) with the whole GPU, 16-byte loads that bypass L1,
 * and folds them into one word per block so nothing is optimised away. C-callable. */
#ifndef HZ_TEST_READ_CEILING_CUH
#define HZ_TEST_READ_CEILING_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ptrs: HOST array of n device addresses (n <= 32), copied into the kernel parameters; sink: device
 * scratch of at least 4 * blocks bytes, blocks = 4 x the SM count. pdl_blocks (1 to 4) > 0: launched
 * with programmatic dependent launch, that many blocks per SM, the loads after the wait for the previous
 * grid (read_ceiling.cu); 0: a plain launch of 4 blocks per SM. Returns a cudaError_t as an int. */
int hz_test_launch_read(const void *const *ptrs, uint32_t n, uint64_t bytes, uint32_t *sink, int sms,
                        int pdl_blocks, void *stream);

#ifdef __cplusplus
}
#endif

#endif
