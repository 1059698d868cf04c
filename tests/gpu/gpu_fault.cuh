/* Test-only: provokes a sticky CUDA error (an illegal-address kernel) so the test can check that the
 * cuda backend marks the device lost and fails fast afterwards. C-callable. */
#ifndef HZ_TEST_GPU_FAULT_CUH
#define HZ_TEST_GPU_FAULT_CUH

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues a kernel that writes through an invalid address on `stream` (a cudaStream_t). Returns the
 * launch's cudaError_t as an int (0 = enqueued; the fault shows up at the next synchronisation). */
int hz_test_launch_illegal_write(void *stream);

#ifdef __cplusplus
}
#endif

#endif
