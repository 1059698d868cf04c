/* Do bulk copies issued in order by one thread land in that order? One block per SM, 128 KB per SM
 * (the two-pass gate_up's share: 17 MB over 132 SMs), split into C copies of 128/C KB, each completing
 * on its own mbarrier; thread c waits for copy c and stamps %globaltimer. Sources rotate over a 2 GB
 * buffer so that no iteration reads what L2 still holds. Mode "tma": the same bytes as 4 KB boxes
 * (8 rows x 512 bytes) of a 2D tensor map, issued stage-major (the K half of every tile, then the
 * other half). Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 copy_order.cu */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

__device__ __forceinline__ uint32_t su32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

constexpr uint32_t kBytes = 128u * 1024u;

__global__ void __launch_bounds__(256, 1) order_kernel(const uint8_t *src, uint32_t ncopy, uint32_t per_sm_stride,
                                                       const __grid_constant__ CUtensorMap tmap, int use_tma,
                                                       uint32_t row0, unsigned long long *out) {
    extern __shared__ __align__(1024) uint8_t sm[];
    uint64_t *bars = reinterpret_cast<uint64_t *>(sm + kBytes);
    const uint32_t t = threadIdx.x;
    if (t < ncopy) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(&bars[t])));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    uint64_t t0 = 0;
    if (t == 0) {
        t0 = now();
        const uint32_t cb = kBytes / ncopy;
        for (uint32_t c = 0; c < ncopy; c++) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(su32(&bars[c])), "r"(cb) : "memory");
            if (!use_tma) {
                const uint8_t *s = src + (uint64_t)blockIdx.x * per_sm_stride + (uint64_t)c * cb;
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 su32(sm + c * cb)), "l"(s), "r"(cb), "r"(su32(&bars[c])) : "memory");
            } else {
                /* 32 boxes: stage s (K half), tile k (8 rows), projection p; box = 64 u64 x 8 rows */
                const uint32_t s = c / 16u, k = (c / 2u) % 8u, p = c % 2u;
                const int x = (int)(s * 64u), y = (int)(row0 + p * 132u * 64u + blockIdx.x * 64u + k * 8u);
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                             ::"r"(su32(sm + c * cb)), "l"(&tmap), "r"(x), "r"(y), "r"(su32(&bars[c])) : "memory");
            }
        }
        out[(size_t)blockIdx.x * 257u + 256u] = t0;
    }
    if (t < ncopy) {
        uint32_t done = 0;
        do {
            asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                         : "=r"(done) : "r"(su32(&bars[t])) : "memory");
        } while (!done);
        out[(size_t)blockIdx.x * 257u + t] = now();
    }
}

int main() {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t buf_bytes = 2ull << 30;
    uint8_t *buf;
    CK(cudaMalloc(&buf, buf_bytes));
    CK(cudaMemset(buf, 1, buf_bytes));
    unsigned long long *out;
    CK(cudaMalloc(&out, (size_t)sms * 257u * 8u));
    CK(cudaFuncSetAttribute(order_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kBytes + 4096));

    PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", (void **)&encode, cudaEnableDefault, &q));
    CUtensorMap tmap;
    /* the whole buffer as rows of 1024 bytes (128 u64) */
    cuuint64_t dims[2] = {128, buf_bytes / 1024};
    cuuint64_t strides[1] = {1024};
    cuuint32_t box[2] = {64, 8}, estr[2] = {1, 1};
    CUresult r = encode(&tmap, CU_TENSOR_MAP_DATA_TYPE_UINT64, 2, buf, dims, strides, box, estr,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { printf("encode failed %d\n", (int)r); return 1; }

    struct Mode { const char *name; uint32_t ncopy; int tma; };
    const Mode modes[] = {{"1d x8 (16 KB)", 8, 0}, {"1d x16 (8 KB)", 16, 0}, {"1d x32 (4 KB)", 32, 0},
                          {"1d x64 (2 KB)", 64, 0}, {"1d x256 (512 B)", 256, 0}, {"tma 2d x32 (4 KB boxes)", 32, 1}};
    const uint64_t region = (uint64_t)sms * kBytes * 2u; /* tma mode reads two projections' rows */
    const int iters = 40;
    std::vector<unsigned long long> h((size_t)sms * 257u);
    uint64_t rot = 0;
    for (const Mode &m : modes) {
        std::vector<double> land(m.ncopy, 0.0), lastv;
        double span = 0.0;
        for (int it = 0; it < iters; it++) {
            const uint64_t off = (rot++ % (buf_bytes / region)) * region;
            order_kernel<<<sms, 256, kBytes + 4096>>>(buf + off, m.ncopy, kBytes, tmap, m.tma, (uint32_t)(off / 1024u), out);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            if (it < 4) continue;
            CK(cudaMemcpy(h.data(), out, h.size() * 8u, cudaMemcpyDeviceToHost));
            unsigned long long gmin = ~0ull, gmax = 0;
            for (int b = 0; b < sms; b++) gmin = std::min(gmin, h[(size_t)b * 257u + 256u]);
            for (int b = 0; b < sms; b++)
                for (uint32_t c = 0; c < m.ncopy; c++) {
                    const unsigned long long v = h[(size_t)b * 257u + c];
                    land[c] += (double)(v - gmin) / sms;
                    gmax = std::max(gmax, v);
                }
            span += (double)(gmax - gmin);
        }
        const int n = iters - 4;
        printf("%-26s span %.2f us; mean landing of copy c (us after the first issue):", m.name, span / n / 1e3);
        const uint32_t step = m.ncopy / 8u ? m.ncopy / 8u : 1u;
        for (uint32_t c = 0; c < m.ncopy; c += step) printf(" [%u] %.2f", c, land[c] / n / 1e3);
        printf(" [%u] %.2f\n", m.ncopy - 1, land[m.ncopy - 1] / n / 1e3);
    }
    printf("bytes per iteration %.1f MB\n", (double)sms * kBytes / 1e6);
    return 0;
}
