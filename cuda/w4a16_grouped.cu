/* The grouped W4A16 executor (see w4a16_grouped.cuh). Two implementations of the same two passes:
 *
 * Tensor-core path (default). The codes of two rows (gate and up of one index, or two down rows) are
 * expanded to exact FP16 (code - 8) values in registers and multiplied with the activations by
 * mma.sync m16n8k16 with FP32 accumulation; products of FP16 values are exact, so the numerics are
 * those of the definition up to summation order. A warp owns 8 gate+up row pairs (or 16 down rows of
 * one expert); each lane reads one 16-byte chunk per row and 128-value segment, keeping the next
 * kRing segments of codes in flight. Activations are staged once per block in shared memory in the
 * expansion's pair order (w4a16_device.cuh), so the only long-latency loads are the code stream.
 *
 * CUDA-core path (HZ_W4A16_CUDA_CORES). Each lane owns whole 32-value chunks of a row (lane l reads
 * chunks l, l + 32, ...), keeps its activations in registers (FP32, in the chunk's nibble order) for
 * every row it visits, expands each code with one LOP3 + one FFMA and accumulates with FFMA; the warp
 * reduces with shuffles. About three instructions per weight, against about one on the tensor-core
 * path; kept as an independent second implementation that the tests compare.
 *
 * Both: gate_up writes a = fp16(silu(g) * u) (rows from inter to kp get zeros); down gives each block
 * a range of output rows and all experts of those rows, parks y_e[j] in shared memory and has one
 * thread per row add the experts in the given order (deterministic, no atomics). With HZ_W4A16_PDL
 * the down grid is launched with programmatic dependent launch and issues its first code loads before
 * griddepcontrol.wait, so its weight stream starts while the gate_up grid drains.
 *
 * Both are latency-bound at batch 1 on an H200 (see scripts/gpu-check and the issue notes for the
 * figures): about 2 resident warps per scheduler and ~0.3 instructions issued per cycle, DRAM at a
 * quarter of its bandwidth. The levers left are more warps in flight per SM (fewer registers per
 * warp, K split across warps for gate_up) and fewer instructions per segment.
 */
#include "launch.cuh"
#include "w4a16_bulk.cuh"
#include "w4a16_device.cuh"
#include "w4a16_grouped.cuh"

namespace {

constexpr int kGuWarps = 4; /* 128-thread blocks: 4 blocks per SM at <= 128 registers (CPL <= 2) */
constexpr int kGuRows = 4;  /* rows per warp */
constexpr int kDnWarps = 8;

struct GateUpParams {
    hz_blob_ptrs ptrs;
    const uint8_t *const *blobs_dev;
    const __half *x;
    __half *inter; /* [n x ikp] */
    uint64_t gate_q, gate_s, up_q, up_s;
    uint32_t hidden, hkp, inter_n, ikp, n, warps_per_expert;
    uint32_t f16_magic, f32_magic; /* HZ_F16_MAGIC, HZ_F32_MAGIC: see hz_and_or */
};

struct DownParams {
    hz_blob_ptrs ptrs;
    const uint8_t *const *blobs_dev;
    const __half *inter;
    const float *weights;
    __half *y;
    float *acc;
    uint64_t down_q, down_s;
    uint32_t hidden, ikp, n, segs, rows_per_block, ksplit;
    uint32_t f16_magic, f32_magic; /* HZ_F16_MAGIC, HZ_F32_MAGIC: see hz_and_or */
};

/* CPL: chunks per lane (ceil(kp / 1024)); BATCH: rows whose loads are in flight together. The
 * register cap (launch bounds) keeps the model shapes (CPL <= 2) at full occupancy without spills;
 * wider shapes trade occupancy for registers instead of spilling. */
template <int CPL, int BATCH>
__global__ void __launch_bounds__(kGuWarps * 32, CPL <= 2 ? 4 : 2) hz_gate_up_kernel(const __grid_constant__ GateUpParams p) {
    /* The down pass may be scheduled as soon as every block of this grid is running. */
    hz_griddep_launch_dependents();
    const uint32_t lane = threadIdx.x & 31u;
    const uint32_t gw = blockIdx.x * kGuWarps + (threadIdx.x >> 5);
    const uint32_t e = gw / p.warps_per_expert;
    if (e >= p.n) return;
    const uint32_t row0 = (gw % p.warps_per_expert) * kGuRows;
    const uint8_t *blob = hz_blob(p.ptrs, p.blobs_dev, (int)e);
    const uint32_t nchunks = p.hkp / HZ_QCHUNK, row_bytes = p.hkp / 2u, nblocks = p.hkp / HZ_QBLOCK;
    const uint8_t *gq = blob + p.gate_q, *uq = blob + p.up_q, *gs = blob + p.gate_s, *us = blob + p.up_s;
    __half *out = p.inter + (uint64_t)e * p.ikp;

    float xa[CPL][32];
#pragma unroll
    for (int k = 0; k < CPL; k++) {
        const uint32_t c = lane + 32u * k;
        if (c < nchunks) hz_load_act_chunk<false>(p.x, p.hidden, c, xa[k]);
    }

#pragma unroll 1
    for (int r0 = 0; r0 < kGuRows; r0 += BATCH) {
        uint4 qg[BATCH][CPL], qu[BATCH][CPL];
        float sg[BATCH][CPL], su[BATCH][CPL];
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            const uint32_t i = row0 + r0 + b;
#pragma unroll
            for (int k = 0; k < CPL; k++) {
                const uint32_t c = lane + 32u * k;
                qg[b][k] = qu[b][k] = make_uint4(0, 0, 0, 0);
                sg[b][k] = su[b][k] = 0.0f;
                if (i < p.inter_n && c < nchunks) {
                    const uint64_t qo = (uint64_t)i * row_bytes + 16u * c;
                    const uint64_t so = ((uint64_t)i * nblocks + c / (HZ_QBLOCK / HZ_QCHUNK)) * 2u;
                    qg[b][k] = hz_ld_stream(gq + qo);
                    qu[b][k] = hz_ld_stream(uq + qo);
                    sg[b][k] = hz_ld_scale(gs + so);
                    su[b][k] = hz_ld_scale(us + so);
                }
            }
        }
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            const uint32_t i = row0 + r0 + b;
            float g = 0.0f, u = 0.0f;
            if (i < p.inter_n) {
#pragma unroll
                for (int k = 0; k < CPL; k++) {
                    if (lane + 32u * k < nchunks) {
                        g = fmaf(sg[b][k], hz_chunk_dot(qg[b][k], xa[k], p.f32_magic), g);
                        u = fmaf(su[b][k], hz_chunk_dot(qu[b][k], xa[k], p.f32_magic), u);
                    }
                }
            }
            g = hz_warp_sum(g);
            u = hz_warp_sum(u);
            if (lane == 0 && i < p.ikp)
                out[i] = i < p.inter_n ? __float2half_rn(hz_silu_mul(g, u)) : __float2half_rn(0.0f);
        }
    }
}

template <int CPL, int BATCH>
__global__ void __launch_bounds__(kDnWarps * 32, CPL <= 2 ? 2 : 1) hz_down_kernel(const __grid_constant__ DownParams p) {
    extern __shared__ float ys[]; /* [n][rows_per_block] */
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const uint32_t rb = p.rows_per_block, j0 = blockIdx.x * rb;
    const uint32_t ntask = p.n * p.segs;
    const uint32_t nchunks = p.ikp / HZ_QCHUNK, row_bytes = p.ikp / 2u, nblocks = p.ikp / HZ_QBLOCK;

    uint4 q[BATCH][CPL];
    float sc[BATCH][CPL];
    uint32_t t = warp;
    /* Issues the code and scale loads of task t: expert t % n, rows j0 + (t / n) * BATCH + b. The
     * blobs are not written by the gate_up pass, so this may run before griddepcontrol.wait. */
    auto issue = [&](uint32_t task) {
        const uint32_t e = task % p.n, seg = task / p.n;
        const uint8_t *blob = hz_blob(p.ptrs, p.blobs_dev, (int)e);
        const uint8_t *dq = blob + p.down_q, *ds = blob + p.down_s;
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            const uint32_t j = j0 + seg * BATCH + b;
#pragma unroll
            for (int k = 0; k < CPL; k++) {
                const uint32_t c = lane + 32u * k;
                q[b][k] = make_uint4(0, 0, 0, 0);
                sc[b][k] = 0.0f;
                if (j < p.hidden && c < nchunks) {
                    q[b][k] = hz_ld_stream(dq + (uint64_t)j * row_bytes + 16u * c);
                    sc[b][k] = hz_ld_scale(ds + ((uint64_t)j * nblocks + c / (HZ_QBLOCK / HZ_QCHUNK)) * 2u);
                }
            }
        }
    };
    if (t < ntask) issue(t);
    /* Everything below reads what the gate_up pass wrote (the intermediate) or what came before it. */
    hz_griddep_wait();

    while (t < ntask) {
        const uint32_t e = t % p.n, seg = t / p.n;
        float act[CPL][32];
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            const uint32_t c = lane + 32u * k;
            if (c < nchunks) hz_load_act_chunk<true>(p.inter + (uint64_t)e * p.ikp, p.ikp, c, act[k]);
        }
        float part[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            part[b] = 0.0f;
#pragma unroll
            for (int k = 0; k < CPL; k++)
                if (lane + 32u * k < nchunks) part[b] = fmaf(sc[b][k], hz_chunk_dot(q[b][k], act[k], p.f32_magic), part[b]);
        }
        const uint32_t tnext = t + kDnWarps;
        if (tnext < ntask) issue(tnext); /* in flight during the reductions below */
#pragma unroll
        for (int b = 0; b < BATCH; b++) {
            const float v = hz_warp_sum(part[b]);
            if (lane == 0) ys[e * rb + seg * BATCH + b] = v;
        }
        t = tnext;
    }
    __syncthreads();

    for (uint32_t jl = threadIdx.x; jl < rb; jl += blockDim.x) {
        const uint32_t j = j0 + jl;
        if (j >= p.hidden) break;
        float s = p.acc ? __ldcg(p.acc + j) : 0.0f;
        for (uint32_t e = 0; e < p.n; e++) s = fmaf(__ldcg(p.weights + e), ys[e * rb + jl], s);
        if (p.acc) p.acc[j] = s;
        if (p.y) p.y[j] = __float2half_rn(s);
    }
}

/* ---- tensor-core path (default) ----------------------------------------------------------------- */

constexpr int kMmaGuWarps = 4;
constexpr int kRing = 8; /* segments (128 values of each row) whose loads are kept in flight */

/* gate_up: a warp owns 8 rows i .. i+7 of one expert; MMA rows 0-7 are gate rows, 8-15 the up rows
 * with the same index, so lane (g, t) finishes with gate_i+g and up_i+g and computes
 * a = fp16(silu(g) * u) itself. Codes and scales for the next kRing segments are always in flight:
 * slot s % kRing is refilled with segment s + kRing as soon as segment s has been taken out. x is
 * staged once per block in shared memory (pair order), so nothing but the code stream is waited on. */
__global__ void __launch_bounds__(kMmaGuWarps * 32) hz_gate_up_mma_kernel(const __grid_constant__ GateUpParams p) {
    extern __shared__ __align__(16) uint32_t xs[]; /* [hkp / 32][kActWords] */
    hz_griddep_launch_dependents();
    const uint32_t nseg = p.hkp / 128u, row_bytes = p.hkp / 2u, nblocks = p.hkp / HZ_QBLOCK;
    const uint32_t lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3u;
    const uint32_t gw = blockIdx.x * kMmaGuWarps + (threadIdx.x >> 5);
    const uint32_t tiles = (p.ikp + 7u) / 8u;
    const uint32_t e = gw / tiles;
    const bool warp_ok = e < p.n;
    const uint32_t i = (gw % tiles) * 8u + g;
    const bool row_ok = warp_ok && i < p.inter_n;
    const uint8_t *blob = warp_ok ? hz_blob(p.ptrs, p.blobs_dev, (int)e) : nullptr;
    const uint64_t r = row_ok ? i : 0;
    const uint8_t *gq = row_ok ? blob + p.gate_q + r * row_bytes + 16u * t : nullptr;
    const uint8_t *uq = row_ok ? blob + p.up_q + r * row_bytes + 16u * t : nullptr;
    const uint8_t *gs = row_ok ? blob + p.gate_s + r * nblocks * 2u : nullptr;
    const uint8_t *us = row_ok ? blob + p.up_s + r * nblocks * 2u : nullptr;

    /* The code stream starts first; staging x (from L2) overlaps its latency. */
    uint4 rg[kRing], ru[kRing];
    float sg[kRing], su[kRing];
#pragma unroll
    for (int k = 0; k < kRing; k++) {
        rg[k] = ru[k] = make_uint4(0, 0, 0, 0);
        sg[k] = su[k] = 0.0f;
        if (row_ok && (uint32_t)k < nseg) {
            rg[k] = hz_ld_stream(gq + 64u * k);
            ru[k] = hz_ld_stream(uq + 64u * k);
            sg[k] = hz_ld_scale(gs + 2u * (k >> 1));
            su[k] = hz_ld_scale(us + 2u * (k >> 1));
        }
    }
    hz_fill_act_records<false>(xs, p.x, 1, 0, p.hidden, p.hkp / HZ_QCHUNK);
    __syncthreads();
    if (!warp_ok) return;
    float acc_g = 0.0f, acc_u = 0.0f, d[4][4] = {};
#pragma unroll 1
    for (uint32_t s0 = 0; s0 < nseg; s0 += kRing) {
#pragma unroll
        for (int k = 0; k < kRing; k++) {
            const uint32_t s = s0 + k;
            if (s >= nseg) break;
            const uint4 qg = rg[k], qu = ru[k];
            const float cg = sg[k], cu = su[k];
            const uint32_t sn = s + kRing;
            if (row_ok && sn < nseg) {
                rg[k] = hz_ld_stream(gq + 64u * sn);
                ru[k] = hz_ld_stream(uq + 64u * sn);
                sg[k] = hz_ld_scale(gs + 2u * (sn >> 1));
                su[k] = hz_ld_scale(us + 2u * (sn >> 1));
            }
            uint32_t xh[16];
            hz_lds_pairs(xs + (4u * s + t) * kActWords, xh);
            hz_mma_segment(d, qg, qu, xh, p.f16_magic);
            if (s & 1u) hz_mma_fold(d, cg, cu, acc_g, acc_u); /* end of a 256-value block */
        }
    }
    if (t == 0 && i < p.ikp)
        p.inter[(uint64_t)e * p.ikp + i] = row_ok ? __float2half_rn(hz_silu_mul(acc_g, acc_u)) : __float2half_rn(0.0f);
}

/* down: a task is (expert, 16 output rows, K split); the block's warps cover all experts of its rows
 * (and all K splits), park y_e[j] in shared memory, and one thread per row adds the experts in order.
 * Launched with programmatic dependent launch, a warp fills its code ring before griddepcontrol.wait;
 * after it the block stages the intermediate of all experts in shared memory (kSmemAct; otherwise
 * each lane reads its activation chunk from L2). */
template <bool kSmemAct>
__global__ void __launch_bounds__(kDnWarps * 32) hz_down_mma_kernel(const __grid_constant__ DownParams p) {
    extern __shared__ __align__(16) uint32_t dsm[]; /* [n][ikp / 32][kActWords] if kSmemAct, then ys */
    const uint32_t lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3u, warp = threadIdx.x >> 5;
    const uint32_t rb = p.rows_per_block, j0 = blockIdx.x * rb;
    const uint32_t ntask = p.n * p.segs * p.ksplit;
    const uint32_t nseg = p.ikp / 128u, row_bytes = p.ikp / 2u, nblocks = p.ikp / HZ_QBLOCK, chunks = p.ikp / HZ_QCHUNK;
    const uint32_t seg_per_split = nseg / p.ksplit;
    float *ys = reinterpret_cast<float *>(dsm + (kSmemAct ? (uint64_t)p.n * chunks * kActWords : 0)); /* [ksplit][n][rb] */
    bool staged = false;

    for (uint32_t task = warp; task < ntask || !staged; task += kDnWarps) {
        const bool have = task < ntask;
        const uint32_t e = have ? task % p.n : 0, rest = task / p.n, tile = rest % p.segs, ks = rest / p.segs;
        const uint32_t ja = j0 + tile * 16u + g, jb = ja + 8u;
        const bool oka = have && ja < p.hidden, okb = have && jb < p.hidden;
        const uint8_t *blob = have ? hz_blob(p.ptrs, p.blobs_dev, (int)e) : nullptr;
        const uint8_t *qa = oka ? blob + p.down_q + (uint64_t)ja * row_bytes + 16u * t : nullptr;
        const uint8_t *qb = okb ? blob + p.down_q + (uint64_t)jb * row_bytes + 16u * t : nullptr;
        const uint8_t *sa = oka ? blob + p.down_s + (uint64_t)ja * nblocks * 2u : nullptr;
        const uint8_t *sb = okb ? blob + p.down_s + (uint64_t)jb * nblocks * 2u : nullptr;
        const uint32_t sbeg = ks * seg_per_split, send = have ? sbeg + seg_per_split : 0;

        uint4 ra[kRing], rbq[kRing];
        float ca[kRing], cb[kRing];
#pragma unroll
        for (int k = 0; k < kRing; k++) {
            const uint32_t s = sbeg + k;
            ra[k] = rbq[k] = make_uint4(0, 0, 0, 0);
            ca[k] = cb[k] = 0.0f;
            if (s < send) {
                if (oka) {
                    ra[k] = hz_ld_stream(qa + 64u * s);
                    ca[k] = hz_ld_scale(sa + 2u * (s >> 1));
                }
                if (okb) {
                    rbq[k] = hz_ld_stream(qb + 64u * s);
                    cb[k] = hz_ld_scale(sb + 2u * (s >> 1));
                }
            }
        }
        if (!staged) {
            /* Everything below reads what the gate_up pass wrote. Every warp comes here exactly once
             * (the loop runs at least once per warp), so the barrier is uniform. */
            hz_griddep_wait();
            if (kSmemAct) hz_fill_act_records<true>(dsm, p.inter, p.n, p.ikp, p.ikp, chunks);
            __syncthreads();
            staged = true;
        }
        if (!have) break;
        const __half *av = p.inter + (uint64_t)e * p.ikp;
        const uint32_t *arec = dsm + (uint64_t)e * chunks * kActWords;
        float acc_a = 0.0f, acc_b = 0.0f, d[4][4] = {};
#pragma unroll 1
        for (uint32_t s0 = sbeg; s0 < send; s0 += kRing) {
#pragma unroll
            for (int k = 0; k < kRing; k++) {
                const uint32_t s = s0 + k;
                if (s >= send) break;
                const uint4 q0 = ra[k], q1 = rbq[k];
                const float c0 = ca[k], c1 = cb[k];
                const uint32_t sn = s + kRing;
                if (sn < send) {
                    if (oka) {
                        ra[k] = hz_ld_stream(qa + 64u * sn);
                        ca[k] = hz_ld_scale(sa + 2u * (sn >> 1));
                    }
                    if (okb) {
                        rbq[k] = hz_ld_stream(qb + 64u * sn);
                        cb[k] = hz_ld_scale(sb + 2u * (sn >> 1));
                    }
                }
                uint32_t xh[16];
                if (kSmemAct)
                    hz_lds_pairs(arec + (4u * s + t) * kActWords, xh);
                else
                    hz_load_act_pairs<true>(av, p.ikp, 4u * s + t, xh);
                hz_mma_segment(d, q0, q1, xh, p.f16_magic);
                if (s & 1u) hz_mma_fold(d, c0, c1, acc_a, acc_b);
            }
        }
        if (t == 0) {
            float *dst = ys + ((uint64_t)ks * p.n + e) * rb + tile * 16u + g;
            dst[0] = acc_a;
            dst[8] = acc_b;
        }
    }
    __syncthreads();

    for (uint32_t jl = threadIdx.x; jl < rb; jl += blockDim.x) {
        const uint32_t j = j0 + jl;
        if (j >= p.hidden) break;
        float s = p.acc ? __ldcg(p.acc + j) : 0.0f;
        for (uint32_t e = 0; e < p.n; e++) {
            float ye = 0.0f;
            for (uint32_t ks = 0; ks < p.ksplit; ks++) ye += ys[((uint64_t)ks * p.n + e) * rb + jl];
            s = fmaf(__ldcg(p.weights + e), ye, s);
        }
        if (p.acc) p.acc[j] = s;
        if (p.y) p.y[j] = __float2half_rn(s);
    }
}


template <int CPL, int BATCH>
cudaError_t launch_gate_up(const GateUpParams &p, unsigned blocks, cudaStream_t s) {
    hz_gate_up_kernel<CPL, BATCH><<<blocks, kGuWarps * 32, 0, s>>>(p);
    return cudaGetLastError();
}

cudaError_t launch_down_kernel(void (*kernel)(DownParams), const DownParams &p, unsigned blocks, size_t smem, bool pdl,
                               cudaStream_t s) {
    return hz_launch_ex(kernel, dim3(blocks), dim3(kDnWarps * 32), smem, s, pdl, 0u, p);
}

constexpr int kMaxCpl = 4; /* CUDA-core path: kp up to 4096 (activations live in registers) */

} // namespace

extern "C" int hz_w4a16_grouped_gate_up_launch(const hz_w4a16_args *a, void *stream) {
    static const char who[] = "w4a16 grouped gate_up";
    int st = hz_w4a16_args_check(a, hz_w4a16_grouped_scratch_bytes(a ? a->layout : NULL, a ? a->n : 0), who);
    if (st != HZ_OK) return st;
    const hz_expert_layout *l = a->layout;
    const int cpl = (int)((l->gate.kp + 1023u) / 1024u);
    if ((a->flags & HZ_W4A16_CUDA_CORES) && cpl > kMaxCpl)
        return hz_error(HZ_EUNSUPPORTED, "%s: hidden %u (padded %u) exceeds the %d supported", who, l->hidden,
                        l->gate.kp, kMaxCpl * 1024);
    if (!(a->flags & (HZ_W4A16_CUDA_CORES | HZ_W4A16_NO_BULK))) {
        st = hz_w4a16_bulk_gate_up_launch(a, stream);
        if (st != kHzBulkNotApplicable) return st;
    }
    GateUpParams p;
    hz_fill_gate_up_params(a, p);
    p.f32_magic = HZ_F32_MAGIC;
    p.warps_per_expert = (l->down.kp + kGuRows - 1) / kGuRows;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t e;
    if (!(a->flags & HZ_W4A16_CUDA_CORES)) {
        const uint64_t warps = (uint64_t)p.n * ((p.ikp + 7u) / 8u);
        const size_t smem = (size_t)(p.hkp / HZ_QCHUNK) * kActWords * 4u;
        if (smem > 48u * 1024u)
            return hz_error(HZ_EUNSUPPORTED, "%s: hidden %u needs %zu bytes of shared memory for x", who, l->hidden,
                            smem);
        hz_gate_up_mma_kernel<<<(unsigned)((warps + kMmaGuWarps - 1) / kMmaGuWarps), kMmaGuWarps * 32, smem, s>>>(p);
        e = cudaGetLastError();
    } else {
        const uint64_t warps = (uint64_t)p.n * p.warps_per_expert;
        const unsigned blocks = (unsigned)((warps + kGuWarps - 1) / kGuWarps);
        switch (cpl) {
        case 1: e = launch_gate_up<1, 2>(p, blocks, s); break;
        case 2: e = launch_gate_up<2, 2>(p, blocks, s); break;
        case 3: e = launch_gate_up<3, 1>(p, blocks, s); break;
        default: e = launch_gate_up<4, 1>(p, blocks, s); break;
        }
    }
    if (e != cudaSuccess) return hz_cuda_fail(e, who, "kernel launch");
    return HZ_OK;
}

extern "C" int hz_w4a16_grouped_down_launch(const hz_w4a16_args *a, void *stream) {
    static const char who[] = "w4a16 grouped down";
    int st = hz_w4a16_args_check(a, hz_w4a16_grouped_scratch_bytes(a ? a->layout : NULL, a ? a->n : 0), who);
    if (st != HZ_OK) return st;
    const hz_expert_layout *l = a->layout;
    const int cpl = (int)((l->down.kp + 1023u) / 1024u);
    if ((a->flags & HZ_W4A16_CUDA_CORES) && cpl > kMaxCpl)
        return hz_error(HZ_EUNSUPPORTED, "%s: inter %u (padded %u) exceeds the %d supported", who, l->inter,
                        l->down.kp, kMaxCpl * 1024);
    if (!(a->flags & (HZ_W4A16_CUDA_CORES | HZ_W4A16_NO_BULK))) {
        st = hz_w4a16_bulk_down_launch(a, stream);
        if (st != kHzBulkNotApplicable) return st;
    }
    if (a->h_out) return hz_error(HZ_EUNSUPPORTED, "%s: the residual add (h_out) needs the two-pass bulk kernel", who);
    const int batch = cpl == 1 ? 8 : cpl == 2 ? 4 : 2;
    DownParams p;
    hz_fill_down_params(a, p);
    p.f32_magic = HZ_F32_MAGIC;
    const bool pdl = (a->flags & HZ_W4A16_PDL) != 0;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t e;
    if (!(a->flags & HZ_W4A16_CUDA_CORES)) {
        /* Tasks of 16 rows x one expert x one K split; with fewer experts than warps, a block takes
         * several row tiles (segs) and splits K (ksplit, whole 256-blocks per split) so that every warp
         * of every block has a task and the grid still spans the GPU. */
        const uint32_t nkb = l->down.kp / HZ_QBLOCK;
        p.segs = 1;
        p.ksplit = 1;
        if (a->n < (uint32_t)kDnWarps) {
            const uint32_t m = (uint32_t)kDnWarps / a->n;
            p.ksplit = (m >= 4 && nkb % 4 == 0) ? 4 : (m >= 2 && nkb % 2 == 0) ? 2 : 1;
            p.segs = m / p.ksplit;
        }
        p.rows_per_block = 16u * p.segs;
        const unsigned blocks = (l->hidden + p.rows_per_block - 1) / p.rows_per_block;
        const size_t ys_bytes = (size_t)p.ksplit * p.n * p.rows_per_block * sizeof(float);
        const size_t act_bytes = (size_t)p.n * (p.ikp / HZ_QCHUNK) * kActWords * 4u;
        if (act_bytes + ys_bytes <= 48u * 1024u)
            e = launch_down_kernel(hz_down_mma_kernel<true>, p, blocks, act_bytes + ys_bytes, pdl, s);
        else
            e = launch_down_kernel(hz_down_mma_kernel<false>, p, blocks, ys_bytes, pdl, s);
    } else {
        /* Enough (expert, segment) tasks for every warp of the block when there are few experts. */
        p.segs = a->n >= (uint32_t)kDnWarps ? 1u : (uint32_t)kDnWarps / a->n;
        p.ksplit = 1;
        p.rows_per_block = p.segs * (uint32_t)batch;
        const unsigned blocks = (l->hidden + p.rows_per_block - 1) / p.rows_per_block;
        const size_t smem = (size_t)p.n * p.rows_per_block * sizeof(float);
        switch (cpl) {
        case 1: e = launch_down_kernel(hz_down_kernel<1, 8>, p, blocks, smem, pdl, s); break;
        case 2: e = launch_down_kernel(hz_down_kernel<2, 4>, p, blocks, smem, pdl, s); break;
        case 3: e = launch_down_kernel(hz_down_kernel<3, 2>, p, blocks, smem, pdl, s); break;
        default: e = launch_down_kernel(hz_down_kernel<4, 2>, p, blocks, smem, pdl, s); break;
        }
    }
    if (e != cudaSuccess) return hz_cuda_fail(e, who, "cudaLaunchKernelEx");
    return HZ_OK;
}

extern "C" int hz_w4a16_grouped_hands_h(const hz_expert_layout *layout, uint32_t n, uint32_t flags) {
    if (!layout || !(flags & HZ_W4A16_TWO_PASS) || (flags & (HZ_W4A16_CUDA_CORES | HZ_W4A16_NO_BULK))) return 0;
    return hz_w4a16_bulk_down_applies(layout, n);
}

extern "C" int hz_w4a16_grouped_launch(const hz_w4a16_args *a, void *stream) {
    if (a && a->h_out) { /* refused before either pass is queued */
        int st = hz_w4a16_args_check(a, hz_w4a16_grouped_scratch_bytes(a->layout, a->n), "w4a16 grouped");
        if (st != HZ_OK) return st;
        st = hz_w4a16_grouped_hands_h(a->layout, a->n, a->flags);
        if (st < 0) return st;
        if (st == 0)
            return hz_error(HZ_EUNSUPPORTED, "w4a16 grouped: the residual add (h_out) needs the two-pass bulk "
                                             "down kernel, which does not take %u experts of this layout here",
                            a->n);
    }
    if (a && !(a->flags & (HZ_W4A16_CUDA_CORES | HZ_W4A16_NO_BULK | HZ_W4A16_TWO_PASS))) {
        int st = hz_w4a16_args_check(a, hz_w4a16_grouped_scratch_bytes(a->layout, a->n), "w4a16 grouped");
        if (st != HZ_OK) return st;
        st = hz_w4a16_bulk_fused_launch(a, stream);
        if (st != kHzBulkNotApplicable) return st;
    }
    int st = hz_w4a16_grouped_gate_up_launch(a, stream);
    if (st != HZ_OK) return st;
    return hz_w4a16_grouped_down_launch(a, stream);
}
