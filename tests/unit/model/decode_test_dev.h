/* The set-up that the decode-kernel GPU tests share (test_decode_gemv.c, test_router_cluster.c,
 * test_decode_screen.c): a CUDA device or the "skipped" exit code, a stream, the launch facts of
 * hz_decode_device_info, and the tests' random values. Include
 * after the headers that declare hz_decode_device_info and hz_last_error_message. */
#ifndef HZ_TESTS_UNIT_MODEL_DECODE_TEST_DEV_H
#define HZ_TESTS_UNIT_MODEL_DECODE_TEST_DEV_H

#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

/* Uniform in [-1, 1) from a xorshift64 state (each test keeps and seeds its own). */
static inline float test_urand(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (float)((*state >> 40) & 0xffffffu) / 8388608.0f - 1.0f;
}

/* 0: *stream and *dev are ready (the caller destroys the stream); 77: no CUDA device (meson's
 * "skipped"); 1: a failure, printed. `name` starts the messages; max_in as hz_decode_device_info's. */
static int decode_test_device(const char *name, uint32_t max_in, cudaStream_t *stream, hz_decode_dev *dev) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("%s: no CUDA device: skipped\n", name);
        return 77;
    }
    if (cudaStreamCreate(stream) != cudaSuccess) {
        printf("FAIL: cudaStreamCreate\n");
        return 1;
    }
    if (hz_decode_device_info(*stream, max_in, dev) != HZ_OK) {
        printf("FAIL: device info: %s\n", hz_last_error_message());
        cudaStreamDestroy(*stream);
        return 1;
    }
    return 0;
}

#endif
