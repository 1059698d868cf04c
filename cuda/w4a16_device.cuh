/* Device-side helpers shared by the W4A16 kernels (C++/CUDA only; not part of the C interface). */
#ifndef HZ_CUDA_W4A16_DEVICE_CUH
#define HZ_CUDA_W4A16_DEVICE_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "w4a16.cuh"

extern "C" {
#include "core/core.h"
}

/* Turns a failed CUDA call into HZ_EDEVICE with the call and CUDA's own words in the last-error
 * message. Clears CUDA's per-thread "last error" so a later, unrelated check does not report it again
 * (sticky errors stay sticky: the context keeps returning them). */
static inline int hz_cuda_fail(cudaError_t e, const char *who, const char *call) {
    (void)cudaGetLastError();
    return hz_error(HZ_EDEVICE, "%s: %s failed: %s (%s)", who, call, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Blob addresses of one call: by value in the kernel parameters, or from a device array. */
struct hz_blob_ptrs {
    const uint8_t *p[HZ_W4A16_MAX_EXPERTS];
};

/* Host side: the call's blob addresses into the kernel parameters (host array given), or the device
 * array to read them from (*dev, when args->blobs is NULL). */
static inline void hz_fill_blob_ptrs(const hz_w4a16_args *a, hz_blob_ptrs *ptrs, const uint8_t *const **dev) {
    for (uint32_t e = 0; e < HZ_W4A16_MAX_EXPERTS; e++)
        ptrs->p[e] = (a->blobs && e < a->n) ? static_cast<const uint8_t *>(a->blobs[e]) : nullptr;
    *dev = a->blobs ? nullptr : reinterpret_cast<const uint8_t *const *>(a->blobs_dev);
}


/* 16 bytes of codes that are read exactly once: skip L1 so it keeps the activations, and use the
 * non-coherent path (the blobs are never written while a kernel reads them). */
static __device__ __forceinline__ uint4 hz_ld_stream(const void *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

static __device__ __forceinline__ float hz_ld_scale(const uint8_t *p) {
    return __half2float(__ldg(reinterpret_cast<const __half *>(p)));
}

/* Programmatic dependent launch (sm_90): both are no-ops when the grid was launched without it. */
static __device__ __forceinline__ void hz_griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
static __device__ __forceinline__ void hz_griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* hz_w4a16_args.ready: thread 0 waits until both flags hold the step's epoch (acquire at GPU scope),
 * then the block's barrier orders every thread's later reads after it (plain loads included: the
 * acquire and the barrier put the writer's stores before them in the memory model's causality order). */
static __device__ __forceinline__ uint32_t hz_ld_acquire_gpu(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void hz_wait_ready(const uint32_t *ready, const uint32_t *epoch) {
    if (threadIdx.x == 0) {
        const uint32_t want = __ldcg(epoch);
        while (hz_ld_acquire_gpu(ready) != want || hz_ld_acquire_gpu(ready + 1) != want) __nanosleep(32);
    }
    __syncthreads();
}

/* ---- the grouped executor's expansion of one 16-byte chunk ----------------------------------------
 *
 * A chunk holds 32 codes: byte i (0..15) has value i in its low nibble and value 16 + i in its high
 * nibble. Read as four 32-bit words, word m holds bytes 4m .. 4m+3, so the nibble at position p
 * (bits 4p .. 4p+3) of word m is value
 *     v(m, p) = (p & 1) * 16 + 4m + (p >> 1).
 * Activations are kept in registers in this "slot" order (slot 8m + p), which makes every expansion
 * a fixed register pattern.
 *
 * Expansion without integer-to-float conversions: OR-ing a nibble that sits at bit 4p' (p' <= 4) into
 * the bits of 2^23 gives the float 2^23 + n * 2^(4p') exactly (the ulp at 2^23 is 1). One FFMA with
 * 2^(-4p') and -(2^(23-4p') + 8) then yields n - 8 exactly (every intermediate is an integer below
 * 2^24). Nibbles 5..7 are first shifted down by 12 bits onto positions 2..4. Cost per value: one LOP3,
 * one FFMA to expand, one FFMA to accumulate. */

/* (a & mask) | magic as one LOP3. Written with two immediates, ptxas emits two LOP3s (one immediate
 * per instruction): the tensor-core expansion then costs 13 instructions per word instead of 9. So
 * the magic constant comes from the kernel's parameters (HZ_F16_MAGIC / HZ_F32_MAGIC, set by the
 * launcher): ptxas cannot fold it back into an immediate and keeps it in a register (SASS of the fused
 * OLMoE kernel: 130 LOP3 per two segments with the immediate, where 64 do the work; with the parameter
 * each mask-and-or is one LOP3 with a register operand). */
constexpr uint32_t HZ_F16_MAGIC = 0x64006400u; /* two FP16 1024.0 */
constexpr uint32_t HZ_F32_MAGIC = 0x4B000000u; /* FP32 2^23 */

template <uint32_t kMask>
static __device__ __forceinline__ uint32_t hz_and_or(uint32_t a, uint32_t magic) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "n"(kMask), "r"(magic));
    return d;
}

static __device__ __forceinline__ const uint8_t *hz_blob(const hz_blob_ptrs &ptrs, const uint8_t *const *dev, int e) {
    return dev ? dev[e] : ptrs.p[e];
}

/* Host side: the fields that every gate_up kernel's parameters share, from the call and its layout
 * (P: any parameter struct with these member names). The intermediate goes to the start of scratch. */
template <class P>
static inline void hz_fill_gate_up_params(const hz_w4a16_args *a, P &p) {
    const hz_expert_layout *l = a->layout;
    hz_fill_blob_ptrs(a, &p.ptrs, &p.blobs_dev);
    p.x = static_cast<const __half *>(a->x);
    p.inter = static_cast<__half *>(a->scratch);
    p.gate_q = l->gate_q;
    p.gate_s = l->gate_s;
    p.up_q = l->up_q;
    p.up_s = l->up_s;
    p.hidden = l->hidden;
    p.hkp = l->gate.kp;
    p.inter_n = l->inter;
    p.ikp = l->down.kp;
    p.n = a->n;
    p.f16_magic = HZ_F16_MAGIC;
}

/* Host side: the same for the down kernels (the intermediate read from the start of scratch). */
template <class P>
static inline void hz_fill_down_params(const hz_w4a16_args *a, P &p) {
    const hz_expert_layout *l = a->layout;
    hz_fill_blob_ptrs(a, &p.ptrs, &p.blobs_dev);
    p.inter = static_cast<decltype(p.inter)>(a->scratch);
    p.weights = a->weights;
    p.y = static_cast<__half *>(a->y);
    p.acc = a->acc;
    p.down_q = l->down_q;
    p.down_s = l->down_s;
    p.hidden = l->hidden;
    p.ikp = l->down.kp;
    p.n = a->n;
    p.f16_magic = HZ_F16_MAGIC;
}

/* `magic` is 0x4B000000 in a register (see hz_and_or for why). */
template <uint32_t kMask>
static __device__ __forceinline__ float hz_nib(uint32_t bits, float mul, float add, uint32_t magic) {
    return fmaf(__uint_as_float(hz_and_or<kMask>(bits, magic)), mul, add);
}

static __device__ __forceinline__ int hz_slot_value(int slot) {
    const int m = slot >> 3, p = slot & 7;
    return (p & 1) * 16 + 4 * m + (p >> 1);
}

/* Sum over the 32 values of a chunk of (code - 8) * act, FP32; act in slot order. magic: 0x4B000000
 * from the kernel's parameters (hz_and_or). */
static __device__ __forceinline__ float hz_chunk_dot(uint4 q, const float *act, uint32_t magic) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    float part[4];
#pragma unroll
    for (int m = 0; m < 4; m++) {
        const uint32_t lo = w[m], hi = w[m] >> 12;
        const float *a = act + 8 * m;
        float s = hz_nib<0x0000000Fu>(lo, 1.0f, -8388616.0f, magic) * a[0];
        s = fmaf(hz_nib<0x000000F0u>(lo, 0.0625f, -524296.0f, magic), a[1], s);
        s = fmaf(hz_nib<0x00000F00u>(lo, 0.00390625f, -32776.0f, magic), a[2], s);
        s = fmaf(hz_nib<0x0000F000u>(lo, 0.000244140625f, -2056.0f, magic), a[3], s);
        s = fmaf(hz_nib<0x000F0000u>(lo, 0.0000152587890625f, -136.0f, magic), a[4], s);
        s = fmaf(hz_nib<0x00000F00u>(hi, 0.00390625f, -32776.0f, magic), a[5], s);
        s = fmaf(hz_nib<0x0000F000u>(hi, 0.000244140625f, -2056.0f, magic), a[6], s);
        s = fmaf(hz_nib<0x000F0000u>(hi, 0.0000152587890625f, -136.0f, magic), a[7], s);
        part[m] = s;
    }
    return (part[0] + part[1]) + (part[2] + part[3]);
}

/* Loads the 32 FP16 activations of chunk c (values 32c .. 32c+31 of a vector of length len; zero past
 * the end) into slot order as FP32. The whole chunk is read with four 16-byte loads when it is in range
 * and the vector is 16-byte aligned. kL2Only: read through L2 only (__ldcg), for data that the previous
 * grid wrote while this one may already have been running (programmatic dependent launch); otherwise
 * through the read-only path. */
template <bool kL2Only>
static __device__ __forceinline__ void hz_load_act_chunk(const __half *v, uint32_t len, uint32_t c, float *act) {
    const uint32_t base = 32u * c;
    if (base + 32u <= len && (reinterpret_cast<uintptr_t>(v) & 15u) == 0) {
        const uint4 *src = reinterpret_cast<const uint4 *>(v + base);
        uint32_t wv[16];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 t = kL2Only ? __ldcg(src + i) : __ldg(src + i);
            wv[4 * i + 0] = t.x;
            wv[4 * i + 1] = t.y;
            wv[4 * i + 2] = t.z;
            wv[4 * i + 3] = t.w;
        }
#pragma unroll
        for (int s = 0; s < 32; s++) {
            const int i = hz_slot_value(s);
            const unsigned short bits = (unsigned short)(wv[i >> 1] >> (16 * (i & 1)));
            act[s] = __half2float(__ushort_as_half(bits));
        }
    } else {
#pragma unroll
        for (int s = 0; s < 32; s++) {
            const uint32_t i = base + (uint32_t)hz_slot_value(s);
            act[s] = 0.0f;
            if (i < len) act[s] = __half2float(kL2Only ? __ldcg(v + i) : __ldg(v + i));
        }
    }
}

/* ---- the tensor-core expansion (grouped executor's default path) ---------------------------------
 *
 * mma.sync m16n8k16 (FP16 inputs, FP32 accumulation) computes 16 rows x 16 k per instruction. The
 * products of FP16 inputs are exact, so with A = codes - 8 (exact in FP16) and B = activations the
 * numerics are those of the definition: exact products, FP32 sums, scale applied per 256-block.
 *
 * A 16-byte chunk expands into 16 registers of two FP16 values each (code - 8), in "pair" order
 * P[4m + r] for word m of the chunk:
 *     r = 0: values (4m,      4m + 2)        low nibbles of bytes 4m, 4m+2
 *     r = 1: values (4m + 1,  4m + 3)        low nibbles of bytes 4m+1, 4m+3
 *     r = 2: values (16 + 4m, 16 + 4m + 2)   high nibbles of bytes 4m, 4m+2
 *     r = 3: values (17 + 4m, 17 + 4m + 2)   high nibbles of bytes 4m+1, 4m+3
 * Low nibbles OR-ed into 0x6400 (FP16 1024) give 1024 + n, minus 1032 = n - 8; high nibbles masked in
 * place give 1024 + 16n, times 1/16 minus 72 = n - 8. All exact; 9 instructions per 8 values. The
 * activations are arranged in the same pair order (hz_load_act_pairs), and since the k index of an
 * MMA is only a summation index, any arrangement that A and B share is correct. */
static __device__ __forceinline__ void hz_expand_pairs(uint4 q, uint32_t (&h)[16], uint32_t magic) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int m = 0; m < 4; m++) {
        const uint32_t lo = w[m], sh = w[m] >> 8;
        const uint32_t p0 = hz_and_or<0x000F000Fu>(lo, magic), p1 = hz_and_or<0x00F000F0u>(lo, magic);
        const uint32_t p2 = hz_and_or<0x000F000Fu>(sh, magic), p3 = hz_and_or<0x00F000F0u>(sh, magic);
        asm("sub.f16x2 %0, %1, %2;" : "=r"(h[4 * m + 0]) : "r"(p0), "r"(0x64086408u));
        asm("sub.f16x2 %0, %1, %2;" : "=r"(h[4 * m + 1]) : "r"(p2), "r"(0x64086408u));
        asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(h[4 * m + 2]) : "r"(p1), "r"(0x2C002C00u), "r"(0xD480D480u));
        asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(h[4 * m + 3]) : "r"(p3), "r"(0x2C002C00u), "r"(0xD480D480u));
    }
}

/* 32 FP16 values in plain order (16 words, two values each) rearranged into the expansion's pair order. */
static __device__ __forceinline__ void hz_pairs_from_words(const uint32_t (&wv)[16], uint32_t (&xh)[16]) {
#pragma unroll
    for (int m = 0; m < 4; m++) {
        xh[4 * m + 0] = __byte_perm(wv[2 * m], wv[2 * m + 1], 0x5410);
        xh[4 * m + 1] = __byte_perm(wv[2 * m], wv[2 * m + 1], 0x7632);
        xh[4 * m + 2] = __byte_perm(wv[8 + 2 * m], wv[9 + 2 * m], 0x5410);
        xh[4 * m + 3] = __byte_perm(wv[8 + 2 * m], wv[9 + 2 * m], 0x7632);
    }
}

/* The 32 FP16 activations of chunk c (zero past len) in pair order. kL2Only as hz_load_act_chunk. */
template <bool kL2Only>
static __device__ __forceinline__ void hz_load_act_pairs(const __half *v, uint32_t len, uint32_t c, uint32_t (&xh)[16]) {
    const uint32_t base = 32u * c;
    uint32_t wv[16];
    if (base + 32u <= len && (reinterpret_cast<uintptr_t>(v) & 15u) == 0) {
        const uint4 *src = reinterpret_cast<const uint4 *>(v + base);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint4 t = kL2Only ? __ldcg(src + i) : __ldg(src + i);
            wv[4 * i + 0] = t.x;
            wv[4 * i + 1] = t.y;
            wv[4 * i + 2] = t.z;
            wv[4 * i + 3] = t.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const uint32_t i0 = base + 2u * i, i1 = i0 + 1u;
            uint32_t b0 = 0, b1 = 0;
            if (i0 < len) b0 = __half_as_ushort(kL2Only ? __ldcg(v + i0) : __ldg(v + i0));
            if (i1 < len) b1 = __half_as_ushort(kL2Only ? __ldcg(v + i1) : __ldg(v + i1));
            wv[i] = b0 | (b1 << 16);
        }
    }
    hz_pairs_from_words(wv, xh);
}

/* d += A * B for one m16n8k16 tile (row-major A, column-major B, FP32 accumulators). */
static __device__ __forceinline__ void hz_mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                   uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* One 128-value segment of two rows against the shared activations: lane (g = lane / 4, t = lane % 4)
 * holds chunk t of the segment for row A (MMA row g) and row B (MMA row g + 8) and the activations
 * of the same chunk. B's eight columns all carry the activations, so every lane ends with its own
 * rows' sums in column 2t: d[.][0] (row A) and d[.][2] (row B), no shuffles needed. The eight MMAs
 * rotate over four accumulator sets so that they do not wait on each other's results. */
static __device__ __forceinline__ void hz_mma_segment(float (&d)[4][4], uint4 qa, uint4 qb, const uint32_t (&xh)[16],
                                                      uint32_t magic) {
    uint32_t ha[16], hb[16];
    hz_expand_pairs(qa, ha, magic);
    hz_expand_pairs(qb, hb, magic);
#pragma unroll
    for (int j = 0; j < 8; j++)
        hz_mma16816(d[j & 3], ha[2 * j], hb[2 * j], ha[2 * j + 1], hb[2 * j + 1], xh[2 * j], xh[2 * j + 1]);
}

/* Folds the four accumulator sets of one 256-value block, applies the block scales and clears them. */
static __device__ __forceinline__ void hz_mma_fold(float (&d)[4][4], float sa, float sb, float &acc_a, float &acc_b) {
    acc_a = fmaf(sa, (d[0][0] + d[1][0]) + (d[2][0] + d[3][0]), acc_a);
    acc_b = fmaf(sb, (d[0][2] + d[1][2]) + (d[2][2] + d[3][2]), acc_b);
#pragma unroll
    for (int i = 0; i < 4; i++) d[i][0] = d[i][1] = d[i][2] = d[i][3] = 0.0f;
}

/* Activations in pair order live in shared memory as one 80-byte record per chunk (64 bytes used):
 * the four lanes t = 0..3 that read chunks 4s + t in one 16-byte load then hit distinct banks. */
constexpr uint32_t kActWords = 20;

static __device__ __forceinline__ void hz_lds_pairs(const uint32_t *rec, uint32_t (&xh)[16]) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint4 v = *reinterpret_cast<const uint4 *>(rec + 4 * i);
        xh[4 * i + 0] = v.x;
        xh[4 * i + 1] = v.y;
        xh[4 * i + 2] = v.z;
        xh[4 * i + 3] = v.w;
    }
}

/* Block-cooperative fill of `count` chunk records from `n_vec` vectors of `len` FP16 values with row
 * stride `stride` (chunks per vector: chunks); kL2Only as hz_load_act_chunk. */
template <bool kL2Only>
static __device__ __forceinline__ void hz_fill_act_records(uint32_t *dst, const __half *v, uint32_t n_vec, uint32_t stride,
                                                           uint32_t len, uint32_t chunks) {
    for (uint32_t idx = threadIdx.x; idx < n_vec * chunks; idx += blockDim.x) {
        const uint32_t vec = idx / chunks, c = idx % chunks;
        uint32_t xh[16];
        hz_load_act_pairs<kL2Only>(v + (uint64_t)vec * stride, len, c, xh);
        uint32_t *rec = dst + (uint64_t)idx * kActWords;
#pragma unroll
        for (int i = 0; i < 4; i++)
            *reinterpret_cast<uint4 *>(rec + 4 * i) = make_uint4(xh[4 * i], xh[4 * i + 1], xh[4 * i + 2], xh[4 * i + 3]);
    }
}

static __device__ __forceinline__ float hz_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float hz_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

#endif
