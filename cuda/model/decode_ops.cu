/* The decode step's GEMV with fused prologue and tails, the step-begin kernel and the CUDA graph of a
 * step (see decode_ops.cuh for each contract; the attention kernel is in decode_attn.cu). */
#include <cstdlib>
#include <cstring>

#include "decode_gate.cuh"
#include "decode_gemv.cuh"
#include "decode_launch.cuh"
#include "decode_ops.cuh"
#include "knob.cuh"
#include "ops_common.cuh"
#include "timeline.cuh"

namespace {

/* 16-byte chunks per lane in flight beside the routed-expert kernel (hz_dgemv_args.beside): 44
 * registers, and a 5632-wide row (Qwen's shared down) in two whole batches */
constexpr int kDeepBatch = 11;

/* ---- step start ----------------------------------------------------------------------------------- */

/* token_src: the token is the previous step's argmax, read on the device (a step queued before the
 * host knows that token); NULL: `token`. */
__global__ void begin_kernel(int32_t token, uint32_t pos, hz_dstep *d, const int32_t *token_src) {
    d->token = token_src ? *token_src : token;
    d->pos = pos;
    d->epoch += 1u;
}

/* ---- GEMV ------------------------------------------------------------------------------------------- */

struct dgemv_params {
    hz_dgemv_args a;
    uint32_t start[HZ_MGEMV_MAX_SEGS + 1]; /* first global row of each segment; start[nseg] = total */
    uint32_t *counter;                     /* tail: blocks finished */
    float *bval;                           /* argmax tail: each block's best value and row */
    uint32_t *bidx;
};

__device__ __forceinline__ uint32_t seg_of(const dgemv_params &p, uint32_t row) {
    uint32_t s = 0;
    while (row >= p.start[s + 1]) s++;
    return s;
}

__device__ __forceinline__ const uint4 *row_ptr(const dgemv_params &p, uint32_t row) {
    const uint32_t s = seg_of(p, row);
    return reinterpret_cast<const uint4 *>(p.a.seg[s].w + (size_t)(row - p.start[s]) * p.a.in);
}

/* x = fp16(silu(g) * u), hz_model_silu_mul's formula. */
template <bool VEC>
__device__ void build_silu(const hz_dgemv_args &a, uint16_t *xs) {
    if (VEC) {
        for (uint32_t c = threadIdx.x; c < a.in / 8u; c += blockDim.x) {
            const float4 g0 = reinterpret_cast<const float4 *>(a.g)[2 * c], g1 = reinterpret_cast<const float4 *>(a.g)[2 * c + 1];
            const float4 u0 = reinterpret_cast<const float4 *>(a.u)[2 * c], u1 = reinterpret_cast<const float4 *>(a.u)[2 * c + 1];
            const float gv[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
            const float uv[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
            uint4 out;
            uint16_t *o16 = reinterpret_cast<uint16_t *>(&out);
#pragma unroll
            for (int k = 0; k < 8; k++) o16[k] = f2h(gv[k] / (1.0f + expf(-gv[k])) * uv[k]);
            reinterpret_cast<uint4 *>(xs)[c] = out;
        }
    } else {
        for (uint32_t i = threadIdx.x; i < a.in; i += blockDim.x) {
            const float gi = a.g[i];
            xs[i] = f2h(gi / (1.0f + expf(-gi)) * a.u[i]);
        }
    }
}

/* The argmax tail in the last block: every block's best, scanned in parallel, ties to the lower row. */
__device__ void argmax_final(const dgemv_params &p, uint32_t nblocks, float *wv, uint32_t *wi) {
    const uint32_t bi = argmax_of_blocks(p.bval, p.bidx, nblocks, wv, wi);
    if (threadIdx.x == 0) {
        *p.a.argmax_out = (int32_t)bi;
        if (p.a.argmax_host) *p.a.argmax_host = (int32_t)bi; /* visible to the host once the grid completes */
    }
}

/* The running best of segment 0 (argmax tail), kept by lane 0. */
struct RowOut {
    float best;
    uint32_t best_i;
};

/* A finished row: the warp's sum, plus bias, written by lane 0 (FP16 or FP32); the argmax candidate;
 * and the hand-over of a router row: with hz_dgemv_args.tags its tagged word, and true for the last
 * router row's warp, which then polls every word (route_rows); else the router ticket: true (in every
 * lane) for the warp that wrote the last router row, which then routes (fence before the ticket,
 * fence after, so it sees every router row). */
template <bool ROUTE>
__device__ __forceinline__ bool emit_row(const dgemv_params &p, uint32_t row, float acc, uint32_t lane, RowOut &ro,
                                         uint32_t tag) {
    const hz_dgemv_args &a = p.a;
    const uint32_t s = seg_of(p, row), r = row - p.start[s];
    acc = warp_sum(acc);
    uint32_t routes = 0;
    if (lane == 0) {
        const hz_mgemv_seg &sg = a.seg[s];
        const float v = acc + (sg.bias ? h2f(sg.bias[r]) : 0.0f);
        if (sg.out_f32)
            static_cast<float *>(sg.y)[r] = v;
        else
            static_cast<uint16_t *>(sg.y)[r] = f2h(v);
        if (s == 0 && argmax_better(v, r, ro.best, ro.best_i)) { /* rows ascend per warp: ties keep the first */
            ro.best = v;
            ro.best_i = r;
        }
        if (ROUTE && s == 0 && a.tags) {
            st_relaxed_gpu(a.tags + r, tag | f2h(v)); /* the bits stored in y */
        } else if (ROUTE && s == 0) {
            __threadfence();
            routes = atomicAdd(p.counter, 1u) == sg.rows - 1u;
        }
    }
    /* the last router row's warp polls the tags: not in block 0, which fences its stores of h, x and
     * the zeroed accumulators before its rows (a ~2 us later start under the layer's stream) */
    if (ROUTE && a.tags) return s == 0 && r + 1u == p.start[1];
    return ROUTE && __shfl_sync(0xffffffffu, routes, 0);
}

/* The router tail's shared memory after x: E floats, then (8-byte aligned) the layer's E row
 * addresses, copied there by the blocks with router rows before their wait (the table is not written
 * during a step); hz_decode_gemv sizes it. */
__device__ __forceinline__ float *route_probs(const hz_dgemv_args &a, uint16_t *xs) {
    return reinterpret_cast<float *>(xs + ((a.in + 7u) & ~7u));
}
__device__ __forceinline__ const void **route_table_smem(const hz_dgemv_args &a, uint16_t *xs) {
    const uintptr_t end = reinterpret_cast<uintptr_t>(route_probs(a, xs) + a.seg[0].rows);
    return reinterpret_cast<const void **>((end + 7u) & ~static_cast<uintptr_t>(7u));
}

/* The router tail, by the warp emit_row chose: softmax + top-k over every router row. */
__device__ __forceinline__ void route_rows(const dgemv_params &p, uint32_t lane, uint16_t *xs, uint32_t tag) {
    const hz_dgemv_args &a = p.a;
    const void *const *table = a.table ? route_table_smem(a, xs) : nullptr;
    const uint32_t E = a.seg[0].rows;
    float *pr = route_probs(a, xs);
    if (a.tags) { /* every router row's word carries this launch's tag: poll them, no ticket, no fence */
        for (uint32_t b = 0; b < E; b += 2u * kWarp) { /* two words per lane in flight per round */
            const uint32_t e0 = b + lane, e1 = e0 + kWarp;
            uint32_t t0 = tag, t1 = tag;
            do {
                if (e0 < E) t0 = ld_relaxed_gpu(a.tags + e0);
                if (e1 < E) t1 = ld_relaxed_gpu(a.tags + e1);
            } while (!__all_sync(0xffffffffu, (t0 >> 16) == (tag >> 16) && (t1 >> 16) == (tag >> 16)));
            if (e0 < E) pr[e0] = h2f((uint16_t)t0);
            if (e1 < E) pr[e1] = h2f((uint16_t)t1);
        }
        __syncwarp();
        route_warp_select(pr, E, a.top_k, a.norm_topk, a.ids_out, a.w_out, table, a.rows_out,
                          route_host(a));
    } else {
        __threadfence(); /* after the ticket: every router row's store is visible before the logits are read */
        route_warp(static_cast<const uint16_t *>(a.seg[0].y), E, a.top_k, a.norm_topk, a.ids_out, a.w_out, table,
                   a.rows_out, pr, route_host(a));
        if (lane == 0) *p.counter = 0; /* ready for the next launch */
    }
    if (a.ready) { /* every lane's stores of the routing, then the flag */
        __threadfence();
        __syncwarp();
        if (lane == 0) st_release_gpu(a.ready + 1, __ldcg(&a.step->epoch));
    }
    if (a.gate_on) { /* the experts' gate (hz_dgemv_args.gate): this warp's stores of the ids first */
        __syncwarp();
        gate_pass(a.gate, lane);
    }
}

/* Rows are spread over the warps of a grid that is resident at once (grid-stride), so the prologue
 * that builds x runs once per block, not once per 8 rows. Each warp holds the first batch of its
 * first row in registers before waiting on the previous grid (weights are never written by a step),
 * and the next row's first batch while it reduces the current one. */
template <bool VEC, bool ROUTE, int BATCH = kBatch, int MINB = 4>
__global__ void __launch_bounds__(kGemvThreads, MINB) dgemv_kernel(const __grid_constant__ dgemv_params p) {
    extern __shared__ __align__(16) uint16_t xs[]; /* [in rounded up to 8] | route: [E] floats */
    __shared__ float red[kWarp + 1];
    __shared__ float wbest[kGemvWarps];
    __shared__ uint32_t wbidx[kGemvWarps];
    __shared__ uint32_t last;
    const hz_dgemv_args &a = p.a;
    HZ_TL_SCOPE(HZ_TL_GEMV, a.seg[0].w, p.start[a.nseg], a.in);
    const uint32_t lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const uint32_t total = p.start[a.nseg], chunks = a.in / 8u;
    uint32_t row = blockIdx.x * kGemvWarps + warp;
    /* router_alone: the warps of the first pass that take a router row take only that row, the others
     * share the remaining rows; else every warp strides over all rows (see hz_dgemv_args.router_alone) */
    const uint32_t grid_warps = gridDim.x * kGemvWarps;
    const uint32_t stride = !(ROUTE && a.router_alone) ? grid_warps
                            : row < p.start[1]         ? total
                                                       : grid_warps - p.start[1];
    uint4 wv[BATCH];
    if (VEC && row < total) load_batch(row_ptr(p, row), 0, lane, chunks, wv);
    /* a block with router rows may route: the table to shared memory meanwhile (route_table_smem) */
    __shared__ uint32_t route_tag; /* hz_dgemv_args.tags: the epoch's low 16 bits, shifted up */
    const bool router_block = ROUTE && blockIdx.x * kGemvWarps < p.start[1];
    if (router_block && a.table) {
        const void **t = route_table_smem(a, xs);
        for (uint32_t i = threadIdx.x; i < a.seg[0].rows; i += blockDim.x) cp_async8(t + i, a.table + i);
        cp_async_commit();
    }
    if (router_block && a.tags && threadIdx.x == 0) route_tag = (__ldcg(&a.step->epoch) & 0xffffu) << 16;

    griddep_wait();
    HZ_TL_WAITED();
    griddep_launch();
    if (a.x_mode == HZ_DGEMV_X_RESNORM)
        build_resnorm<VEC>(a, xs, red, make_uint4(0, 0, 0, 0), false);
    else if (a.x_mode == HZ_DGEMV_X_SILU)
        build_silu<VEC>(a, xs);
    else if (VEC)
        for (uint32_t c = threadIdx.x; c < chunks; c += blockDim.x)
            reinterpret_cast<uint4 *>(xs)[c] = reinterpret_cast<const uint4 *>(a.x)[c];
    else
        for (uint32_t i = threadIdx.x; i < a.in; i += blockDim.x) xs[i] = a.x[i];
    if (blockIdx.x == 0 && a.zero)
        for (uint32_t i = threadIdx.x; i < a.zero_n; i += blockDim.x) a.zero[i] = 0.0f;
    const bool signal = ROUTE && a.ready && blockIdx.x == 0;
    if (signal) __threadfence(); /* this thread's stores of h_out, x_out and zero, before the flag */
    if (router_block && a.table) cp_async_wait<0>(); /* the barrier below publishes the table copy */
    __syncthreads();
    if (signal && threadIdx.x == 0) st_release_gpu(a.ready, __ldcg(&a.step->epoch));
    if (threadIdx.x == 0) HZ_TL_MARK(0);

    RowOut ro = {-INFINITY, kNoIndex};
    const uint4 *xs4 = reinterpret_cast<const uint4 *>(xs);
    if (VEC) {
        while (row < total) {
            const uint4 *w4 = row_ptr(p, row);
            const uint32_t next = row + stride;
            const float acc = sum_row(w4, wv, xs4, lane, chunks);
            if (next < total) load_batch(row_ptr(p, next), 0, lane, chunks, wv); /* in flight during the reduction */
            if (emit_row<ROUTE>(p, row, acc, lane, ro, route_tag)) {
                if (lane == 0) HZ_TL_MARK(1);
                route_rows(p, lane, xs, route_tag);
                if (lane == 0) HZ_TL_MARK(2);
            }
            row = next;
        }
    } else {
        for (; row < total; row += stride) {
            const uint32_t s = seg_of(p, row), r = row - p.start[s];
            const uint16_t *w = a.seg[s].w + (size_t)r * a.in;
            float acc = 0.0f;
            for (uint32_t i = lane; i < a.in; i += kWarp) acc = fmaf(h2f(w[i]), h2f(xs[i]), acc);
            if (emit_row<ROUTE>(p, row, acc, lane, ro, route_tag)) route_rows(p, lane, xs, route_tag);
        }
    }
    if (a.tail != HZ_DGEMV_TAIL_ARGMAX) return; /* the router tail ran in the loop */

    if (lane == 0) {
        wbest[warp] = ro.best;
        wbidx[warp] = ro.best_i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (uint32_t w = 1; w < kGemvWarps; w++)
            if (argmax_better(wbest[w], wbidx[w], ro.best, ro.best_i)) {
                ro.best = wbest[w];
                ro.best_i = wbidx[w];
            }
        p.bval[blockIdx.x] = ro.best;
        p.bidx[blockIdx.x] = ro.best_i;
    }
    /* The last block to finish sees every other block's rows (fence before the ticket, fence after). */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(p.counter, 1u) == gridDim.x - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    argmax_final(p, gridDim.x, wbest, wbidx);
    if (threadIdx.x == 0) *p.counter = 0; /* ready for the next launch */
}

} // namespace

HZ_TL_HOST(gemv)

/* ---- launch functions ------------------------------------------------------------------------------ */

struct hz_decode_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t begin;
    uint32_t kernels;
};

extern "C" int hz_decode_enter(void *stream) {
    int dev = 0;
    cudaError_t e = cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &dev);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamGetDevice");
    e = cudaSetDevice(dev);
    if (e != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
    return HZ_OK;
}

extern "C" int hz_decode_device_info(void *stream, uint32_t max_in, hz_decode_dev *out) {
    if (!out || max_in == 0 || max_in > kGemvMaxIn)
        return hz_error(HZ_EINVAL, "decode: device info for GEMV inputs of %u values (at most %u)", max_in, kGemvMaxIn);
    int st = hz_decode_enter(stream);
    if (st) return st;
    int dev = 0, sms = 0, blocks = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return cuda_fail(e, "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
    const size_t smem = (size_t)((max_in + 7u) & ~7u) * 2u + kRouteMaxExperts * sizeof(float);
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, dgemv_kernel<true, false>, kGemvThreads, smem);
    if (e != cudaSuccess) return cuda_fail(e, "cudaOccupancyMaxActiveBlocksPerMultiprocessor(gemv)");
    out->sms = (uint32_t)(sms > 0 ? sms : 1);
    out->gemv_grid = out->sms * (uint32_t)(blocks > 0 ? blocks : 1);
    return hz_decode_router_cluster_supported(&out->clusters);
}

extern "C" int hz_decode_begin(int32_t token, uint32_t pos, hz_dstep *d_step, void *stream) {
    if (!d_step) return hz_error(HZ_EINVAL, "decode begin: NULL step");
    begin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(token, pos, d_step, nullptr);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the step-begin kernel");
}

extern "C" int hz_decode_host_pointer(void *host, void **out) {
    *out = NULL;
    void *d = NULL;
    cudaError_t e = cudaHostGetDevicePointer(&d, host, 0);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return hz_error(HZ_EUNSUPPORTED, "pinned memory not addressable by kernels: cudaHostGetDevicePointer: %s",
                        cudaGetErrorString(e));
    }
    *out = d;
    return HZ_OK;
}

extern "C" uint64_t hz_decode_tail_bytes(const hz_decode_dev *dev) {
    return 256u + (uint64_t)(dev ? dev->gemv_grid : 1u) * 8u;
}

/* HZ_GEMV_DEEP=0 turns the deep-batch GEMV off (A/B runs); read once. */
static bool deep_enabled(void) {
    static std::atomic<int> cache{-1};
    return knob_once(cache, "HZ_GEMV_DEEP", "0", 0, 1) != 0;
}

extern "C" int hz_decode_gemv(const hz_dgemv_args *a, const hz_decode_dev *dev, const hz_klaunch *k) {
    int st = dgemv_check(a, dev);
    if (st) return st;
    if (!k) return hz_error(HZ_EINVAL, "decode gemv: no launch");
    dgemv_params p;
    memset(&p, 0, sizeof p);
    p.a = *a;
    uint64_t total = 0;
    for (uint32_t s = 0; s < a->nseg; s++) {
        p.start[s] = (uint32_t)total;
        total += a->seg[s].rows;
    }
    if (total > 0x7fffffffu) return hz_error(HZ_EINVAL, "decode gemv: %llu rows", (unsigned long long)total);
    for (uint32_t s = a->nseg; s <= HZ_MGEMV_MAX_SEGS; s++) p.start[s] = (uint32_t)total;
    uint64_t blocks = (total + kGemvWarps - 1) / kGemvWarps;
    if (dev && blocks > dev->gemv_grid) blocks = dev->gemv_grid;
    if (a->beside && dev && blocks > dev->sms) blocks = dev->sms;
    if (a->tail != HZ_DGEMV_TAIL_NONE) {
        uint8_t *t = static_cast<uint8_t *>(a->tail_scratch);
        p.counter = reinterpret_cast<uint32_t *>(t);
        p.bval = reinterpret_cast<float *>(t + 256);
        p.bidx = reinterpret_cast<uint32_t *>(t + 256 + (size_t)dev->gemv_grid * 4u);
    }
    /* the router rows need warps of their own, and a spare one for the rest */
    if (a->tail != HZ_DGEMV_TAIL_ROUTE || (uint64_t)a->seg[0].rows >= blocks * kGemvWarps) p.a.router_alone = 0;
    size_t smem = (size_t)((a->in + 7u) & ~7u) * 2u;
    if (a->tail == HZ_DGEMV_TAIL_ROUTE) {
        smem += (size_t)a->seg[0].rows * sizeof(float);
        if (a->table) smem = ((smem + 7u) & ~(size_t)7u) + (size_t)a->seg[0].rows * sizeof(void *);
    }
    /* The router tail is compiled into its own instantiation: the others keep its registers. A GEMV
     * beside the routed-expert kernel (one block per SM in the 80 registers per thread that kernel's
     * block leaves) keeps more bytes in flight per warp; the chunks each lane adds, and their order,
     * are the same at either batch size. */
    const bool vec = dgemv_vec(a), route = a->tail == HZ_DGEMV_TAIL_ROUTE;
    const bool deep = vec && a->beside && a->tail == HZ_DGEMV_TAIL_NONE && deep_enabled();
    cudaError_t e = vec ? (route  ? launch(dgemv_kernel<true, true>, (unsigned)blocks, 1, kGemvThreads, smem, k, p)
                           : deep ? launch(dgemv_kernel<true, false, kDeepBatch, 3>, (unsigned)blocks, 1, kGemvThreads,
                                           smem, k, p)
                                  : launch(dgemv_kernel<true, false>, (unsigned)blocks, 1, kGemvThreads, smem, k, p))
                        : (route ? launch(dgemv_kernel<false, true>, (unsigned)blocks, 1, kGemvThreads, smem, k, p)
                                 : launch(dgemv_kernel<false, false>, (unsigned)blocks, 1, kGemvThreads, smem, k, p));
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the decode GEMV");
}

/* ---- side stream ------------------------------------------------------------------------------------ */

struct hz_decode_side {
    cudaStream_t stream;
    cudaEvent_t fork, join;
    cudaGraphNode_t fork_node;  /* while capturing a programmatic fork: the kernel node it follows */
    unsigned long long programmatic_edges; /* made by hz_decode_side_begin since creation */
};

extern "C" void hz_decode_side_destroy(hz_decode_side *side) {
    if (!side) return;
    if (side->stream) (void)cudaStreamSynchronize(side->stream); /* nothing it runs may outlive its buffers */
    if (side->fork) (void)cudaEventDestroy(side->fork);
    if (side->join) (void)cudaEventDestroy(side->join);
    if (side->stream) (void)cudaStreamDestroy(side->stream);
    (void)cudaGetLastError();
    free(side);
}

extern "C" int hz_decode_side_create(void *stream, hz_decode_side **out) {
    if (!out) return hz_error(HZ_EINVAL, "decode side stream: NULL out");
    *out = NULL;
    int st = hz_decode_enter(stream);
    if (st) return st;
    hz_decode_side *side = static_cast<hz_decode_side *>(hz_calloc(1, sizeof *side));
    if (!side) return HZ_ENOMEM;
    cudaError_t e = cudaStreamCreateWithFlags(&side->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&side->fork, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&side->join, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        st = cuda_fail(e, "creating the side stream and its events");
        hz_decode_side_destroy(side);
        return st;
    }
    *out = side;
    return HZ_OK;
}

extern "C" unsigned long long hz_decode_side_programmatic_edges(const hz_decode_side *side) {
    return side ? side->programmatic_edges : 0;
}

/* The node a capturing stream's next node will follow, when it is exactly one kernel node. */
static cudaGraphNode_t last_kernel_node(cudaStream_t s) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t *deps = nullptr;
    size_t n = 0;
    if (cudaStreamGetCaptureInfo(s, &cs, nullptr, nullptr, &deps, nullptr, &n) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    cudaGraphNodeType t;
    if (cs != cudaStreamCaptureStatusActive || n != 1 || cudaGraphNodeGetType(deps[0], &t) != cudaSuccess ||
        t != cudaGraphNodeTypeKernel) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return deps[0];
}

extern "C" int hz_decode_fork(hz_decode_side *side, void *stream, int programmatic) {
    if (!side) return hz_error(HZ_EINVAL, "decode fork: no side stream");
    side->fork_node = programmatic ? last_kernel_node(static_cast<cudaStream_t>(stream)) : nullptr;
    cudaError_t e = cudaEventRecord(side->fork, static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "cudaEventRecord (fork to the side stream)");
}

extern "C" int hz_decode_side_begin(hz_decode_side *side, void **side_stream) {
    if (!side || !side_stream) return hz_error(HZ_EINVAL, "decode side stream: NULL argument");
    cudaError_t e = cudaStreamWaitEvent(side->stream, side->fork, 0);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamWaitEvent (side stream on the fork)");
    if (side->fork_node) {
        /* Captured: the side kernel's edge from the fork's kernel becomes programmatic, so it is
         * launched when that kernel's blocks trigger (as a kernel launched with programmatic dependent
         * launch on the same stream would be) and waits for its end on the device (griddep_wait),
         * instead of being launched only after that end. The other edges stay full ones. */
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        const cudaGraphNode_t *deps = nullptr;
        const cudaGraphEdgeData *ed = nullptr;
        size_t n = 0;
        e = cudaStreamGetCaptureInfo(side->stream, &cs, nullptr, nullptr, &deps, &ed, &n);
        if (e != cudaSuccess) return cuda_fail(e, "cudaStreamGetCaptureInfo (side stream)");
        cudaGraphNode_t nodes[8];
        cudaGraphEdgeData data[8];
        if (cs != cudaStreamCaptureStatusActive || n > 8)
            return hz_error(HZ_EDEVICE, "decode side stream: capture state %d with %zu dependencies", (int)cs, n);
        int found = 0;
        for (size_t i = 0; i < n; i++) {
            nodes[i] = deps[i];
            data[i] = ed ? ed[i] : cudaGraphEdgeData{};
            if (deps[i] == side->fork_node) {
                data[i] = cudaGraphEdgeData{};
                data[i].from_port = cudaGraphKernelNodePortProgrammatic;
                data[i].type = cudaGraphDependencyTypeProgrammatic;
                found = 1;
            }
        }
        if (found) {
            e = cudaStreamUpdateCaptureDependencies(side->stream, nodes, data, n, cudaStreamSetCaptureDependencies);
            if (e != cudaSuccess) return cuda_fail(e, "cudaStreamUpdateCaptureDependencies (programmatic side edge)");
            side->programmatic_edges++;
        }
        side->fork_node = nullptr;
    }
    *side_stream = side->stream;
    return HZ_OK;
}

extern "C" int hz_decode_join(hz_decode_side *side, void *stream) {
    if (!side) return hz_error(HZ_EINVAL, "decode join: no side stream");
    cudaError_t e = cudaEventRecord(side->join, side->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), side->join, 0);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "joining the side stream");
}

/* ---- graph ------------------------------------------------------------------------------------------ */

extern "C" int hz_decode_graph_begin_capture(void *compute_stream, void **capture_stream) {
    *capture_stream = NULL;
    int st = hz_decode_enter(compute_stream);
    if (st) return st;
    cudaStream_t cs = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamCreateWithFlags (capture stream)");
    /* Thread-local: another thread's unsafe call (a sync, a cudaMalloc) cannot break this capture. */
    e = cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        st = cuda_fail(e, "cudaStreamBeginCapture");
        (void)cudaStreamDestroy(cs);
        return st;
    }
    *capture_stream = cs;
    return HZ_OK;
}

/* The begin node: the graph's only root, a kernel node running begin_kernel. */
static int find_begin(cudaGraph_t graph, cudaGraphNode_t *out, uint32_t *kernels) {
    size_t n = 0;
    cudaError_t e = cudaGraphGetRootNodes(graph, NULL, &n);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphGetRootNodes");
    if (n != 1) return hz_error(HZ_EDEVICE, "decode graph: %zu root nodes, expected the step-begin kernel only", n);
    e = cudaGraphGetRootNodes(graph, out, &n);
    cudaGraphNodeType type;
    if (e == cudaSuccess) e = cudaGraphNodeGetType(*out, &type);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphNodeGetType");
    cudaKernelNodeParams kp = {};
    if (type != cudaGraphNodeTypeKernel || cudaGraphKernelNodeGetParams(*out, &kp) != cudaSuccess ||
        kp.gridDim.x * kp.gridDim.y * kp.gridDim.z != 1u || kp.blockDim.x * kp.blockDim.y * kp.blockDim.z != 1u) {
        (void)cudaGetLastError();
        return hz_error(HZ_EDEVICE, "decode graph: the root node is not the step-begin kernel");
    }
    size_t total = 0;
    e = cudaGraphGetNodes(graph, NULL, &total);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphGetNodes");
    *kernels = (uint32_t)total;
    return HZ_OK;
}

extern "C" int hz_decode_graph_end_capture(void *capture_stream, int ok, hz_decode_graph **out) {
    *out = NULL;
    cudaStream_t cs = static_cast<cudaStream_t>(capture_stream);
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(cs, &graph);
    int st = HZ_OK;
    if (ok && e != cudaSuccess) st = cuda_fail(e, "cudaStreamEndCapture");
    (void)cudaGetLastError();
    (void)cudaStreamDestroy(cs);
    if (!ok || st) {
        if (graph) (void)cudaGraphDestroy(graph);
        return st;
    }
    hz_decode_graph *g = static_cast<hz_decode_graph *>(hz_calloc(1, sizeof *g));
    if (!g) {
        (void)cudaGraphDestroy(graph);
        return HZ_ENOMEM;
    }
    g->graph = graph;
    st = find_begin(graph, &g->begin, &g->kernels);
    if (!st) {
        e = cudaGraphInstantiate(&g->exec, graph, 0);
        if (e != cudaSuccess) st = cuda_fail(e, "cudaGraphInstantiate");
    }
    if (st) {
        hz_decode_graph_destroy(g);
        return st;
    }
    *out = g;
    return HZ_OK;
}

extern "C" int hz_decode_graph_launch(hz_decode_graph *g, int32_t token, uint32_t pos, hz_dstep *d_step,
                                      const int32_t *token_src, void *stream) {
    if (!g || !d_step) return hz_error(HZ_EINVAL, "decode graph: NULL argument");
    void *args[4] = {&token, &pos, &d_step, &token_src};
    cudaKernelNodeParams kp = {};
    kp.func = reinterpret_cast<void *>(begin_kernel);
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args;
    cudaError_t e = cudaGraphExecKernelNodeSetParams(g->exec, g->begin, &kp);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphExecKernelNodeSetParams (step begin)");
    e = cudaGraphLaunch(g->exec, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) return cuda_fail(e, "cudaGraphLaunch");
    return HZ_OK;
}

extern "C" uint32_t hz_decode_graph_nodes(const hz_decode_graph *g) { return g ? g->kernels : 0; }

extern "C" void hz_decode_graph_destroy(hz_decode_graph *g) {
    if (!g) return;
    if (g->exec) (void)cudaGraphExecDestroy(g->exec);
    if (g->graph) (void)cudaGraphDestroy(g->graph);
    (void)cudaGetLastError();
    free(g);
}
