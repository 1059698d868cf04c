// Probe: does an SM's load wait behind the bytes that SM already asked for, and does it matter how they
// were asked for (LDGSTS, bulk copy, plain loads into registers)?
// One block per SM asks for `kb` KB of a cold 1 GiB buffer, then thread 0 times (clock64) one 4-byte load
// of a line that sits in L2 (read by the previous launch). Printed: median cycles of that load over the
// blocks, and the median cycles until the block's own copies have all landed.
// Build: nvcc -arch=sm_90 -O3 -o probe_fifo probe_fifo.cu ; run: ./probe_fifo
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

__device__ __forceinline__ uint32_t s32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void warm(const int *hot, int *sink) {
    int v = __ldcg(hot + threadIdx.x + blockIdx.x * blockDim.x);
    if (v == 12345) *sink = v;
}

// mode 0: nothing in flight; 1: LDGSTS (all threads, 16 B each); 2: bulk copies (thread 0, 16 KB each,
// one mbarrier); 3: plain 16-byte loads into registers (8 per thread, then kept live)
__global__ void probe(const uint8_t *big, size_t block_stride, uint32_t bytes, const int *hot, int mode,
                      long long *lat, long long *done, int *sink) {
    extern __shared__ __align__(128) uint8_t sm[];
    __shared__ __align__(8) uint64_t bar;
    __shared__ uint32_t stash;
    const uint8_t *src = big + (size_t)blockIdx.x * block_stride;
    if (threadIdx.x == 0 && mode == 2) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(s32(&bar)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const long long t0 = clock64();
    uint4 r[8];
    if (mode == 1) {
        for (uint32_t o = threadIdx.x * 16u; o < bytes; o += blockDim.x * 16u)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s32(sm + o)), "l"(src + o) : "memory");
        asm volatile("cp.async.commit_group;" ::: "memory");
    } else if (mode == 2 && threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(s32(&bar)), "r"(bytes) : "memory");
        for (uint32_t o = 0; o < bytes; o += 16384u)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                             s32(sm + o)),
                         "l"(src + o), "r"(bytes - o < 16384u ? bytes - o : 16384u), "r"(s32(&bar))
                         : "memory");
    } else if (mode == 3) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint32_t o = (k * blockDim.x + threadIdx.x) * 16u;
            r[k] = o < bytes ? __ldcs(reinterpret_cast<const uint4 *>(src + o)) : make_uint4(0, 0, 0, 0);
        }
    }
    if (threadIdx.x == 0) {
        long long a, b;
        int v, w;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(a)::"memory");
        asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(hot + blockIdx.x * 32) : "memory");
        asm volatile("add.u32 %0, %1, 1;" : "=r"(w) : "r"(v) : "memory"); // waits for the load
        asm volatile("st.volatile.shared.u32 [%0], %1;" ::"r"(s32(&stash)), "r"(w) : "memory");
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(b)::"memory"); // issued after the store
        lat[blockIdx.x] = b - a;
        if (v == 12345) *sink = v;
    }
    if (mode == 1) asm volatile("cp.async.wait_group 0;" ::: "memory");
    if (mode == 2 && threadIdx.x == 0) {
        uint32_t ok = 0;
        while (!ok)
            asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                         : "=r"(ok)
                         : "r"(s32(&bar))
                         : "memory");
    }
    if (mode == 3) {
        uint32_t x = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) x ^= r[k].x ^ r[k].y ^ r[k].z ^ r[k].w;
        if (x == 0x12345678u) *sink = (int)x;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        done[blockIdx.x] = clock64() - t0;
        if (stash == 12345u) *sink = (int)stash;
    }
}

static long long median(std::vector<long long> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const size_t big_bytes = (size_t)1 << 30;
    uint8_t *big = nullptr;
    int *hot = nullptr, *sink = nullptr;
    long long *lat = nullptr, *done = nullptr;
    cudaMalloc(&big, big_bytes);
    cudaMemset(big, 1, big_bytes);
    cudaMalloc(&hot, 1 << 20);
    cudaMemset(hot, 0, 1 << 20);
    cudaMalloc(&sink, 4);
    cudaMalloc(&lat, sizeof(long long) * sms);
    cudaMalloc(&done, sizeof(long long) * sms);
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
    const char *names[] = {"nothing", "LDGSTS", "bulk copy", "LDG x8"};
    const uint32_t sizes[] = {16384, 65536, 131072, 196608};
    std::vector<long long> hl(sms), hd(sms);
    size_t rot = 0;
    for (int mode = 0; mode < 4; mode++) {
        for (uint32_t kb : sizes) {
            const uint32_t bytes = mode == 3 ? 8u * 512u * 16u : kb; // LDG x8: 64 KB per block
            if (mode == 3 && kb != sizes[0]) continue;
            std::vector<long long> ls, ds;
            for (int rep = 0; rep < 5; rep++) {
                const size_t stride = (size_t)256 * 1024;
                rot = (rot + (size_t)sms * stride) % (big_bytes - (size_t)sms * stride); // cold rows each time
                warm<<<sms, 32>>>(hot, sink);
                probe<<<sms, 512, 200 * 1024>>>(big + (rot & ~(size_t)4095), stride, bytes, hot, mode, lat, done, sink);
                cudaError_t e = cudaDeviceSynchronize();
                if (e != cudaSuccess) {
                    printf("error: %s\n", cudaGetErrorString(e));
                    return 1;
                }
                cudaMemcpy(hl.data(), lat, sizeof(long long) * sms, cudaMemcpyDeviceToHost);
                cudaMemcpy(hd.data(), done, sizeof(long long) * sms, cudaMemcpyDeviceToHost);
                ls.push_back(median(hl));
                ds.push_back(median(hd));
            }
            printf("%-10s %4u KB per SM: L2 load behind it %6lld cycles, block's bytes landed %6lld cycles\n",
                   names[mode], mode == 0 ? 0u : bytes / 1024u, median(ls), median(ds));
            if (mode == 0) break;
        }
    }
    return 0;
}
