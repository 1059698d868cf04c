/* Benchmark-only: what a kernel launch costs when its function is not the one the launches before it ran.
 * Six functions of the same size (kFnBody dependent FMAs, unrolled: about the decode GEMV's 2,024
 * instructions) that differ only in their constants, launched with programmatic dependent launch on one
 * stream, 4 blocks of 256 threads per SM, in a sequence (fn_switch.cu). C-callable. */
#ifndef HZ_TEST_FN_SWITCH_CUH
#define HZ_TEST_FN_SWITCH_CUH

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues `count` launches on `stream`: launch i runs function seq[i % seq_len] (0..5). stream_bytes > 0:
 * after each, a read of `stream_bytes` from `buf` (device, 16-byte aligned) by the whole GPU, with L2's
 * normal policy, so that the weights' stream a decode step runs between its kernels passes through L2
 * here too. sink: device scratch of 4 x 4 x sms bytes. Returns a cudaError_t as an int. */
int hz_test_fn_switch(const int *seq, int seq_len, int count, const void *buf, uint64_t stream_bytes,
                      uint32_t *sink, int sms, void *stream);

#ifdef __cplusplus
}
#endif

#endif
