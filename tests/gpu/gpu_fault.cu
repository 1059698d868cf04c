/* See gpu_fault.cuh. */
#include <cuda_runtime.h>

#include "gpu_fault.cuh"

__global__ void hz_test_illegal_write_kernel(int *p) { p[threadIdx.x] = 1; }

extern "C" int hz_test_launch_illegal_write(void *stream) {
    /* An address in the first page is never mapped on the device. */
    hz_test_illegal_write_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(reinterpret_cast<int *>(64));
    return (int)cudaGetLastError();
}
