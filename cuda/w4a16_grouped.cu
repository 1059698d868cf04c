/* The grouped W4A16 executor (see w4a16_grouped.cuh).
 *
 * Both passes stream the codes once with 16-byte loads, each lane owning whole 32-value chunks of a
 * row (lane l reads chunks l, l + 32, ...; a warp instruction covers 512 contiguous bytes). The
 * activations a lane multiplies with are the same for every row it visits, so they are loaded once
 * per warp into registers (FP32, in the chunk's nibble order, see w4a16_device.cuh) instead of being
 * re-read for every row. Per row, each lane adds scale(block) * dot(chunk) and the warp reduces with
 * shuffles.
 *
 * Memory parallelism: at batch 1 the whole layer is ~25 MB of codes that must stream at HBM speed
 * in a few microseconds, so each warp keeps 8 independent 16-byte loads in flight (all loads of a
 * batch are issued before the first is used) and the grids are sized to fill the 132 SMs in one wave.
 *
 * gate_up: a warp owns kGuRows consecutive rows of one expert, for gate and for up together (they
 *   share x), and writes a = fp16(silu(g) * u) for them. Rows from inter to kp get zeros.
 * down: a block owns a range of output rows j and computes y_e[j] for all experts of the call (warps
 *   take (expert, row segment) tasks), parks them in shared memory, and one thread per row adds
 *   them in expert order: deterministic and atomic-free. Launched with programmatic dependent launch
 *   (HZ_W4A16_PDL), a block issues its first code loads before griddepcontrol.wait, so the weight
 *   stream starts while the gate_up grid drains.
 */
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
};

struct DownParams {
    hz_blob_ptrs ptrs;
    const uint8_t *const *blobs_dev;
    const __half *inter;
    const float *weights;
    __half *y;
    float *acc;
    uint64_t down_q, down_s;
    uint32_t hidden, ikp, n, segs, rows_per_block;
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
                        g = fmaf(sg[b][k], hz_chunk_dot(qg[b][k], xa[k]), g);
                        u = fmaf(su[b][k], hz_chunk_dot(qu[b][k], xa[k]), u);
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
                if (lane + 32u * k < nchunks) part[b] = fmaf(sc[b][k], hz_chunk_dot(q[b][k], act[k]), part[b]);
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

void fill_ptrs(const hz_w4a16_args *a, hz_blob_ptrs *ptrs, const uint8_t *const **dev) {
    for (uint32_t e = 0; e < HZ_W4A16_MAX_EXPERTS; e++)
        ptrs->p[e] = (a->blobs && e < a->n) ? static_cast<const uint8_t *>(a->blobs[e]) : nullptr;
    *dev = a->blobs ? nullptr : reinterpret_cast<const uint8_t *const *>(a->blobs_dev);
}

template <int CPL, int BATCH>
cudaError_t launch_gate_up(const GateUpParams &p, unsigned blocks, cudaStream_t s) {
    hz_gate_up_kernel<CPL, BATCH><<<blocks, kGuWarps * 32, 0, s>>>(p);
    return cudaGetLastError();
}

template <int CPL, int BATCH>
cudaError_t launch_down(const DownParams &p, unsigned blocks, size_t smem, bool pdl, cudaStream_t s) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(kDnWarps * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, hz_down_kernel<CPL, BATCH>, p);
}

constexpr int kMaxCpl = 4; /* kp up to 4096 */

} // namespace

extern "C" int hz_w4a16_grouped_gate_up_launch(const hz_w4a16_args *a, void *stream) {
    static const char who[] = "w4a16 grouped gate_up";
    int st = hz_w4a16_args_check(a, hz_w4a16_grouped_scratch_bytes(a ? a->layout : NULL, a ? a->n : 0), who);
    if (st != HZ_OK) return st;
    const hz_expert_layout *l = a->layout;
    const int cpl = (int)((l->gate.kp + 1023u) / 1024u);
    if (cpl > kMaxCpl)
        return hz_error(HZ_EUNSUPPORTED, "%s: hidden %u (padded %u) exceeds the %d supported", who, l->hidden,
                        l->gate.kp, kMaxCpl * 1024);
    GateUpParams p;
    fill_ptrs(a, &p.ptrs, &p.blobs_dev);
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
    p.warps_per_expert = (l->down.kp + kGuRows - 1) / kGuRows;
    const uint64_t warps = (uint64_t)p.n * p.warps_per_expert;
    const unsigned blocks = (unsigned)((warps + kGuWarps - 1) / kGuWarps);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t e;
    switch (cpl) {
    case 1: e = launch_gate_up<1, 2>(p, blocks, s); break;
    case 2: e = launch_gate_up<2, 2>(p, blocks, s); break;
    case 3: e = launch_gate_up<3, 1>(p, blocks, s); break;
    default: e = launch_gate_up<4, 1>(p, blocks, s); break;
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
    if (cpl > kMaxCpl)
        return hz_error(HZ_EUNSUPPORTED, "%s: inter %u (padded %u) exceeds the %d supported", who, l->inter,
                        l->down.kp, kMaxCpl * 1024);
    const int batch = cpl == 1 ? 8 : cpl == 2 ? 4 : 2;
    DownParams p;
    fill_ptrs(a, &p.ptrs, &p.blobs_dev);
    p.inter = static_cast<const __half *>(a->scratch);
    p.weights = a->weights;
    p.y = static_cast<__half *>(a->y);
    p.acc = a->acc;
    p.down_q = l->down_q;
    p.down_s = l->down_s;
    p.hidden = l->hidden;
    p.ikp = l->down.kp;
    p.n = a->n;
    /* Enough (expert, segment) tasks for every warp of the block when there are few experts. */
    p.segs = a->n >= (uint32_t)kDnWarps ? 1u : (uint32_t)kDnWarps / a->n;
    p.rows_per_block = p.segs * (uint32_t)batch;
    const unsigned blocks = (l->hidden + p.rows_per_block - 1) / p.rows_per_block;
    const size_t smem = (size_t)p.n * p.rows_per_block * sizeof(float);
    const bool pdl = (a->flags & HZ_W4A16_PDL) != 0;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t e;
    switch (cpl) {
    case 1: e = launch_down<1, 8>(p, blocks, smem, pdl, s); break;
    case 2: e = launch_down<2, 4>(p, blocks, smem, pdl, s); break;
    case 3: e = launch_down<3, 2>(p, blocks, smem, pdl, s); break;
    default: e = launch_down<4, 2>(p, blocks, smem, pdl, s); break;
    }
    if (e != cudaSuccess) return hz_cuda_fail(e, who, "cudaLaunchKernelEx");
    return HZ_OK;
}

extern "C" int hz_w4a16_grouped_launch(const hz_w4a16_args *a, void *stream) {
    int st = hz_w4a16_grouped_gate_up_launch(a, stream);
    if (st != HZ_OK) return st;
    return hz_w4a16_grouped_down_launch(a, stream);
}
