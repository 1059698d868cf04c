/* Probe: what does an all-to-all dependency between the decode step's phases cost, as a kernel
 * boundary under programmatic dependent launch (PDL) in a CUDA graph, and as a software grid barrier
 * inside one persistent kernel?
 *
 * A "layer" is five dependent FP16 GEMVs with the byte sizes of one OLMoE-1B-7B decode layer
 * (q/k/v 6144 x 2048, o 2048 x 2048, router 64 x 2048, gate_up as 4096 x 2048 FP16 = the INT4 rows'
 * 16.8 MB, down 2048 x 2048): 59 MB per layer, 16 layers. Every phase reads the whole output of the
 * one before it (its first 2048 values, repeated where it has fewer), so no phase can start its math
 * before the previous one has ended everywhere. Both variants run the same device function per phase:
 * grid = two blocks per SM, 8 warps each (64 registers: the next kernel's blocks fit beside), rows dealt to warps round robin, each warp's first row loaded
 * into registers before the dependency wait (the weights never change), then x staged in shared
 * memory, then the rows.
 *
 *   graph+pdl : one kernel per phase, griddepcontrol.wait / launch_dependents, captured in a graph
 *   graph     : the same kernels without PDL
 *   persist   : one cooperative kernel for all phases; a phase ends with a fence and an atomic add on
 *               a counter, the next waits (one thread per block, ld.acquire) for all blocks' adds
 *   stream    : the persistent kernel without waits (no dependency): the bytes' floor for this code
 *   ring      : a persistent kernel whose producer warp streams every phase's rows, in order, into a
 *               ring in shared memory ahead of the barriers (ring-nowait: without the waits)
 *
 * Prints us per layer for each, and the bytes' time at the copy ceiling measured in the same run.
 * Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 chain.cu -o chain */
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

constexpr int kIn = 2048;            /* inputs of every phase */
constexpr int kChunks = kIn / 8;     /* 16-byte chunks per row */
constexpr int kPer = kChunks / 32;   /* chunks per lane per row: 8 */
#ifndef GRID_PER_SM
#define GRID_PER_SM 2
#endif
constexpr int kWarps = 16 / GRID_PER_SM, kThreads = kWarps * 32;
#ifndef HZ_MINB
#define HZ_MINB 4 /* blocks per SM the registers are bounded for: 4 lets the next kernel's two blocks fit beside (PDL) */
#endif
constexpr int kBlocksPerSm = GRID_PER_SM; /* the grid of the kernels and of persist */
constexpr int kPhases = 5;
constexpr int kRows[kPhases] = {6144, 2048, 64, 4096, 2048};

struct Phase {
    const uint4 *w;
    const __half *x;
    int x_period; /* the previous phase's rows */
    __half *y;
    int rows;
    int late; /* the first rows loaded only after the wait (as for addresses the previous phase decides) */
};

struct Chain {
    Phase ph[16 * kPhases];
    int n;
    unsigned *counter;
    int wait; /* persist: 1, stream: 0 */
};

__device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
    const __half2 *wh = reinterpret_cast<const __half2 *>(&w), *xh = reinterpret_cast<const __half2 *>(&x);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 a = __half22float2(wh[i]), b = __half22float2(xh[i]);
        acc = fmaf(a.x, b.x, acc);
        acc = fmaf(a.y, b.y, acc);
    }
    return acc;
}

__device__ __forceinline__ void load_row(const uint4 *w, int row, int lane, uint4 (&r)[kPer]) {
#pragma unroll
    for (int u = 0; u < kPer; u++) r[u] = ld_stream(w + (size_t)row * kChunks + u * 32 + lane);
}

/* Before the wait: the warp's first row in registers. */
__device__ __forceinline__ void phase_pre(const Phase &p, int gw, uint4 (&r)[kPer]) {
    const int lane = threadIdx.x & 31;
    if (gw < p.rows) load_row(p.w, gw, lane, r);
}

/* After the wait: x into shared memory, then every row of this warp. */
__device__ __forceinline__ void phase_run(const Phase &p, int gw, int nw, uint4 (&r)[kPer], uint4 *xs) {
    const int lane = threadIdx.x & 31;
    for (int i = threadIdx.x; i < kChunks; i += blockDim.x) /* 16-byte chunks; every period is a multiple of 8 */
        xs[i] = __ldcg(reinterpret_cast<const uint4 *>(p.x) + i % (p.x_period / 8));
    __syncthreads();
    for (int row = gw; row < p.rows; row += nw) {
        float acc = 0.0f;
#pragma unroll
        for (int u = 0; u < kPer; u++) {
            const uint4 xv = xs[u * 32 + lane];
            acc = dot8(r[u], xv, acc);
            asm volatile("" ::: "memory"); /* one x chunk live at a time: 64 registers without spills */
        }
        if (row + nw < p.rows) load_row(p.w, row + nw, lane, r);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        /* keep the values bounded: the next phase reads them */
        if (lane == 0) p.y[row] = __float2half_rn(acc * (1.0f / 8.0f));
    }
}

__global__ void __launch_bounds__(kThreads, HZ_MINB) phase_kernel(Phase p, int pdl) {
    __shared__ uint4 xs[kChunks];
    const int gw = blockIdx.x * kWarps + threadIdx.x / 32, nw = gridDim.x * kWarps;
    uint4 r[kPer];
    if (!p.late) phase_pre(p, gw, r);
    if (pdl) {
        asm volatile("griddepcontrol.wait;" ::: "memory");
        asm volatile("griddepcontrol.launch_dependents;");
    }
    if (p.late) phase_pre(p, gw, r);
    phase_run(p, gw, nw, r, xs);
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__global__ void __launch_bounds__(kThreads, HZ_MINB) persist_kernel(const __grid_constant__ Chain c) {
    __shared__ uint4 xs[kChunks];
    const int gw = blockIdx.x * kWarps + threadIdx.x / 32, nw = gridDim.x * kWarps;
    uint4 r[kPer];
    for (int i = 0; i < c.n; i++) {
        if (!c.ph[i].late) phase_pre(c.ph[i], gw, r);
        if (c.wait && i > 0) {
            if (threadIdx.x == 0) {
                const unsigned target = gridDim.x * (unsigned)i;
                while (ld_acquire(c.counter) < target) {
                }
            }
            __syncthreads();
        }
        if (c.ph[i].late) phase_pre(c.ph[i], gw, r);
        phase_run(c.ph[i], gw, nw, r, xs);
        __syncthreads(); /* every warp's stores before the block's arrival; xs free again */
        if (c.wait && threadIdx.x == 0) {
            __threadfence();
            atomicAdd(c.counter, 1u);
        }
    }
}


/* ---- persist-ring: the weights streamed by one producer warp per block into a ring of row slots in
 * shared memory (bulk copies, one mbarrier pair per slot), in the order the block will use them, across
 * phase boundaries; the consumer warps wait only for x. The producer runs ahead of the barrier by as
 * many rows as the ring holds. ---- */
#ifndef RING_SR
#define RING_SR 1 /* consecutive rows per slot (one bulk copy) */
#endif
#ifndef RING_CW
#define RING_CW 8 /* consumer warps */
#endif
#ifndef RING_KB
#define RING_KB 192 /* ring size */
#endif
constexpr int kSlotBytes = 4096 * RING_SR;
constexpr int kRingSlots = RING_KB * 1024 / kSlotBytes;
constexpr int kCw = RING_CW, kCThreads = kCw * 32;
constexpr int kRingThreads = kCThreads + 32; /* the consumer warps + the producer warp */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(uint64_t *b, uint32_t n) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(n));
}
__device__ __forceinline__ void mb_expect(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mb_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mb_wait(uint64_t *b, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(smem_u32(b)), "r"(parity)
                     : "memory");
}
__device__ __forceinline__ void bulk_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}
/* This block's rows of a phase: a contiguous range, a whole number of slots except the last. */
__device__ __forceinline__ void block_rows(int rows, int &r0, int &r1) {
    int per = (rows + (int)gridDim.x - 1) / (int)gridDim.x;
    per = (per + RING_SR - 1) / RING_SR * RING_SR;
    r0 = min(rows, (int)blockIdx.x * per);
    r1 = min(rows, r0 + per);
}
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kCThreads) : "memory"); }

__global__ void __launch_bounds__(kRingThreads, 1) ring_kernel(const __grid_constant__ Chain c) {
    extern __shared__ __align__(128) uint8_t sm[];
    uint4 *ring = reinterpret_cast<uint4 *>(sm);                       /* kRingSlots x kSlotBytes */
    uint4 *xs = reinterpret_cast<uint4 *>(sm + kRingSlots * kSlotBytes); /* 4 KB */
    uint64_t *full = reinterpret_cast<uint64_t *>(sm + kRingSlots * kSlotBytes + 4096), *empty = full + kRingSlots;
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    if (threadIdx.x == 0)
        for (int i = 0; i < kRingSlots; i++) {
            mb_init(&full[i], 1);
            mb_init(&empty[i], 1);
        }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    if (warp == kCw) { /* the producer */
        if (lane != 0) return;
        uint32_t k = 0;
        for (int i = 0; i < c.n; i++) {
            const Phase &p = c.ph[i];
            int r0, r1;
            block_rows(p.rows, r0, r1);
            for (int row = r0; row < r1; row += RING_SR, k++) {
                const uint32_t slot = k % kRingSlots, lap = k / kRingSlots;
                const uint32_t bytes = 4096u * (uint32_t)min(RING_SR, r1 - row);
                if (lap > 0) mb_wait(&empty[slot], (lap - 1u) & 1u);
                mb_expect(&full[slot], bytes);
                bulk_g2s(ring + (size_t)slot * (kSlotBytes / 16), p.w + (size_t)row * kChunks, bytes, &full[slot]);
            }
        }
        return;
    }
    uint32_t k0 = 0; /* the block's first row of this phase in the ring sequence */
    for (int i = 0; i < c.n; i++) {
        const Phase &p = c.ph[i];
        if (c.wait && i > 0) {
            if (threadIdx.x == 0) {
                const unsigned target = gridDim.x * (unsigned)i;
                while (ld_acquire(c.counter) < target) {
                }
            }
            consumers_sync();
        }
        for (int t = threadIdx.x; t < kChunks; t += kCThreads)
            xs[t] = __ldcg(reinterpret_cast<const uint4 *>(p.x) + t % (p.x_period / 8));
        consumers_sync();
        int r0, r1;
        block_rows(p.rows, r0, r1);
        const int slots = r1 > r0 ? (r1 - r0 + RING_SR - 1) / RING_SR : 0;
        /* warp w takes slots w, w + kCw, ...; all rows of a slot, then frees it */
        for (int j = warp; j < slots; j += kCw) {
            const uint32_t k = k0 + (uint32_t)j, slot = k % kRingSlots;
            mb_wait(&full[slot], (k / kRingSlots) & 1u);
            const int nr = min(RING_SR, r1 - (r0 + j * RING_SR));
            float acc[RING_SR];
#pragma unroll
            for (int q = 0; q < RING_SR; q++) {
                acc[q] = 0.0f;
                if (q < nr) {
                    const uint4 *rw = ring + (size_t)slot * (kSlotBytes / 16) + q * 256;
#pragma unroll
                    for (int u = 0; u < kPer; u++) acc[q] = dot8(rw[u * 32 + lane], xs[u * 32 + lane], acc[q]);
                }
            }
            __syncwarp();
            if (lane == 0) mb_arrive(&empty[slot]);
#pragma unroll
            for (int q = 0; q < RING_SR; q++) {
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) acc[q] += __shfl_xor_sync(0xffffffffu, acc[q], o);
                if (lane == 0 && q < nr) p.y[r0 + j * RING_SR + q] = __float2half_rn(acc[q] * (1.0f / 8.0f));
            }
        }
        k0 += (uint32_t)slots;
        consumers_sync(); /* every warp's stores before the arrival; xs free again */
        if (c.wait && threadIdx.x == 0) {
            __threadfence();
            atomicAdd(c.counter, 1u);
        }
    }
}

__global__ void fill_kernel(uint16_t *p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        const float v = ((float)(h & 0xffff) / 65535.0f - 0.5f) * (1.0f / 16.0f);
        p[i] = __half_as_ushort(__float2half_rn(v));
    }
}

__global__ void copy_kernel(const uint4 *s, uint4 *d, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = s[i];
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    const int layers = argc > 1 ? atoi(argv[1]) : 16, reps = argc > 2 ? atoi(argv[2]) : 50;
    const int empty = argc > 3 && atoi(argv[3]) != 0; /* phases without rows: what the boundaries cost alone */
    const int mask = argc > 4 ? atoi(argv[4]) : 31;   /* the phases of a layer kept (bit p: phase p) */
    const int late = argc > 5 ? atoi(argv[5]) : 0;    /* phases (bit p) that load nothing before their wait */
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    size_t wbytes = 0;
    for (int p = 0; p < kPhases; p++) wbytes += (size_t)kRows[p] * kIn * 2u;
    uint16_t *wall = nullptr;
    CK(cudaMalloc(&wall, wbytes * layers));
    fill_kernel<<<1024, 256>>>(wall, wbytes * layers / 2u, 12345u);
    __half *act = nullptr; /* one output buffer per phase */
    CK(cudaMalloc(&act, sizeof(__half) * 6144 * (size_t)(layers * kPhases + 1)));
    fill_kernel<<<16, 256>>>(reinterpret_cast<uint16_t *>(act), 6144, 7u);
    unsigned *counter = nullptr;
    CK(cudaMalloc(&counter, sizeof(unsigned)));

    Chain c = {};
    c.n = 0;
    c.counter = counter;
    size_t off = 0, kept_bytes = 0;
    int prev_rows = 2048;
    for (int l = 0; l < layers; l++)
        for (int p = 0; p < kPhases; p++) {
            const size_t pb = (size_t)kRows[p] * kIn * 2u;
            off += pb;
            if (!(mask >> p & 1)) continue;
            kept_bytes += pb;
            const int i = c.n++;
            Phase &ph = c.ph[i];
            ph.w = reinterpret_cast<const uint4 *>(reinterpret_cast<const char *>(wall) + off - pb);
            ph.x = act + (size_t)i * 6144;
            ph.x_period = prev_rows;
            ph.y = act + (size_t)(i + 1) * 6144;
            ph.rows = kRows[p];
            prev_rows = kRows[p];
            ph.late = late >> p & 1;
            if (empty) {
                ph.rows = 0;
                ph.x_period = 2048;
            }
        }
    if (empty) printf("empty phases: every phase only waits, stages x and arrives\n");
    const double layer_mb = (double)kept_bytes / layers / 1e6;
    if (late) printf("phases loading after their wait: mask %d (graph and persist variants; the ring ignores it)\n", late);
    if (mask != 31) printf("phases kept: mask %d, %d phases per layer\n", mask, c.n / layers);

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaDeviceSynchronize());

    /* copy ceiling: 1 GB D2D */
    const size_t cn = (size_t)1 << 26; /* 16-byte words: 1 GiB */
    uint4 *ca = nullptr, *cb = nullptr;
    CK(cudaMalloc(&ca, cn * 16));
    CK(cudaMalloc(&cb, cn * 16));
    std::vector<float> tv;
    for (int r = 0; r < 7; r++) {
        CK(cudaEventRecord(e0, s));
        copy_kernel<<<sms * 8, 512, 0, s>>>(ca, cb, cn);
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        tv.push_back(ms);
    }
    const double copy_gbs = 2.0 * cn * 16 / (median(tv) * 1e-3) / 1e9;
    CK(cudaFree(ca));
    CK(cudaFree(cb));
    printf("ring: %d rows per slot, %d slots, %d consumer warps\n", RING_SR, kRingSlots, kCw);
    printf("sms %d, layers %d, %.1f MB per layer, copy ceiling %.0f GB/s (read+write), bytes at it %.2f us per layer\n",
           sms, layers, layer_mb, copy_gbs, layer_mb * 1e6 / (copy_gbs * 1e9) * 1e6);

    /* graphs of per-phase kernels */
    for (int pdl = 1; pdl >= 0; pdl--) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < c.n; i++) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(sms * kBlocksPerSm);
            cfg.blockDim = dim3(kThreads);
            cfg.stream = s;
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = at;
            cfg.numAttrs = pdl ? 1 : 0;
            CK(cudaLaunchKernelEx(&cfg, phase_kernel, c.ph[i], pdl));
        }
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        tv.clear();
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(e0, s));
            CK(cudaGraphLaunch(ge, s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 3) tv.push_back(ms);
        }
        const float m = median(tv);
        printf("%-11s %8.2f us per layer (%.3f ms for %d layers), %.0f GB/s of weights\n", pdl ? "graph+pdl" : "graph",
               m * 1e3 / layers, m, layers, layer_mb * layers / (m * 1e-3) / 1e3);
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }

    /* persistent: with and without the waits */
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persist_kernel, kThreads, 0));
    if (per_sm < 1) {
        fprintf(stderr, "persist_kernel does not fit\n");
        return 1;
    }
    for (int wait = 1; wait >= 0; wait--) {
        c.wait = wait;
        tv.clear();
        for (int r = 0; r < reps; r++) {
            CK(cudaMemsetAsync(counter, 0, sizeof(unsigned), s));
            void *args[] = {&c};
            CK(cudaEventRecord(e0, s));
            CK(cudaLaunchCooperativeKernel(reinterpret_cast<void *>(persist_kernel), dim3(sms * kBlocksPerSm), dim3(kThreads), args, 0, s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 3) tv.push_back(ms);
        }
        const float m = median(tv);
        printf("%-11s %8.2f us per layer (%.3f ms for %d layers), %.0f GB/s of weights\n", wait ? "persist" : "stream",
               m * 1e3 / layers, m, layers, layer_mb * layers / (m * 1e-3) / 1e3);
    }

    /* persist-ring: with and without the waits */
    const size_t ring_smem = (size_t)kRingSlots * kSlotBytes + 4096 + 2 * kRingSlots * 8;
    CK(cudaFuncSetAttribute(ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ring_smem));
    for (int wait = 1; wait >= 0; wait--) {
        c.wait = wait;
        tv.clear();
        for (int r = 0; r < reps; r++) {
            CK(cudaMemsetAsync(counter, 0, sizeof(unsigned), s));
            void *args[] = {&c};
            CK(cudaEventRecord(e0, s));
            CK(cudaLaunchCooperativeKernel(reinterpret_cast<void *>(ring_kernel), dim3(sms), dim3(kRingThreads), args,
                                           ring_smem, s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 3) tv.push_back(ms);
        }
        const float m = median(tv);
        printf("%-11s %8.2f us per layer (%.3f ms for %d layers), %.0f GB/s of weights\n", wait ? "ring" : "ring-nowait",
               m * 1e3 / layers, m, layers, layer_mb * layers / (m * 1e-3) / 1e3);
    }
    /* the two dependent variants must agree (same code, same order): last phase's output */
    std::vector<__half> out(kRows[kPhases - 1]);
    c.wait = 1;
    CK(cudaMemsetAsync(counter, 0, sizeof(unsigned), s));
    void *args[] = {&c};
    CK(cudaLaunchCooperativeKernel(reinterpret_cast<void *>(persist_kernel), dim3(sms * kBlocksPerSm), dim3(kThreads), args, 0, s));
    CK(cudaMemcpyAsync(out.data(), c.ph[c.n - 1].y, out.size() * 2, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    std::vector<__half> ref(out.size());
    for (int i = 0; i < c.n; i++) phase_kernel<<<sms * kBlocksPerSm, kThreads, 0, s>>>(c.ph[i], 0);
    CK(cudaMemcpyAsync(ref.data(), c.ph[c.n - 1].y, ref.size() * 2, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    int diff = 0;
    for (size_t i = 0; i < out.size(); i++) diff += __half_as_ushort(out[i]) != __half_as_ushort(ref[i]);
    printf("persist vs kernels: %d of %zu outputs differ (must be 0)\n", diff, out.size());

    {
        std::vector<__half> o2(out.size());
        c.wait = 1;
        CK(cudaMemsetAsync(counter, 0, sizeof(unsigned), s));
        void *a2[] = {&c};
        CK(cudaLaunchCooperativeKernel(reinterpret_cast<void *>(ring_kernel), dim3(sms), dim3(kRingThreads), a2,
                                       ring_smem, s));
        CK(cudaMemcpyAsync(o2.data(), c.ph[c.n - 1].y, o2.size() * 2, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        int d2 = 0;
        for (size_t i = 0; i < o2.size(); i++) d2 += __half_as_ushort(o2[i]) != __half_as_ushort(ref[i]);
        printf("ring vs kernels: %d of %zu outputs differ (must be 0)\n", d2, o2.size());
        diff += d2;
    }
    return diff != 0;
}
