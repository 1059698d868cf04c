/* The grouped executor's bulk-copy path (see w4a16_bulk.cuh for why it exists).
 *
 * gate_up: a warp owns 8 gate+up row pairs of one expert (one m16n8k16 row tile, as in the register
 *   path). Its lane 0 asks the bulk-copy engine for the tile's gate codes, up codes, gate scales and up
 *   scales (four contiguous ranges of the blob: rows are contiguous within a projection) with one
 *   mbarrier counting the bytes; the block meanwhile stages x in shared memory in pair order. The
 *   tile's two warps (by default; HZ_W4A16_GU_SPLIT=1: one) then wait for its barrier and each runs its
 *   half of the segments out of shared memory; the halves' sums meet in shared memory.
 * down: a block owns 16 output rows; warp e stages expert e's 16 rows of down codes and scales the same
 *   way. Launched with programmatic dependent launch, the copies are issued before griddepcontrol.wait,
 *   so the down weights stream in while gate_up still runs (the two blocks fit on one SM together for
 *   the model shapes: about 140 KB + 85 KB of the 227 KB for OLMoE). After the wait each warp copies
 *   its expert's intermediate (FP16, from L2) into shared memory, and the rows' expert sums are added
 *   in the given order by one thread per row, as in the register path.
 *
 * Sizes: codes rows are kp / 2 bytes (a multiple of 128); a tile's scale range is rounded up to 16
 * bytes, which stays inside the blob because every part starts on a 256-byte boundary and the blob
 * ends on one (doc/qpack.md). A tile's first row is a multiple of 8, so its scale offset is a multiple
 * of 16 bytes, as the bulk copy requires. */
#include <atomic>
#include <cooperative_groups.h>

#include "knob.cuh"
#include "launch.cuh"
#include "w4a16_bulk.cuh"
#include "async_copy.cuh"
#include "w4a16_device.cuh"
#include "timeline.cuh"

namespace {

constexpr uint32_t kGuTileRows = 8;  /* gate+up row pairs per warp */
constexpr uint32_t kDnTileRows = 16; /* output rows per down block */
constexpr uint32_t kMaxGuWarps = 8;

__host__ __device__ constexpr uint32_t round_up(uint32_t v, uint32_t a) { return (v + a - 1u) / a * a; }

/* The offset that moves a code row from one half of the shared-memory banks to the other. Code rows are
 * a multiple of 128 bytes long, so the two rows that one quarter-warp reads in a phase (MMA rows g and
 * g + 1) would hit the same 16 banks; the kernels put one of every pair of rows this far off (gate_up:
 * the up codes; down: rows 8-15) and let the lanes of odd g read that row first. */
constexpr uint32_t kBankHalf = 64;

/* The 16 words (32 FP16 values, 64 bytes) at src, as stored; kL2Only: read through L2 only (__ldcg),
 * for data another kernel of the step wrote. */
template <bool kL2Only>
__device__ __forceinline__ void chunk_words(const uint4 *src, uint32_t (&w)[16]) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint4 v = kL2Only ? __ldcg(src + i) : src[i];
        w[4 * i + 0] = v.x;
        w[4 * i + 1] = v.y;
        w[4 * i + 2] = v.z;
        w[4 * i + 3] = v.w;
    }
}

/* The 16 words of chunk c of a vector staged in shared memory, as stored. */
__device__ __forceinline__ void lds_chunk_words(const __half *staged, uint32_t c, uint32_t (&w)[16]) {
    chunk_words<false>(reinterpret_cast<const uint4 *>(staged + 32u * c), w);
}

/* The 32 FP16 values of chunk c of a vector staged raw (plain FP16 order) in shared memory, in the
 * tensor-core expansion's pair order (the same permutation as hz_load_act_pairs). */
__device__ __forceinline__ void lds_raw_pairs(const __half *raw, uint32_t c, uint32_t (&xh)[16]) {
    uint32_t wv[16];
    lds_chunk_words(raw, c, wv);
    hz_pairs_from_words(wv, xh);
}

/* Chunks [threadIdx.x, n) step blockDim.x of src, each rewritten into dst in the tensor-core expansion's
 * pair order (dst may be src: each thread reads a chunk before it writes it back). kL2Only as in
 * chunk_words. */
template <bool kL2Only>
__device__ __forceinline__ void stage_pairs(const uint4 *src, uint4 *dst, uint32_t n) {
    for (uint32_t c = threadIdx.x; c < n; c += blockDim.x) {
        uint32_t wv[16], xh[16];
        chunk_words<kL2Only>(src + 4u * c, wv);
        hz_pairs_from_words(wv, xh);
#pragma unroll
        for (int i = 0; i < 4; i++)
            dst[4u * c + (uint32_t)i] = make_uint4(xh[4 * i], xh[4 * i + 1], xh[4 * i + 2], xh[4 * i + 3]);
    }
}

/* ---- gate_up ------------------------------------------------------------------------------------ */

struct BulkGuParams {
    hz_blob_ptrs ptrs;
    const uint8_t *const *blobs_dev;
    const __half *x;
    __half *inter; /* [n x ikp] */
    uint64_t gate_q, gate_s, up_q, up_s;
    uint32_t hidden, hkp, inter_n, ikp, n;
    uint32_t tiles;     /* row tiles per expert: ceil(ikp / 8) (tiles past inter_n write zeros) */
    uint32_t xs_bytes;  /* staged x records, rounded to 128 */
    uint32_t sc_bytes;  /* one projection's scales of a tile, rounded to 16 */
    uint32_t warp_bytes; /* one warp's tile: 8 gate code rows, kBankHalf bytes, 8 up code rows,
                          * 2 x sc_bytes (a multiple of 16) */
    uint32_t f16_magic;  /* HZ_F16_MAGIC, see hz_and_or */
};

/* warps: row tiles per block (one tile per warp when kSplit is 1); kSplit > 1 adds the parts' sums. */
__host__ __device__ inline uint32_t gu_smem_bytes(const BulkGuParams &p, uint32_t warps, uint32_t split) {
    return p.xs_bytes + 128u + warps * p.warp_bytes + (split > 1u ? round_up(warps * split * kGuTileRows * 8u, 128u) : 0u);
}

/* The timeline build (HZ_TIMELINE) adds registers for its stamps; it keeps the plain build's counts, so
 * that the same blocks share an SM as there (a down block beside a gate_up block, the next q/k/v GEMV's
 * beside both; doc/benchmarks.md, twelfth round). */
#ifdef HZ_TIMELINE
#define HZ_GU_BOUNDS(split) __maxnreg__((split) == 1 ? 71 : 64)
#define HZ_DN_BOUNDS(split) __maxnreg__((split) == 1 ? 80 : 63)
#else
#define HZ_GU_BOUNDS(split) __launch_bounds__(kMaxGuWarps * (split) * 32, 1)
#define HZ_DN_BOUNDS(split) __launch_bounds__(kMaxDnWarps * (split) * 32, (split) == 1 ? 1 : (split))
#endif

/* At least one block per SM (not the default's occupancy target): ptxas then keeps the lane's row
 * addresses, the thread index and the FP16 magic in registers instead of recomputing them on every
 * pass of the segment loop (213 -> 199 instructions per pass, 64 -> 66 registers; nvdisasm, sm_90; 71
 * since the lanes of odd rows swap their two rows, 64 with the split).
 * kSplit warps share each row tile: warp w computes part w % kSplit of K (a run of 256-blocks, as the
 * fused kernel splits it) of tile w / kSplit, so each warp's math after its tile has landed is 1/kSplit
 * as long; the parts' FP32 sums are added in part order, as in the fused kernel, which then computes
 * the same numbers. */
template <int kSplit>
__global__ void HZ_GU_BOUNDS(kSplit) bulk_gate_up_kernel(const __grid_constant__ BulkGuParams p) {
    extern __shared__ __align__(128) uint8_t sm[];
    HZ_TL_SCOPE0(HZ_TL_EXPERTS, 1, gridDim.x, 0); /* tag 1: the two-pass gate_up; mark 0: warp 0's tile in,
                                                    * mark 1: the block's last tile in, mark 2: its sums done
                                                    * (split kernels) */

    /* Launched with programmatic dependent launch (HZ_W4A16_PDL), the grid is placed while the kernel
     * before it (the router) still runs: the blob addresses and x are read only after the wait. The
     * down kernel is released only after it too, since that kernel reads the blob addresses before its
     * own wait: once every block of this grid has passed its wait, the router's grid has ended. */
    hz_griddep_wait();
    HZ_TL_WAITED();
    hz_griddep_launch_dependents();
    const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const uint32_t tw = (blockDim.x >> 5) / kSplit, slot = warp / kSplit, part = warp % kSplit; /* tw tiles per block */
    const uint32_t row_bytes = p.hkp / 2u, nblocks = p.hkp / HZ_QBLOCK;
    uint32_t *xs = reinterpret_cast<uint32_t *>(sm);
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm + p.xs_bytes) + slot;
    uint8_t *tile = sm + p.xs_bytes + 128u + slot * p.warp_bytes;
    uint8_t *tg = tile, *tu = tile + kGuTileRows * row_bytes + kBankHalf, *tsg = tu + kGuTileRows * row_bytes;
    uint8_t *tsu = tsg + p.sc_bytes;
#ifdef HZ_TIMELINE
    /* the latest tile-in stamp: the last word of the barriers' 128 bytes (kMaxGuWarps barriers use 64);
     * static shared memory would not fit beside the opt-in maximum the launcher asks for */
    unsigned long long &tl_last_tile = *(reinterpret_cast<unsigned long long *>(sm + p.xs_bytes) + 15);
    if (threadIdx.x == 0) tl_last_tile = 0;
#endif

    const uint32_t gw = blockIdx.x * tw + slot, e = gw / p.tiles, i0 = (gw % p.tiles) * kGuTileRows;
    const bool warp_ok = e < p.n;
    const uint32_t rows = (warp_ok && i0 < p.inter_n) ? min(kGuTileRows, p.inter_n - i0) : 0u;
    if (part == 0 && lane == 0 && rows) {
        const uint8_t *blob = hz_blob(p.ptrs, p.blobs_dev, (int)e);
        const uint32_t cb = rows * row_bytes, sb = round_up(rows * nblocks * 2u, 16u);
        mbar_init(bar);
        mbar_expect(bar, 2u * cb + 2u * sb);
        bulk_copy_stream(tg, blob + p.gate_q + (uint64_t)i0 * row_bytes, cb, bar);
        bulk_copy_stream(tu, blob + p.up_q + (uint64_t)i0 * row_bytes, cb, bar);
        bulk_copy_stream(tsg, blob + p.gate_s + (uint64_t)i0 * nblocks * 2u, sb, bar);
        bulk_copy_stream(tsu, blob + p.up_s + (uint64_t)i0 * nblocks * 2u, sb, bar);
    }
    hz_fill_act_records<false>(xs, p.x, 1, 0, p.hidden, p.hkp / HZ_QCHUNK);
    __syncthreads(); /* x staged; every barrier initialised before any lane waits on it */
    if (kSplit == 1 && !warp_ok) return; /* (with parts, every warp reaches the barrier below) */

    const uint32_t g = lane >> 2, t = lane & 3u, i = i0 + g;
    const bool row_ok = g < rows;
    /* this part's segments (two per 256-block): blocks [part * nblocks / kSplit, (part + 1) * ...);
     * unsplit, the bounds written as before (hkp / 128 == 2 * nblocks), which kept ptxas's register
     * allocation of that kernel as it was (66, before the row swap) */
    const uint32_t s0 = kSplit == 1 ? 0u : 2u * (part * nblocks / kSplit);
    const uint32_t s1 = kSplit == 1 ? p.hkp / 128u : 2u * ((part + 1u) * nblocks / kSplit);
    float acc_g = 0.0f, acc_u = 0.0f;
    if (rows) {
        mbar_wait(bar, 0);
        if (threadIdx.x == 0) HZ_TL_MARK(0);
#ifdef HZ_TIMELINE
        if (lane == 0) atomicMax(&tl_last_tile, (unsigned long long)HZ_TL_NOW());
#endif
        /* Lanes of rows past the end compute on row 0's data and discard it (MMA rows are independent). */
        const uint32_t r = row_ok ? g : 0u;
        /* Lanes of odd rows take the up row as MMA row g and the gate row as row g + 8 (kBankHalf). */
        const bool swap = (g & 1u) != 0;
        const uint8_t *qg = tg + r * row_bytes + 16u * t, *qu = tu + r * row_bytes + 16u * t;
        const __half *sg = reinterpret_cast<const __half *>(tsg) + r * nblocks;
        const __half *su = reinterpret_cast<const __half *>(tsu) + r * nblocks;
        const uint8_t *qa = swap ? qu : qg, *qb = swap ? qg : qu;
        const __half *sa = swap ? su : sg, *sb = swap ? sg : su;
        float acc_a = 0.0f, acc_b = 0.0f, d[4][4] = {};
#pragma unroll 2
        for (uint32_t s = s0; s < s1; s++) {
            const uint4 a = *reinterpret_cast<const uint4 *>(qa + 64u * s);
            const uint4 b = *reinterpret_cast<const uint4 *>(qb + 64u * s);
            uint32_t xh[16];
            hz_lds_pairs(xs + (4u * s + t) * kActWords, xh);
            hz_mma_segment(d, a, b, xh, p.f16_magic);
            if (s & 1u) hz_mma_fold(d, __half2float(sa[s >> 1]), __half2float(sb[s >> 1]), acc_a, acc_b);
        }
        acc_g = swap ? acc_b : acc_a;
        acc_u = swap ? acc_a : acc_b;
    }
    if (kSplit == 1) {
        if (t == 0 && i < p.ikp)
            p.inter[(uint64_t)e * p.ikp + i] = row_ok ? __float2half_rn(hz_silu_mul(acc_g, acc_u)) : __float2half_rn(0.0f);
        return;
    }
    /* The parts' sums meet in shared memory: [tw][kSplit][8 rows][gate, up] */
    float *red = reinterpret_cast<float *>(sm + p.xs_bytes + 128u + tw * p.warp_bytes);
    if (t == 0) {
        red[((slot * kSplit + part) * kGuTileRows + g) * 2u] = acc_g;
        red[((slot * kSplit + part) * kGuTileRows + g) * 2u + 1u] = acc_u;
    }
    __syncthreads();
#ifdef HZ_TIMELINE
    if (threadIdx.x == 0) {
        HZ_TL_MARK_AT(1, tl_last_tile);
        HZ_TL_MARK(2);
    }
#endif
    for (uint32_t idx = threadIdx.x; idx < tw * kGuTileRows; idx += blockDim.x) {
        const uint32_t k = idx / kGuTileRows, gg = idx % kGuTileRows, tl = blockIdx.x * tw + k;
        const uint32_t te = tl / p.tiles, ti0 = (tl % p.tiles) * kGuTileRows, ii = ti0 + gg;
        if (te >= p.n || ii >= p.ikp) continue;
        float gs = 0.0f, us = 0.0f;
        for (uint32_t q = 0; q < (uint32_t)kSplit; q++) {
            gs += red[((k * kSplit + q) * kGuTileRows + gg) * 2u];
            us += red[((k * kSplit + q) * kGuTileRows + gg) * 2u + 1u];
        }
        p.inter[(uint64_t)te * p.ikp + ii] = ii < p.inter_n ? __float2half_rn(hz_silu_mul(gs, us)) : __float2half_rn(0.0f);
    }
}

/* ---- down --------------------------------------------------------------------------------------- */

struct BulkDnParams {
    hz_blob_ptrs ptrs;
    const uint8_t *const *blobs_dev;
    const __half *inter;
    const float *weights;
    __half *y;
    float *acc;
    uint64_t down_q, down_s;
    uint32_t hidden, ikp, n;
    uint32_t act_bytes;  /* one expert's intermediate, ikp FP16 (a multiple of 512 bytes, == 2 * ikp) */
    uint32_t sc_bytes;   /* scales of 16 rows, rounded to 16 */
    uint32_t tile_bytes; /* one expert's 8 code rows, kBankHalf bytes, 8 code rows, scales (a multiple
                          * of 16) */
    uint32_t f16_magic;  /* HZ_F16_MAGIC, see hz_and_or */
    uint32_t inter_tma;  /* the intermediate staged by one bulk copy (16-byte aligned), else by loads */
    /* hz_w4a16_args.h_in, h_out (or NULL), last: the kernels without the residual add read the fields
     * above at the offsets they had before */
    const __half *h_in;
    __half *h_out;
};

/* One 8-byte mbarrier per expert, up to 32 experts, then the intermediate's (kDnInterBar); 128 bytes
 * more keep what follows 128-byte aligned, as before. */
constexpr uint32_t kDnInterBar = 32;
constexpr uint32_t kDnBarBytes = 384;
constexpr uint32_t kMaxDnWarps = 8;

__host__ __device__ inline uint32_t dn_smem_bytes(const BulkDnParams &p, uint32_t split) {
    return kDnBarBytes + p.n * (p.act_bytes + p.tile_bytes) + p.n * split * kDnTileRows * 4u;
}

/* A block of min(n, 8) x kSplit warps; warps w with w / kSplit = v handle experts v, v + 8, ... (each
 * with its own barrier and tile), warp w the part w % kSplit of K (a run of 256-blocks, as the fused
 * kernel splits it); the parts' sums are added in part order, as in the fused kernel. With the split,
 * two blocks' worth of registers per SM (63 per thread, none spilled; 78 without), so that a block still
 * fits beside a gate_up block. Without the split, one block per SM (80 registers since the row swap, 71
 * before it, 64 before the split): hz-bench
 * OLMoE c64 with that split, H200, 2026-12-01: 1,586.5 -> 1,602.7 tok/s (doc/benchmarks.md,
 * thirty-second round). */
template <int kSplit, bool kRes = false>
__global__ void HZ_DN_BOUNDS(kSplit) bulk_down_kernel(const __grid_constant__ BulkDnParams p) {
    extern __shared__ __align__(128) uint8_t sm[];
    const uint32_t warps = (blockDim.x >> 5) / kSplit, warp = (threadIdx.x >> 5) / kSplit, lane = threadIdx.x & 31u;
    const uint32_t part = (threadIdx.x >> 5) % kSplit;
    const uint32_t row_bytes = p.ikp / 2u, nblocks = p.ikp / HZ_QBLOCK;
    /* as in the gate_up kernel: unsplit, the bounds written as before */
    const uint32_t s0 = kSplit == 1 ? 0u : 2u * (part * nblocks / kSplit);
    const uint32_t s1 = kSplit == 1 ? p.ikp / 128u : 2u * ((part + 1u) * nblocks / kSplit);
    const uint32_t j0 = blockIdx.x * kDnTileRows, rows = min(kDnTileRows, p.hidden - j0);
    uint64_t *bars = reinterpret_cast<uint64_t *>(sm);
    uint8_t *acts = sm + kDnBarBytes, *tiles = acts + p.n * p.act_bytes;
    float *ys = reinterpret_cast<float *>(tiles + p.n * p.tile_bytes); /* [n][kSplit][16] */

    HZ_TL_SCOPE0(HZ_TL_EXPERTS, 2, gridDim.x, 0); /* tag 2: the two-pass down; marks 0, 1: staged, summed */
    hz_griddep_launch_dependents(); /* as in the fused kernel: the next kernel waits before reading */
    if (part == 0 && lane == 0) {
        /* The blobs are not written by the gate_up pass: this may run before griddepcontrol.wait. */
        /* rows 0-7, then rows 8-15 kBankHalf bytes further, then the scales */
        const uint32_t r0 = min(rows, 8u), sb = round_up(rows * nblocks * 2u, 16u);
        for (uint32_t e = warp; e < p.n; e += warps) {
            const uint8_t *blob = hz_blob(p.ptrs, p.blobs_dev, (int)e);
            const uint8_t *src = blob + p.down_q + (uint64_t)j0 * row_bytes;
            uint8_t *tile = tiles + e * p.tile_bytes;
            mbar_init(&bars[e]);
            mbar_expect(&bars[e], rows * row_bytes + sb);
            bulk_copy_stream(tile, src, r0 * row_bytes, &bars[e]);
            if (rows > 8u)
                bulk_copy_stream(tile + 8u * row_bytes + kBankHalf, src + 8u * row_bytes, (rows - 8u) * row_bytes,
                                 &bars[e]);
            bulk_copy_stream(tile + kDnTileRows * row_bytes + kBankHalf, blob + p.down_s + (uint64_t)j0 * nblocks * 2u,
                             sb, &bars[e]);
        }
    }
    /* Everything below reads what the gate_up pass wrote (the intermediate) or what came before it. */
    hz_griddep_wait();
    HZ_TL_WAITED();
    /* The intermediate, staged in the expansion's pair order: each 32-value chunk is permuted once here
     * instead of by the eight lanes that read it in the loop below. */
    const uint32_t chunks = p.n * (p.ikp / 32u); /* act_bytes == 2 * ikp: 64 bytes per chunk */
    if (p.inter_tma) {
        /* One bulk copy, then each thread permutes its chunks in place. Tried because loads wait
         * behind what their SM already asked for (the next q/k/v GEMV's first rows, by then); the
         * OLMoE step got 0.4% faster (H200, 2026-11-30), though the last block's staging ended only
         * 0.14 us earlier in the kernel timeline (doc/benchmarks.md, twenty-sixth round). */
        uint64_t *ibar = bars + kDnInterBar;
        if (threadIdx.x == 0) {
            mbar_init(ibar);
            mbar_expect(ibar, chunks * 64u);
            bulk_copy(acts, p.inter, chunks * 64u, ibar);
        }
        __syncthreads(); /* the barrier initialised before any thread waits on it */
        mbar_wait(ibar, 0);
        stage_pairs<false>(reinterpret_cast<const uint4 *>(acts), reinterpret_cast<uint4 *>(acts), chunks);
    } else {
        stage_pairs<true>(reinterpret_cast<const uint4 *>(p.inter), reinterpret_cast<uint4 *>(acts), chunks);
    }
    __syncthreads(); /* barriers initialised; the intermediate of every expert staged */
    if (threadIdx.x == 0) HZ_TL_MARK(0);

    const uint32_t g = lane >> 2, t = lane & 3u;
    const uint32_t ra = g < rows ? g : 0u, rb = g + 8u < rows ? g + 8u : 0u;
    for (uint32_t e = warp; e < p.n; e += warps) {
        const uint8_t *tile = tiles + e * p.tile_bytes, *ts = tile + kDnTileRows * row_bytes + kBankHalf;
        const __half *act = reinterpret_cast<const __half *>(acts + e * p.act_bytes);
        mbar_wait(&bars[e], 0);
        /* Lanes of odd g take row g + 8 as MMA row g and row g as MMA row g + 8 (kBankHalf). */
        const bool swap = (g & 1u) != 0;
        const uint32_t xa = swap ? rb : ra, xb = swap ? ra : rb;
        const uint8_t *qa = tile + xa * row_bytes + (xa >= 8u ? kBankHalf : 0u) + 16u * t;
        const uint8_t *qb = tile + xb * row_bytes + (xb >= 8u ? kBankHalf : 0u) + 16u * t;
        const __half *sa = reinterpret_cast<const __half *>(ts) + xa * nblocks;
        const __half *sb = reinterpret_cast<const __half *>(ts) + xb * nblocks;
        float acc_a = 0.0f, acc_b = 0.0f, d[4][4] = {};
#pragma unroll 2
        for (uint32_t s = s0; s < s1; s++) {
            const uint4 a = *reinterpret_cast<const uint4 *>(qa + 64u * s);
            const uint4 b = *reinterpret_cast<const uint4 *>(qb + 64u * s);
            uint32_t xh[16];
            lds_chunk_words(act, 4u * s + t, xh); /* staged in pair order */
            hz_mma_segment(d, a, b, xh, p.f16_magic);
            if (s & 1u) hz_mma_fold(d, __half2float(sa[s >> 1]), __half2float(sb[s >> 1]), acc_a, acc_b);
        }
        if (t == 0) {
            ys[(e * kSplit + part) * kDnTileRows + g] = swap ? acc_b : acc_a;
            ys[(e * kSplit + part) * kDnTileRows + g + 8u] = swap ? acc_a : acc_b;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) HZ_TL_MARK(1);
    if (threadIdx.x < rows) {
        const uint32_t j = j0 + threadIdx.x;
        float s = p.acc ? __ldcg(p.acc + j) : 0.0f;
        /* asked for beside acc: one L2 round trip for both */
        const __half hin = kRes ? __ldcg(p.h_in + j) : __ushort_as_half((unsigned short)0);
        for (uint32_t k = 0; k < p.n; k++) {
            float ye = ys[k * kSplit * kDnTileRows + threadIdx.x];
            for (uint32_t q = 1; q < (uint32_t)kSplit; q++) ye += ys[(k * kSplit + q) * kDnTileRows + threadIdx.x];
            s = fmaf(__ldcg(p.weights + k), ye, s);
        }
        if (p.acc) p.acc[j] = s;
        if (p.y) p.y[j] = __float2half_rn(s);
        if (kRes) /* resnorm's h with acc: fp16(h_in + fp16(acc)) */
            p.h_out[j] = __float2half_rn(__fadd_rn(__half2float(hin), __half2float(__float2half_rn(s))));
    }
}

/* ---- gate_up and down in one cooperative launch ---------------------------------------------------
 *
 * One block per SM (all co-resident: cooperative launch, so the grid barrier cannot deadlock). Every
 * block asks for all of its bytes before any math: its gate_up tiles and the down tiles of its output
 * rows for every expert, each warp copying (LDGSTS) exactly the bytes it will compute on. It computes
 * its gate_up tiles (K split over two warps, partial sums added in part order), writes the
 * intermediate, the grid synchronises, each block stages the whole intermediate from L2 and computes
 * its down tiles, whose codes arrived while gate_up ran, then adds the experts of each of its rows in
 * the given order. The whole layer is one launch and one stream of copies.
 *
 * Where the time goes (H200, OLMoE layer, 2026-11-29, clock64 stamps per block, medians, in cycles
 * after entry): x staged ~1,900; copy loops done ~6,000; all gate_up bytes in ~11,800; gate_up math
 * done ~13,800; grid barrier passed ~17,400; intermediate staged ~18,200; down math done ~22,400;
 * end ~23,200. The math is issue-bound (Nsight Compute: ~2 instructions per cycle per SM while it
 * runs), so the instructions per weight (hz_and_or) and starting it while bytes still stream (stages,
 * late down copies) are what moved the layer from 17.0 to 14.2 us; the barrier and the down pass,
 * which cannot start before every gate_up tile is written, are most of what remains. */

struct BulkFusedParams {
    hz_blob_ptrs ptrs;
    const uint8_t *const *blobs_dev;
    const __half *x;
    __half *inter; /* [n x ikp] */
    const float *weights;
    __half *y;
    float *acc;
    uint64_t gate_q, gate_s, up_q, up_s, down_q, down_s;
    uint32_t hidden, hkp, inter_n, ikp, n;
    uint32_t gu_tiles;     /* row tiles per expert: ceil(ikp / 8) */
    uint32_t gu_per_block; /* consecutive gate_up tiles (of all experts, expert-major) per block */
    uint32_t dn_tiles;     /* 16-row output tiles: ceil(hidden / 16) */
    uint32_t dn_per_block; /* consecutive output tiles per block */
    uint32_t gu_sc_bytes, gu_tile_bytes, dn_sc_bytes, dn_tile_bytes;
    uint32_t off_x, off_gu, off_dn, off_act, off_red, off_w, smem_bytes;
    uint32_t f16_magic; /* HZ_F16_MAGIC, see hz_and_or */
    const uint32_t *ready, *ready_epoch; /* hz_w4a16_args.ready */
};

/* Code rows in shared memory are swizzled: odd rows swap the two 64-byte halves of every 128 bytes, so
 * the two rows that one quarter-warp reads in the same phase (g = 2m and 2m + 1) use different banks. */
__device__ __forceinline__ uint32_t swz(uint32_t row, uint32_t chunk) { return chunk ^ ((row & 1u) << 2); }

/* One warp copies 256-value block b (8 chunks of 16 bytes) of `rows` code rows: lane = 8 x row-in-pass
 * + chunk, four rows per pass. Fixed lane arithmetic (shifts), a few instructions per LDGSTS: with a
 * general row/chunk walk the index arithmetic was about a fifth of the fused kernel's instructions
 * (Nsight Compute, OLMoE layer), all of it ahead of the copies it delays. */
__device__ __forceinline__ void copy_block_rows(uint8_t *dst, uint32_t dst_stride, const uint8_t *src,
                                                uint32_t src_stride, uint32_t rows, uint32_t b, uint32_t lane) {
    const uint32_t ch = 8u * b + (lane & 7u);
    for (uint32_t r = lane >> 3; r < rows; r += 4u)
        cp_async16(dst + r * dst_stride + 16u * swz(r, ch), src + (uint64_t)r * src_stride + 16u * ch);
}

/* cp.async.wait_group with a count known only after unrolling. */
__device__ __forceinline__ void cp_async_wait_n(uint32_t n) {
    switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    case 7: cp_async_wait<7>(); break;
    default: cp_async_wait<8>(); break;
    }
}

/* kSplit: each tile's K range is split over kSplit warps (whole 256-value blocks per part). Each warp
 * copies exactly the bytes it computes on (LDGSTS, 16 bytes per lane and step; cp.async groups: its
 * gate_up item in kStages parts along K, then its down items), so its math starts as soon as its own
 * bytes are in, while the rest of the layer still streams. Every item keeps a private copy of its
 * tile's scale rows. */
/* The timeline build's instrumentation would take this kernel from 85 to 94 registers per thread, and
 * a GEMV block beside it (80 registers x 256 threads; Qwen's shared down) would then no longer fit
 * on the same multiprocessor: the instrument would change what it measures. It keeps the plain
 * build's budget instead. */
#ifdef HZ_TIMELINE
#define HZ_FUSED_BOUNDS(threads) __maxnreg__(88)
#else
#define HZ_FUSED_BOUNDS(threads) __launch_bounds__(threads)
#endif

template <int kWarps, int kSplit, int kStages>
__global__ void HZ_FUSED_BOUNDS(kWarps * 32) bulk_fused_kernel(const __grid_constant__ BulkFusedParams p) {
    extern __shared__ __align__(128) uint8_t sm[];
    HZ_TL_SCOPE0(HZ_TL_EXPERTS, 0, gridDim.x, 0);
    /* The next kernel of the step (launched with programmatic dependent launch) may start its own
     * weight loads as our blocks retire; it waits for this grid before reading anything we write. */
    hz_griddep_launch_dependents();
    const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3u;
    /* Launched with programmatic dependent launch (HZ_W4A16_PDL), this grid is placed while the
     * router still runs; everything below reads its results (blob addresses, x, weights, acc). With
     * ready flags the router says when those are written, which can be long before its grid ends
     * (Qwen's router GEMV still streams the shared expert's rows then). */
    if (p.ready)
        hz_wait_ready(p.ready, p.ready_epoch);
    else
        hz_griddep_wait();
    HZ_TL_WAITED();
    uint32_t *xs = reinterpret_cast<uint32_t *>(sm + p.off_x);
    const uint32_t h_row = p.hkp / 2u, h_nb = p.hkp / HZ_QBLOCK;
    const uint32_t i_row = p.ikp / 2u, i_nb = p.ikp / HZ_QBLOCK;
    const uint32_t gu_first = blockIdx.x * p.gu_per_block, dn_first = blockIdx.x * p.dn_per_block;
    const uint32_t gu_total = p.n * p.gu_tiles;
    const uint32_t gu_count = gu_first < gu_total ? min(p.gu_per_block, gu_total - gu_first) : 0u;
    const uint32_t dn_count = dn_first < p.dn_tiles ? min(p.dn_per_block, p.dn_tiles - dn_first) : 0u;

    /* 0. x, the routing weights and this block's first rows of acc, before any copy: a load issued
     * after the copies waits behind all of this SM's copy traffic (in-kernel clocks, OLMoE layer: about
     * 4,000 cycles). Nothing else writes acc while this grid runs. */
    hz_fill_act_records<false>(xs, p.x, 1, 0, p.hidden, p.hkp / HZ_QCHUNK);
    float *wsm = reinterpret_cast<float *>(sm + p.off_w);
    if (threadIdx.x < p.n) wsm[threadIdx.x] = __ldcg(p.weights + threadIdx.x);
    const uint32_t j_first = dn_first * kDnTileRows + threadIdx.x;
    const float acc_first =
        (p.acc && threadIdx.x < dn_count * kDnTileRows && j_first < p.hidden) ? __ldcg(p.acc + j_first) : 0.0f;
    __syncthreads(); /* x and the weights staged */

    /* 1. This warp's copies: its gate_up item (at most one per warp: the launcher checks) in kStages
     * cp.async groups along K (stage k: the k-th share of the part's 256-blocks; the scales ride with
     * stage 0), then its down items as one more group. The SM's requests go out stage by stage, so
     * early stages land first. An LDGSTS does not issue until the SM has room for its request, so a
     * warp's copy loop lasts about as long as the stream: a warp with a gate_up item therefore issues
     * its down copies only after its stage-0 math (in-kernel clocks: its math then starts ~4,000 cycles
     * earlier; OLMoE layer 15.3 -> 14.2 us). The waits count each warp's own groups. */
    const uint32_t gq = warp % kSplit, gk = warp / kSplit;
    const uint32_t g_tile = gu_first + gk, g_e = g_tile / p.gu_tiles, g_i0 = (g_tile % p.gu_tiles) * kGuTileRows;
    const uint32_t g_rows = (warp < gu_count * kSplit && g_i0 < p.inter_n) ? min(kGuTileRows, p.inter_n - g_i0) : 0u;
    const uint32_t pb0 = gq * h_nb / kSplit, pb1 = (gq + 1u) * h_nb / kSplit; /* this part's 256-blocks */
    const uint32_t nbp = pb1 - pb0;
    uint8_t *g_base = sm + p.off_gu + gk * p.gu_tile_bytes;
    const uint8_t *g_blob = g_rows ? hz_blob(p.ptrs, p.blobs_dev, (int)g_e) : nullptr;
#pragma unroll
    for (int st = 0; st < kStages; st++) {
        if (g_rows) {
            if (st == 0) {
                const uint32_t sc = round_up(g_rows * h_nb * 2u, 16u) / 16u;
                uint8_t *sdst = g_base + 2u * kGuTileRows * h_row + gq * 2u * p.gu_sc_bytes;
                for (uint32_t c = lane; c < 2u * sc; c += 32u) {
                    const uint32_t proj = c >= sc, off = 16u * (proj ? c - sc : c);
                    cp_async16(sdst + proj * p.gu_sc_bytes + off,
                               g_blob + (proj ? p.up_s : p.gate_s) + (uint64_t)g_i0 * h_nb * 2u + off);
                }
            }
            for (uint32_t b = pb0 + (uint32_t)st * nbp / kStages; b < pb0 + (uint32_t)(st + 1) * nbp / kStages; b++) {
                copy_block_rows(g_base, h_row, g_blob + p.gate_q + (uint64_t)g_i0 * h_row, h_row, g_rows, b, lane);
                copy_block_rows(g_base + kGuTileRows * h_row, h_row, g_blob + p.up_q + (uint64_t)g_i0 * h_row, h_row,
                                g_rows, b, lane);
            }
        }
        cp_async_commit();
    }
    auto issue_down = [&]() {
        for (uint32_t item = warp; item < dn_count * p.n * kSplit; item += kWarps) {
            const uint32_t u = item / kSplit, q = item % kSplit;
            const uint32_t r = u / p.n, e = u % p.n, j0 = (dn_first + r) * kDnTileRows;
            const uint32_t rows = min(kDnTileRows, p.hidden - j0);
            const uint8_t *blob = hz_blob(p.ptrs, p.blobs_dev, (int)e);
            uint8_t *base = sm + p.off_dn + u * p.dn_tile_bytes;
            for (uint32_t b = q * i_nb / kSplit; b < (q + 1u) * i_nb / kSplit; b++)
                copy_block_rows(base, i_row, blob + p.down_q + (uint64_t)j0 * i_row, i_row, rows, b, lane);
            const uint32_t sc = round_up(rows * i_nb * 2u, 16u) / 16u;
            uint8_t *sdst = base + kDnTileRows * i_row + q * p.dn_sc_bytes;
            for (uint32_t c = lane; c < sc; c += 32u)
                cp_async16(sdst + 16u * c, blob + p.down_s + (uint64_t)j0 * i_nb * 2u + 16u * c);
        }
        cp_async_commit();
    };
    const bool dn_late = warp < gu_count * kSplit; /* a warp with a gate_up item issues its down copies late */
    if (!dn_late) issue_down();

    /* 2. gate_up: work item (tile k, K part q); the parts' FP32 sums meet in shared memory. */
    float *red_gu = reinterpret_cast<float *>(sm + p.off_red); /* [gu_per_block][kSplit][8][2] */
    float *red_dn = red_gu + p.gu_per_block * kSplit * kGuTileRows * 2u; /* [dn units][kSplit][16] */
    if (warp < gu_count * kSplit) {
        float acc_g = 0.0f, acc_u = 0.0f;
        const uint32_t r = g < g_rows ? g : 0u;
        const uint8_t *scb = g_base + 2u * kGuTileRows * h_row + gq * 2u * p.gu_sc_bytes;
        const __half *sgp = reinterpret_cast<const __half *>(scb) + r * h_nb;
        const __half *sup = reinterpret_cast<const __half *>(scb + p.gu_sc_bytes) + r * h_nb;
        const uint8_t *qg = g_base + r * h_row, *qu = qg + kGuTileRows * h_row;
        float d[4][4] = {};
#pragma unroll
        for (int st = 0; st < kStages; st++) {
            if (dn_late && st == 1) issue_down();
            cp_async_wait_n((uint32_t)(kStages - 1 - st) + (!dn_late || st >= 1 ? 1u : 0u)); /* stages 0..st landed */
            __syncwarp();                               /* ... and every lane's of this warp are visible */
            if (!g_rows) continue;
#pragma unroll 2
            for (uint32_t s = 2u * (pb0 + (uint32_t)st * nbp / kStages); s < 2u * (pb0 + (uint32_t)(st + 1) * nbp / kStages);
                 s++) {
                const uint32_t ch = 16u * swz(r, 4u * s + t);
                const uint4 a = *reinterpret_cast<const uint4 *>(qg + ch);
                const uint4 b = *reinterpret_cast<const uint4 *>(qu + ch);
                uint32_t xh[16];
                hz_lds_pairs(xs + (4u * s + t) * kActWords, xh);
                hz_mma_segment(d, a, b, xh, p.f16_magic);
                if (s & 1u) hz_mma_fold(d, __half2float(sgp[s >> 1]), __half2float(sup[s >> 1]), acc_g, acc_u);
            }
        }
        if (dn_late && kStages == 1) issue_down();
        if (t == 0) {
            red_gu[((gk * kSplit + gq) * kGuTileRows + g) * 2u] = acc_g;
            red_gu[((gk * kSplit + gq) * kGuTileRows + g) * 2u + 1u] = acc_u;
        }
    }
    __syncthreads();
    for (uint32_t idx = threadIdx.x; idx < gu_count * kGuTileRows; idx += blockDim.x) {
        const uint32_t k = idx / kGuTileRows, gg = idx % kGuTileRows, tile = gu_first + k;
        const uint32_t e = tile / p.gu_tiles, i = (tile % p.gu_tiles) * kGuTileRows + gg;
        if (i >= p.ikp) continue;
        float gs = 0.0f, us = 0.0f;
        for (uint32_t q = 0; q < kSplit; q++) {
            gs += red_gu[((k * kSplit + q) * kGuTileRows + gg) * 2u];
            us += red_gu[((k * kSplit + q) * kGuTileRows + gg) * 2u + 1u];
        }
        p.inter[(uint64_t)e * p.ikp + i] = i < p.inter_n ? __float2half_rn(hz_silu_mul(gs, us)) : __float2half_rn(0.0f);
    }

    /* 3. The whole intermediate is written (grid.sync orders global memory across the grid). */
    cooperative_groups::this_grid().sync();
    if (p.ready) hz_griddep_wait(); /* the grid before ends before this one: the stream's order holds */
    if (dn_count == 0) return;
    {
        /* Four loads in flight per thread before any store: one L2 round trip, not four. */
        const uint4 *src = reinterpret_cast<const uint4 *>(p.inter);
        uint4 *dst = reinterpret_cast<uint4 *>(sm + p.off_act);
        const uint32_t pieces = p.n * (p.ikp / 8u);
        for (uint32_t c = threadIdx.x; c < pieces; c += 4u * blockDim.x) {
            uint4 v[4];
#pragma unroll
            for (uint32_t k = 0; k < 4u; k++)
                if (c + k * blockDim.x < pieces) v[k] = __ldcg(src + c + k * blockDim.x);
#pragma unroll
            for (uint32_t k = 0; k < 4u; k++)
                if (c + k * blockDim.x < pieces) dst[c + k * blockDim.x] = v[k];
        }
    }
    cp_async_wait<0>(); /* this lane's down copies landed; the barrier below shares them */
    __syncthreads();

    /* 4. down: work item (unit u = (row tile, expert), K part q), then the ordered expert sum per row. */
    for (uint32_t item = warp; item < dn_count * p.n * kSplit; item += kWarps) {
        const uint32_t u = item / kSplit, q = item % kSplit;
        const uint32_t r = u / p.n, e = u % p.n, j0 = (dn_first + r) * kDnTileRows;
        const uint32_t rows = min(kDnTileRows, p.hidden - j0);
        const uint32_t ra = g < rows ? g : 0u, rb = g + 8u < rows ? g + 8u : 0u;
        const uint8_t *tile = sm + p.off_dn + u * p.dn_tile_bytes;
        const __half *sc = reinterpret_cast<const __half *>(tile + kDnTileRows * i_row + q * p.dn_sc_bytes);
        const __half *act = reinterpret_cast<const __half *>(sm + p.off_act) + (uint64_t)e * p.ikp;
        const uint8_t *qa = tile + ra * i_row, *qb = tile + rb * i_row;
        const uint32_t s0 = 2u * (q * i_nb / kSplit), s1 = 2u * ((q + 1u) * i_nb / kSplit);
        float acc_a = 0.0f, acc_b = 0.0f, d[4][4] = {};
#pragma unroll 4
        for (uint32_t s = s0; s < s1; s++) {
            const uint4 a = *reinterpret_cast<const uint4 *>(qa + 16u * swz(ra, 4u * s + t));
            const uint4 b = *reinterpret_cast<const uint4 *>(qb + 16u * swz(rb, 4u * s + t));
            uint32_t xh[16];
            lds_raw_pairs(act, 4u * s + t, xh);
            hz_mma_segment(d, a, b, xh, p.f16_magic);
            if (s & 1u)
                hz_mma_fold(d, __half2float(sc[ra * i_nb + (s >> 1)]), __half2float(sc[rb * i_nb + (s >> 1)]), acc_a,
                            acc_b);
        }
        if (t == 0) {
            red_dn[(u * kSplit + q) * kDnTileRows + g] = acc_a;
            red_dn[(u * kSplit + q) * kDnTileRows + g + 8u] = acc_b;
        }
    }
    __syncthreads();
    for (uint32_t jl = threadIdx.x; jl < dn_count * kDnTileRows; jl += blockDim.x) {
        const uint32_t r = jl / kDnTileRows, row = jl % kDnTileRows, j = dn_first * kDnTileRows + jl;
        if (j >= p.hidden) break;
        float s = p.acc ? (jl == threadIdx.x ? acc_first : __ldcg(p.acc + j)) : 0.0f;
        for (uint32_t e = 0; e < p.n; e++) {
            float ye = 0.0f;
            for (uint32_t q = 0; q < kSplit; q++) ye += red_dn[((r * p.n + e) * kSplit + q) * kDnTileRows + row];
            s = fmaf(wsm[e], ye, s);
        }
        if (p.acc) p.acc[j] = s;
        if (p.y) p.y[j] = __float2half_rn(s);
    }
}

/* ---- host side ---------------------------------------------------------------------------------- */

/* Whether the kernels were built for sm_90+ and the current device is one, and its limits. Cached per
 * process after the first successful query (one GPU model per process is assumed for the cache; a
 * wrong guess only costs the fallback path or a launch error reported as HZ_EDEVICE). */
struct DeviceInfo {
    int ok;          /* bulk path usable */
    int sms;         /* multiprocessors */
    int smem_optin;  /* most dynamic shared memory per block */
};

/* The fused kernel as launched: 16 warps, each gate_up tile's K split over two warps, four copy stages.
 * Chosen on the H200 (2026-11-29, tests/gpu/bench_w4a16) among 8/16/32 warps, K split 1/2/4 and
 * bulk-copy (TMA) against LDGSTS copies (OLMoE layer 16.9-20.1 us, Qwen 14.0-18.5 us before this
 * round's changes), then stages with the current loop: OLMoE 14.24 / 14.33 us (4 / 2 stages), Qwen
 * 11.73 / 12.48 (1 and 8 stages were slower than 2 and 4 before the down copies moved late). */
constexpr int kFusedWarpsUsed = 16, kFusedSplitUsed = 2, kFusedStagesUsed = 4;
#define HZ_FUSED_KERNEL bulk_fused_kernel<kFusedWarpsUsed, kFusedSplitUsed, kFusedStagesUsed>


std::atomic<int> g_info_state{0}; /* 0 unknown, 1 known */
DeviceInfo g_info;
std::atomic<int> g_attr_set{0};          /* the kernels' shared-memory limits were raised */
std::atomic<int> g_coop_pdl_refused{0};  /* cooperative + programmatic launch refused once: not asked again */

int device_info(DeviceInfo *out) {
    if (g_info_state.load(std::memory_order_acquire) == 1) {
        *out = g_info;
        return HZ_OK;
    }
    DeviceInfo di = {0, 0, 0};
    int dev = 0, major = 0;
    cudaFuncAttributes fa;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&di.sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&di.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, bulk_gate_up_kernel<1>);
    if (e != cudaSuccess) return hz_cuda_fail(e, "w4a16 grouped (bulk)", "device query");
    di.ok = major >= 9 && fa.binaryVersion >= 90;
    g_info = di;
    g_info_state.store(1, std::memory_order_release);
    *out = di;
    return HZ_OK;
}

/* Raises the bulk kernels' dynamic shared-memory limit to the device maximum, once. Two threads racing
 * here set the same values. */
int raise_smem_limits(const DeviceInfo &di) {
    if (g_attr_set.load(std::memory_order_acquire)) return HZ_OK;
    const void *const two_pass[] = {reinterpret_cast<const void *>(bulk_gate_up_kernel<1>),
                                    reinterpret_cast<const void *>(bulk_gate_up_kernel<2>),
                                    reinterpret_cast<const void *>(bulk_down_kernel<1>),
                                    reinterpret_cast<const void *>(bulk_down_kernel<2>),
                                    reinterpret_cast<const void *>(bulk_down_kernel<1, true>),
                                    reinterpret_cast<const void *>(bulk_down_kernel<2, true>)};
    cudaError_t e = cudaFuncSetAttribute(HZ_FUSED_KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, di.smem_optin);
    for (const void *k : two_pass) {
        if (e == cudaSuccess) e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, di.smem_optin);
        /* All of the SM's unified L1/shared storage as shared memory, so that a down block (PDL) fits next
         * to a gate_up block: the driver would otherwise pick the smallest carveout that holds one block. */
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    }
    if (e != cudaSuccess) return hz_cuda_fail(e, "w4a16 grouped (bulk)", "cudaFuncSetAttribute");
    g_attr_set.store(1, std::memory_order_release);
    return HZ_OK;
}


/* The two-pass gate_up kernel takes programmatic dependent launch when the caller asks for it: placed
 * while the router still runs, it starts its copies as soon as the routing is known (OLMoE-1B-7B shape,
 * full residency, step at positions 32-96 / ~200 / ~1024, H200, 2026-11-30: 0.667 / 0.704 / 0.770 ->
 * 0.662 / 0.699 / 0.763 ms; doc/benchmarks.md, seventeenth round). HZ_W4A16_GU_PDL=0 launches it
 * without (A/B runs). */
bool gu_pdl_enabled() {
    static std::atomic<int> cache{-1};
    return knob_once(cache, "HZ_W4A16_GU_PDL", "0", 0, 1) != 0;
}

/* The two-pass gate_up kernel's K split (warps per row tile): 2 unless HZ_W4A16_GU_SPLIT=1 (A/B runs).
 * OLMoE-1B-7B shape, full residency, step at positions 32-96 / ~200 / ~1024, H200, 2026-11-30, three
 * alternating runs each: 0.642 / 0.679 / 0.732 ms with one warp per tile, 0.642 / 0.675 / 0.724 with
 * two, and 0.678 -> 0.673 replayed back to back; the layer alone (bench_w4a16) does not change
 * (17.2-17.3 us the pair), so the gain is in how the step's kernels share the device
 * (doc/benchmarks.md, twenty-sixth round). */
uint32_t gu_split() {
    static std::atomic<int> cache{-1};
    return (uint32_t)knob_once(cache, "HZ_W4A16_GU_SPLIT", "1", 1, 2);
}

/* The two-pass down kernel's K split (warps per expert): 2 unless HZ_W4A16_DN_SPLIT=1. With both splits
 * the two-pass kernels compute the fused kernel's numbers (the same greedy tokens). hz-bench, H200,
 * 2026-12-01, two alternating runs each: OLMoE c64 1,586.6 / 1,586.5 tok/s with one warp per expert,
 * 1,613.8 / 1,613.4 with two; Qwen c60 725.1 with one, 725.0 with two (doc/benchmarks.md,
 * thirty-second round). It had been 1 since the step bench (2026-11-30) found two slower at the
 * positions hz-bench decodes (0.679 -> 0.681 ms at ~200). */
uint32_t dn_split() {
    static std::atomic<int> cache{-1};
    return (uint32_t)knob_once(cache, "HZ_W4A16_DN_SPLIT", "1", 1, 2);
}

/* The down kernel's intermediate staged by one bulk copy unless HZ_W4A16_DN_TMA=0 (A/B runs). */
bool dn_tma_enabled() {
    static std::atomic<int> cache{-1};
    return knob_once(cache, "HZ_W4A16_DN_TMA", "0", 0, 1) != 0;
}

/* Blob part offsets must keep the bulk copies 16-byte aligned (they are 256-aligned by the format). */
bool layout_aligned(const hz_expert_layout *l) {
    return ((l->gate_q | l->gate_s | l->up_q | l->up_s | l->down_q | l->down_s) & 15u) == 0;
}

} // namespace

HZ_TL_HOST(experts)

int hz_w4a16_bulk_gate_up_launch(const hz_w4a16_args *a, void *stream) {
    const hz_expert_layout *l = a->layout;
    DeviceInfo di;
    int st = device_info(&di);
    if (st != HZ_OK) return st;
    if (!di.ok || !layout_aligned(l)) return kHzBulkNotApplicable;
    BulkGuParams p;
    hz_fill_gate_up_params(a, p);
    p.tiles = (p.ikp + kGuTileRows - 1u) / kGuTileRows;
    p.xs_bytes = round_up((p.hkp / HZ_QCHUNK) * kActWords * 4u, 128u);
    p.sc_bytes = round_up(kGuTileRows * (p.hkp / HZ_QBLOCK) * 2u, 16u);
    p.warp_bytes = 2u * kGuTileRows * (p.hkp / 2u) + kBankHalf + 2u * p.sc_bytes;
    /* Eight warps per block unless that would leave more than half the SMs without a block. */
    const uint64_t tiles = (uint64_t)p.n * p.tiles;
    uint32_t warps = kMaxGuWarps;
    while (warps > 1 && (tiles + warps - 1) / warps < (uint64_t)di.sms / 2u) warps /= 2;
    const uint32_t split = p.hkp / HZ_QBLOCK >= 2u ? gu_split() : 1u; /* a part needs a 256-block */
    while (warps > 1 && gu_smem_bytes(p, warps, split) > (uint32_t)di.smem_optin) warps /= 2;
    if (gu_smem_bytes(p, warps, split) > (uint32_t)di.smem_optin) return kHzBulkNotApplicable;
    st = raise_smem_limits(di);
    if (st != HZ_OK) return st;
    const dim3 grid((unsigned)((tiles + warps - 1) / warps)), block(warps * split * 32u);
    const bool pdl = (a->flags & HZ_W4A16_PDL) && gu_pdl_enabled();
    const cudaStream_t cs = static_cast<cudaStream_t>(stream);
    const cudaError_t e = split == 2u ? hz_launch_ex(bulk_gate_up_kernel<2>, grid, block, gu_smem_bytes(p, warps, 2u), cs, pdl, 0u, p)
                                      : hz_launch_ex(bulk_gate_up_kernel<1>, grid, block, gu_smem_bytes(p, warps, 1u), cs, pdl, 0u, p);
    if (e != cudaSuccess) return hz_cuda_fail(e, "w4a16 grouped gate_up (bulk)", "cudaLaunchKernelEx");
    return HZ_OK;
}

/* Whether the two-pass bulk down kernel takes n experts of layout l on this device, and how: its
 * split, shared memory and the shape fields of p (act_bytes, sc_bytes, tile_bytes, from ikp and n).
 * The launcher and hz_w4a16_bulk_down_applies both ask here, so they cannot disagree. */
static int bulk_down_shape(const hz_expert_layout *l, uint32_t n, DeviceInfo *di, BulkDnParams &p, uint32_t *split,
                           uint32_t *smem) {
    int st = device_info(di);
    if (st != HZ_OK) return st;
    if (!di->ok || !layout_aligned(l) || n > 32u) return kHzBulkNotApplicable;
    p.ikp = l->down.kp;
    p.n = n;
    p.act_bytes = p.ikp * 2u;
    p.sc_bytes = round_up(kDnTileRows * (p.ikp / HZ_QBLOCK) * 2u, 16u);
    p.tile_bytes = kDnTileRows * (p.ikp / 2u) + kBankHalf + p.sc_bytes;
    *split = p.ikp / HZ_QBLOCK >= 2u ? dn_split() : 1u; /* a part needs a 256-block */
    *smem = dn_smem_bytes(p, *split);
    return *smem > (uint32_t)di->smem_optin ? kHzBulkNotApplicable : HZ_OK;
}

int hz_w4a16_bulk_down_applies(const hz_expert_layout *l, uint32_t n) {
    DeviceInfo di;
    BulkDnParams p;
    uint32_t split = 0, smem = 0;
    const int st = bulk_down_shape(l, n, &di, p, &split, &smem);
    return st == HZ_OK ? 1 : st == kHzBulkNotApplicable ? 0 : st;
}

int hz_w4a16_bulk_down_launch(const hz_w4a16_args *a, void *stream) {
    const hz_expert_layout *l = a->layout;
    DeviceInfo di;
    BulkDnParams p;
    uint32_t split = 0, smem = 0;
    int st = bulk_down_shape(l, a->n, &di, p, &split, &smem);
    if (st != HZ_OK) return st;
    hz_fill_down_params(a, p);
    p.h_in = static_cast<const __half *>(a->h_in);
    p.h_out = static_cast<__half *>(a->h_out);
    p.inter_tma = ((uintptr_t)p.inter & 15u) == 0 && dn_tma_enabled();
    st = raise_smem_limits(di);
    if (st != HZ_OK) return st;
    const dim3 grid((p.hidden + kDnTileRows - 1u) / kDnTileRows), block(32u * (p.n < kMaxDnWarps ? p.n : kMaxDnWarps) * split);
    const cudaStream_t cs = static_cast<cudaStream_t>(stream);
    const bool pdl = (a->flags & HZ_W4A16_PDL) != 0;
    /* the residual add has instantiations of its own: the others keep their code and registers */
    const bool res = p.h_out != nullptr;
    void (*const kern)(BulkDnParams) = split == 2u ? (res ? bulk_down_kernel<2, true> : bulk_down_kernel<2>)
                                                   : (res ? bulk_down_kernel<1, true> : bulk_down_kernel<1>);
    const cudaError_t e = hz_launch_ex(kern, grid, block, smem, cs, pdl, 0u, p);
    if (e != cudaSuccess) return hz_cuda_fail(e, "w4a16 grouped down (bulk)", "cudaLaunchKernelEx");
    return HZ_OK;
}

int hz_w4a16_bulk_fused_launch(const hz_w4a16_args *a, void *stream) {
    const hz_expert_layout *l = a->layout;
    DeviceInfo di;
    int st = device_info(&di);
    if (st != HZ_OK) return st;
    if (!di.ok || !layout_aligned(l) || di.sms <= 0) return kHzBulkNotApplicable;
    BulkFusedParams p;
    hz_fill_gate_up_params(a, p); /* both passes: the gate_up fields ... */
    hz_fill_down_params(a, p);    /* ... and the down ones (the same intermediate) */
    p.gu_tiles = (p.ikp + kGuTileRows - 1u) / kGuTileRows;
    p.dn_tiles = (p.hidden + kDnTileRows - 1u) / kDnTileRows;
    p.ready = a->blobs_dev && a->ready && a->ready_epoch ? a->ready : nullptr;
    p.ready_epoch = a->ready_epoch;
    /* One block per SM at most; each block's share of both passes is a run of consecutive tiles. */
    const uint32_t gu_total = p.n * p.gu_tiles;
    uint32_t grid = gu_total > p.dn_tiles ? gu_total : p.dn_tiles;
    if (grid > (uint32_t)di.sms) grid = (uint32_t)di.sms;
    p.gu_per_block = (gu_total + grid - 1u) / grid;
    p.dn_per_block = (p.dn_tiles + grid - 1u) / grid;
    const uint32_t g1 = (gu_total + p.gu_per_block - 1u) / p.gu_per_block;
    const uint32_t g2 = (p.dn_tiles + p.dn_per_block - 1u) / p.dn_per_block;
    grid = g1 > g2 ? g1 : g2;
    const uint32_t split = (uint32_t)kFusedSplitUsed;
    p.gu_sc_bytes = round_up(kGuTileRows * (p.hkp / HZ_QBLOCK) * 2u, 16u);
    p.gu_tile_bytes = round_up(2u * kGuTileRows * (p.hkp / 2u) + split * 2u * p.gu_sc_bytes, 128u);
    p.dn_sc_bytes = round_up(kDnTileRows * (p.ikp / HZ_QBLOCK) * 2u, 16u);
    p.dn_tile_bytes = round_up(kDnTileRows * (p.ikp / 2u) + split * p.dn_sc_bytes, 128u);
    if (p.gu_per_block * split > (uint32_t)kFusedWarpsUsed) return kHzBulkNotApplicable; /* one gate_up item per warp */
    const uint64_t off_x = 0, off_gu = off_x + round_up((p.hkp / HZ_QCHUNK) * kActWords * 4u, 128u);
    const uint64_t off_dn = off_gu + (uint64_t)p.gu_per_block * p.gu_tile_bytes;
    const uint64_t off_act = off_dn + (uint64_t)p.dn_per_block * p.n * p.dn_tile_bytes;
    const uint64_t off_red = off_act + round_up(p.n * p.ikp * 2u, 128u);
    const uint64_t off_w =
        off_red + 4u * (uint64_t)split * (p.gu_per_block * kGuTileRows * 2u + p.dn_per_block * p.n * kDnTileRows);
    const uint64_t total = off_w + 4u * HZ_W4A16_MAX_EXPERTS;
    if (total > (uint64_t)di.smem_optin) return kHzBulkNotApplicable;
    p.off_x = (uint32_t)off_x;
    p.off_gu = (uint32_t)off_gu;
    p.off_dn = (uint32_t)off_dn;
    p.off_act = (uint32_t)off_act;
    p.off_red = (uint32_t)off_red;
    p.off_w = (uint32_t)off_w;
    p.smem_bytes = (uint32_t)total;
    st = raise_smem_limits(di);
    if (st != HZ_OK) return st;
    /* A cooperative grid must be resident all at once; with another kernel's blocks resident the launch
     * fails rather than deadlocks, and occupancy says up front whether it can fit at all. */
    int per_sm = 0;
    cudaError_t e =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, HZ_FUSED_KERNEL, kFusedWarpsUsed * 32, p.smem_bytes);
    if (e != cudaSuccess) return hz_cuda_fail(e, "w4a16 grouped (bulk fused)", "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if ((uint64_t)per_sm * (uint64_t)di.sms < grid) return kHzBulkNotApplicable;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(kFusedWarpsUsed * 32);
    cfg.dynamicSmemBytes = p.smem_bytes;
    cfg.stream = static_cast<cudaStream_t>(stream);
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    /* A driver that refuses the two attributes together gets the cooperative launch alone (the
     * grid then starts after the previous kernel, as without HZ_W4A16_PDL); remembered per process. */
    const bool pdl = (a->flags & HZ_W4A16_PDL) && !g_coop_pdl_refused.load(std::memory_order_relaxed);
    cfg.numAttrs = pdl ? 2 : 1;
    e = cudaLaunchKernelEx(&cfg, HZ_FUSED_KERNEL, p);
    if (pdl && (e == cudaErrorInvalidValue || e == cudaErrorNotSupported)) { /* the pair refused, nothing broken */
        (void)cudaGetLastError();
        g_coop_pdl_refused.store(1, std::memory_order_relaxed);
        cfg.numAttrs = 1;
        e = cudaLaunchKernelEx(&cfg, HZ_FUSED_KERNEL, p);
    }
    if (e != cudaSuccess) return hz_cuda_fail(e, "w4a16 grouped (bulk fused)", "cudaLaunchKernelEx");
    return HZ_OK;
}
