/* The decode step's fused kernels (cuda/model/decode_ops.cu) and its CUDA graph, behind a plain C
 * interface (included from lib/model/forward_cuda.c): no CUDA types, a stream is a `void *` holding a
 * cudaStream_t, FP16 tensors are uint16_t (binary16 bits).
 *
 * Why these exist next to model_ops.cuh: a batch-1 step is a chain of ~10 small dependent kernels per
 * layer, so launch gaps and the latency of tiny kernels cost as much as the weight stream. Here
 *   - the position and token live in device memory (hz_dstep), written by one small kernel at the
 *     start of the step, so the whole step can be captured once as a CUDA graph and replayed;
 *   - the residual add + RMSNorm runs as the prologue of the GEMV that consumes its output (every
 *     block recomputes the 2048-value norm from L2, which costs less than a launch), the SiLU-and-
 *     multiply of the Qwen shared expert as the prologue of its down projection, the router's softmax
 *     + top-k and the lm_head's argmax as the tail of their GEMV (the last block to finish);
 *   - q/k norm, RoPE and the KV store run inside the attention kernel, which splits the positions
 *     over several blocks per head (flash-decoding) and combines the splits in its last block;
 *   - every kernel can be launched with programmatic dependent launch: it issues its first weight
 *     loads (never written by the step) before waiting for the previous kernel, so the next kernel's
 *     launch and weight stream overlap the tail of the current one.
 * Rounding points and elementwise formulas are those of model_ops.cuh and doc/numerics.md; only the
 * order of FP32 additions differs (and the split softmax, see hz_decode_attention).
 *
 * Every function only enqueues work; it returns HZ_OK, HZ_EINVAL / HZ_EUNSUPPORTED (arguments, shape),
 * or HZ_EDEVICE naming the CUDA call that failed. */
#ifndef HZ_CUDA_MODEL_DECODE_OPS_CUH
#define HZ_CUDA_MODEL_DECODE_OPS_CUH

#include "model_ops.cuh"

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
extern "C" {
#else
#include <stddef.h>
#include <stdint.h>
#endif

/* The per-step values, in device memory: written by hz_decode_begin, read by the kernels below. */
typedef struct hz_dstep {
    int32_t token;
    uint32_t pos;
    uint32_t epoch; /* +1 at every hz_decode_begin (never reset): names the step for the ready flags */
} hz_dstep;

/* How a kernel is launched: the stream and whether with programmatic dependent launch. */
typedef struct hz_klaunch {
    void *stream;
    int pdl;
} hz_klaunch;

/* Device facts the launch shapes depend on, read once (hz_decode_device_info). The grids of the
 * GEMV and attention kernels are functions of these and of the tensor shapes only, never of the
 * position, so an eager step and a replayed graph run exactly the same blocks. */
typedef struct hz_decode_dev {
    uint32_t sms;        /* multiprocessors */
    uint32_t gemv_grid;  /* most blocks a GEMV launches (resident at once); tails need this bound */
    uint32_t clusters;   /* 1: hz_decode_router_cluster can run here (cluster launch, sm_90 code) */
} hz_decode_dev;

/* Reads the device of `stream` and the occupancy of the GEMV kernel with `max_in` FP16 inputs in
 * shared memory; also makes that device current on the calling thread. */
int hz_decode_device_info(void *stream, uint32_t max_in, hz_decode_dev *out);

/* Makes the device of `stream` current on the calling thread (kernels are launched on it). */
int hz_decode_enter(void *stream);

/* ---- step start -------------------------------------------------------------------------------------
 * One thread writes {token, pos} into *d_step and advances its epoch. Launched without programmatic
 * dependent launch, so it waits for everything queued before it (the previous step still reads
 * *d_step). */
int hz_decode_begin(int32_t token, uint32_t pos, hz_dstep *d_step, void *stream);

/* ---- the gate of a layer's routed experts at partial residency ------------------------------------------
 * At partial residency the host learns a layer's routing only when its router has run, and must lease
 * the rows (serving the misses) before the experts may read them. To keep the device busy meanwhile,
 * the step enqueues each layer's experts ahead, behind this gate, and the next layer's kernels up to
 * its router behind them (lib/model/forward_cuda.c, "experts ahead"). One warp waits for the kernel
 * before it (programmatic dependent launch), then polls *go (pinned host memory, its device address)
 * until it holds at least `want`, and then copies rows_host[0..n) (pinned, written by the host before
 * it stored `want`) into rows_dev[0..n) (device memory: the executor's blobs_dev). The host stores
 * `want` into *go after it has written the rows of the leased group, or, on any failure, without
 * writing them (the rows of an earlier gate, or of the initial fill, are then read again: addresses
 * inside the cache's arena, which stays allocated while the session lives). It must do one or the
 * other for every gate it enqueued before it waits for the queue. A gate that sees no `want` within
 * about 10 seconds (2e10 multiprocessor clocks: a host that broke that rule, or one held up by a thread
 * outside the session's control) stores `want` into *late (pinned, its device address) and copies
 * whatever rows_host holds, so that the queue moves on instead of hanging; the host must then fail the
 * step. The kernel after the gate may be placed while it polls (it triggers its dependents at once).
 *
 * With `table` (device memory: the row address of each of the layer's experts, NULL where not resident,
 * copied from a generation the host keeps leased) and `ids` (device memory: the router's top-n), the
 * gate first looks the ids up: when every one has a row, it writes those rows and ends without polling
 * (a hit resolved on the device: no round trip through the host). Otherwise it waits as above and then
 * adds 1 to *waited (pinned, its device address), so that the host can check that the device and its
 * own copy of the table agreed. Then, with `changes`, it copies the layers the host lists there
 * (changes[0] = count, changes[1..] = layers; pinned, written before `want`) from `stage` (pinned,
 * [layers x experts]) into `table_all` (device, the same shape), before it copies the rows: the host
 * changes the table only while a gate waits for it, and the gates are in order, so every later gate
 * reads the new rows.
 * With `step`, the gate's number is (step->epoch << 16) | want instead of `want` (want < 65536): a
 * captured step's arguments never change. n <= 32.
 * The same gate can instead run inside the layer's router (hz_dgemv_args.gate): see there. */
typedef struct hz_dgate_args {
    const uint64_t *go;        /* the word polled (device address of pinned memory) */
    uint64_t want;             /* the value that opens this gate (its low 16 bits with `step`) */
    const hz_dstep *step;      /* optional: the step whose epoch numbers the gate */
    const uint64_t *rows_host; /* [n] row addresses the host wrote before storing want (pinned) */
    const void **rows_dev;     /* [n] the executor's device argument array */
    uint32_t n;
    uint64_t *late;            /* pinned: want, stored by a gate that gave up waiting */
    const void *const *table;  /* optional: [experts] of the layer, device memory */
    uint32_t experts;          /* with table: its entries (an id at or above it counts as not resident) */
    const uint32_t *ids;       /* with table: [n] expert ids, device memory */
    uint64_t *waited;          /* with table: pinned, +1 per gate that waited for the host */
    const uint32_t *changes;   /* optional (with table): pinned [1 + layers], the layers to copy */
    const void *const *stage;  /* with changes: pinned [layers x experts] */
    const void **table_all;    /* with changes: device [layers x experts] */
    uint32_t layers;           /* with changes: rows of stage and table_all */
} hz_dgate_args;

int hz_decode_gate(const hz_dgate_args *a, const hz_klaunch *k);

/* ---- GEMV with fused prologue and tail -----------------------------------------------------------------
 * y_s = W_s x (+ b_s) for up to HZ_MGEMV_MAX_SEGS segments of hz_mgemv_seg (as hz_model_gemv), where the
 * input x of `in` FP16 values is built by every block in shared memory:
 *   HZ_DGEMV_X_PLAIN    x = the FP16 vector `x`
 *   HZ_DGEMV_X_RESNORM  the residual add + RMSNorm of forward.c (doc/numerics.md), formula for formula:
 *                         src   = embed row step->token (when `embed`), else h_in
 *                         h     = src, or fp16(src + delta) with delta from d (FP16) or fp16(acc)
 *                                 (+ fp16(sigmoid(shared_gate[0]) * shared), rounded, for Qwen)
 *                         x     = fp16(norm_w * fp16(h * (1 / sqrt(sum(h^2)/in + eps))))
 *                       block 0 also stores h into h_out and x into x_out (either may be NULL);
 *                       h_out must not alias h_in (other blocks are still reading it)
 *   HZ_DGEMV_X_SILU     x = fp16(silu(g) * u) from FP32 g, u (hz_model_silu_mul's formula)
 * After the wait, block 0 also zeroes `zero[0..zero_n)` (the accumulators the next kernels add into).
 * Tails:
 *   HZ_DGEMV_TAIL_ROUTE   the router of hz_model_route over segment 0 (FP16 logits, E = its rows), run
 *                         by the warp that writes the last of segment 0's rows, while the other
 *                         segments (Qwen's shared expert) may still be streaming
 *   HZ_DGEMV_TAIL_ARGMAX  argmax over segment 0 (FP32 output), ties to the lowest row, into *argmax_out
 *                         (and *argmax_host when given), run by the last block to finish
 * A tail needs `tail_scratch` (hz_decode_tail_bytes, zeroed once before first use; it returns to zero
 * after every launch). Weights are read once per step, streamed past L1. */
#define HZ_DGEMV_X_PLAIN 0u
#define HZ_DGEMV_X_RESNORM 1u
#define HZ_DGEMV_X_SILU 2u
#define HZ_DGEMV_TAIL_NONE 0u
#define HZ_DGEMV_TAIL_ROUTE 1u
#define HZ_DGEMV_TAIL_ARGMAX 2u

typedef struct hz_dgemv_args {
    hz_mgemv_seg seg[HZ_MGEMV_MAX_SEGS];
    uint32_t nseg;
    uint32_t in;
    uint32_t x_mode;
    const uint16_t *x; /* PLAIN */
    /* RESNORM */
    const uint16_t *embed;
    const hz_dstep *step;
    const uint16_t *h_in;
    const uint16_t *d;
    const float *acc;
    const uint16_t *shared;
    const uint16_t *shared_gate;
    const uint16_t *norm_w;
    float eps;
    uint16_t *h_out;
    uint16_t *x_out;
    /* SILU */
    const float *g, *u;
    /* any mode */
    float *zero;
    uint32_t zero_n;
    uint32_t tail;
    /* 1: runs beside the routed-expert kernel (another stream): at most one block per SM (given dev),
     * which fits next to that kernel's block in the 80 registers per thread it leaves, with deeper
     * batches; the same sums as 0 */
    uint32_t beside;
    /* TAIL_ROUTE */
    uint32_t top_k;
    int norm_topk;
    uint32_t *ids_out;
    float *w_out;
    const void *const *table;
    const void **rows_out;
    /* Optional (partial residency): the selection is also stored into pinned host memory through these
     * device addresses (host_ids[top_k], host_w[top_k]), and then, after a system-scope fence,
     * host_tag into *host_tag_out. The host polls that word instead of copying the routing back and
     * waiting for the queue (lib/model/forward_cuda.c, routed_partial). All three or none. */
    uint32_t *host_ids;
    float *host_w;
    uint64_t *host_tag_out;
    uint64_t host_tag;
    /* 1 (needs `step`): the tag stored is (step->epoch << 16) | host_tag, so that a captured step, whose
     * launch arguments never change, still names each step's routing apart (host_tag < 65536). */
    uint32_t host_tag_epoch;
    /* 1 (TAIL_ROUTE with the host copy above, no `ready`): the routing warp, once it has published the
     * routing, runs `gate` (hz_decode_gate's work, the same rules) instead of a gate kernel of its own:
     * the experts' kernel, which waits for this grid's end, then finds its rows in gate.rows_dev. One
     * kernel less between a layer's router and its experts. gate.ids must be ids_out. */
    uint32_t gate_on;
    hz_dgate_args gate;
    /* Optional (needs `step`): ready[0] is set to step->epoch by block 0 once x_out and `zero` are
     * written, ready[1] by the routing warp once ids/w/rows are; both release stores at GPU scope.
     * The routed-expert kernel waits for these two instead of for this whole grid (hz_w4a16_args.ready). */
    uint32_t *ready;
    /* 1: each router row (segment 0) is the only row of its warp, and the other warps share the rest.
     * The warp that takes the routing ticket then has no loads in flight for a next row: the fence before
     * its ticket, and the routing after it, do not wait behind them, and its block ends with the routing
     * (Qwen step 1.435 / 1.485 / 1.556 -> 1.382 / 1.441 / 1.509 ms at positions 32-96 / ~200 / ~1024,
     * H200, 2026-11-30). The same sums either way. Ignored unless the grid has more warps than router rows. */
    uint32_t router_alone;
    /* Optional (needs `step`, TAIL_ROUTE): E words for this layer, never shared with another layer's
     * launch and zeroed before first use. Each router row's warp stores (epoch & 0xffff) << 16 | its FP16
     * logit there with one relaxed store, and the last router row's warp polls the E words until all carry the
     * step's tag, then routes: no fence, ticket or logits read between the last router row and the
     * routing. Without: the last router row's warp takes a ticket (fence + atomic) and reads the logits. */
    uint32_t *tags;
    /* TAIL_ARGMAX */
    int32_t *argmax_out;
    int32_t *argmax_host; /* also written here when non-NULL: pinned host memory, its device address */
    void *tail_scratch;
} hz_dgemv_args;

uint64_t hz_decode_tail_bytes(const hz_decode_dev *dev);
/* The address by which kernels reach pinned host memory `host` (cudaHostGetDevicePointer); HZ_EUNSUPPORTED
 * (and *out NULL) when there is none. */
int hz_decode_host_pointer(void *host, void **out);
/* dev NULL: one block per 8 rows (no tails allowed). */
int hz_decode_gemv(const hz_dgemv_args *a, const hz_decode_dev *dev, const hz_klaunch *k);

/* ---- the router GEMV and its tail in one thread-block cluster -----------------------------------------
 * What hz_decode_gemv does for a router alone (one segment, HZ_DGEMV_TAIL_ROUTE, at most
 * HZ_DECODE_CLUSTER_ROWS rows, FP16 logits, no ready flags or tags) with the same sums, so the logits
 * are bit-identical: x built by every block as there (block 0 stores h_out, x_out and zeroes `zero`),
 * each row's dot product by one warp, the logit stored into segment 0's y. The grid is one cluster of
 * min(8, rows) blocks, the rows cut into equal runs per block. Each block also stores its logits into
 * block 0's shared memory, and after the cluster's barrier block 0 routes them (hz_model_route's
 * selection: ids_out, w_out, rows_out from `table`). So the routing needs neither a second kernel nor
 * a fence and ticket in global memory. The arguments are checked as hz_decode_gemv checks them, then
 * against the above (HZ_EINVAL); HZ_EUNSUPPORTED where dev->clusters is 0. */
#define HZ_DECODE_CLUSTER_ROWS 256u
int hz_decode_router_cluster(const hz_dgemv_args *a, const hz_decode_dev *dev, const hz_klaunch *k);
/* For tests: routes E FP16 logits (device memory) in one block, as the router cluster's block 0 does after
 * its barrier: with the one-warp routing that block uses for E <= 64 (warp64 = 1; E <= 64 required) or
 * with the whole block's route_block (warp64 = 0), into ids[K] and w[K] (device memory). Both must
 * choose the same experts with the same weights bit for bit. HZ_EINVAL for sizes out of range. */
int hz_decode_route_logits(const uint16_t *logits, uint32_t E, uint32_t K, int norm_topk, int warp64, uint32_t *ids,
                           float *w, void *stream);
/* Whether the device current on the calling thread can launch hz_decode_router_cluster (sets
 * hz_decode_dev.clusters through hz_decode_device_info). */
int hz_decode_router_cluster_supported(uint32_t *out);

/* ---- attention of one decode token, q/k norm, RoPE and the KV store included ------------------------------
 * For the position pos = step->pos: q, k from the FP16 projections (optionally RMSNorm'ed over their
 * full widths with q_norm / k_norm, two roundings), RoPE with the cos/sin row rope + pos * D (rotate
 * half, as forward.c); rotated k and plain v stored at row pos of kc / vc (this layer's cache
 * [max_ctx x kv_heads*D]); then per head softmax(q . k_j / sqrt(D)) over j = 0..pos and
 * out = fp16(sum_j p_j v_j). Positions are cut into chunks of HZ_DECODE_ATTN_CHUNK. A block is made
 * of `groups` (1 or 2; 0 means 1) groups of 256 threads; the block's chunk i goes to group i % groups,
 * and the groups' partial results are merged in the block. Up to two chunks per group (positions
 * 0..127 with one group, 0..255 with two) are handled by one block per head, which writes `out`
 * itself; beyond, nact = min(splits, ceil(chunks / groups)) blocks per head take part, chunk c going
 * to split c % nact, each keeping running maxima, sums and FP32 outputs (online softmax: p_j =
 * exp(s_j - m) * exp(m - M) / L instead of exp(s_j - M) / L, equal up to FP32 rounding), and the last
 * of them to finish combines them in split order. Any group count gives a correct result at any
 * position; hz_decode_attention_groups says which is faster where. The grid is heads x splits whatever
 * the position (splits from hz_decode_attention_splits for the session's max_context): blocks without
 * a chunk leave at once.
 * `part` holds heads x splits x (D + 2) floats, `count` heads counters, zeroed once (they return to
 * zero after every launch).
 * With groups 2 and head_dim 64 or 128 (unless HZ_GPU_ATTN_WARP=0 in the environment) the launch is the
 * one-pass kernel instead: one block of 16 warps per query head, warp w folding positions 16w..16w+15,
 * 16w+256.. into its own running (m, l, o) and one barrier merging the warps in warp order; `part`,
 * `count` and `splits` are not used. It is meant for positions below 256, whose cached rows it copies
 * into shared memory before the dependency wait; at any later position it reads the rows past 256 from
 * the cache and is still right, only slower.
 * Needs head_dim a multiple of 8, at most 256. */
#define HZ_DECODE_ATTN_CHUNK 64u

typedef struct hz_dattn_args {
    const uint16_t *q, *k, *v;
    const uint16_t *q_norm, *k_norm; /* NULL: no q/k norm */
    float eps;
    const float *rope; /* [max_ctx x D] table, row = [cos 0..D/2 | sin 0..D/2] */
    const hz_dstep *step;
    uint16_t *kc, *vc;
    uint16_t *out;
    float *part;
    uint32_t *count;
    uint32_t splits, heads, kv_heads, head_dim;
    uint32_t groups; /* 0 or 1: blocks of one group of 256 threads; 2: of two */
} hz_dattn_args;

/* The group count that measured fastest for a step at position pos (positions 0..pos attended): 2
 * while one two-group block holds all of them (pos < 256), where it spares the split blocks' combine
 * through global memory; 1 beyond, where more blocks of one group each spread the chunks wider (H200,
 * 2026-12-01, OLMoE-1B-7B layer shapes, step at positions ~200: 0.651 -> 0.638 ms; ~1,024: 0.704 ->
 * 0.721 with two groups; doc/benchmarks.md, thirtieth round). Below 256, groups 2 now selects the
 * one-pass kernel for head_dim 64 and 128 (the step at ~200: 0.600 -> 0.582 ms; forty-third round). */
uint32_t hz_decode_attention_groups(uint32_t pos);

uint32_t hz_decode_attention_splits(const hz_decode_dev *dev, uint32_t heads, uint32_t max_ctx);
int hz_decode_attention_supported(uint32_t head_dim);
int hz_decode_attention(const hz_dattn_args *a, const hz_klaunch *k);

/* ---- a side stream for work that does not depend on the routed experts --------------------------------------
 * Qwen's shared expert down projection needs only the router GEMV's gate/up rows, so it runs beside the
 * routed-expert kernel instead of after it. hz_decode_side holds a non-blocking stream on the device of
 * `stream` and two events without timing. fork records "everything queued on `stream` so far" (call it
 * right after the kernel the side work depends on); side_begin makes the side stream wait for that
 * point and returns it; join makes `stream` wait for everything queued on the side stream so far. All
 * three are legal during stream capture: the side stream then joins the capture and is joined back.
 * destroy waits for the side stream first (NULL-safe). */
typedef struct hz_decode_side hz_decode_side;

int hz_decode_side_create(void *stream, hz_decode_side **out);
void hz_decode_side_destroy(hz_decode_side *side);
/* programmatic: while `stream` is capturing, the first side kernel after this fork gets a programmatic
 * edge from the kernel the fork follows (when that is exactly one kernel node): it is launched when that
 * kernel's blocks trigger and waits for its end on the device (griddep_wait), as with programmatic
 * dependent launch on one stream. Eager work and other edges: full dependencies. */
int hz_decode_fork(hz_decode_side *side, void *stream, int programmatic);
/* How many programmatic edges hz_decode_side_begin has made (0 for NULL). */
unsigned long long hz_decode_side_programmatic_edges(const hz_decode_side *side);
int hz_decode_side_begin(hz_decode_side *side, void **side_stream);
int hz_decode_join(hz_decode_side *side, void *stream);

/* ---- the CUDA graph of a step ------------------------------------------------------------------------------
 * Capture runs on a private stream (other sessions may be queueing on the compute stream meanwhile):
 * begin_capture creates it and starts a thread-local capture; the caller enqueues exactly one
 * hz_decode_begin followed by the rest of the step on *capture_stream; end_capture ends it,
 * instantiates the graph, finds the hz_decode_begin node (the graph's only root) and destroys the
 * stream. On failure nothing is left behind and the message names the CUDA call. launch writes the
 * step's token and position into the begin node's parameters, then launches the graph on `stream`. */
typedef struct hz_decode_graph hz_decode_graph;

int hz_decode_graph_begin_capture(void *compute_stream, void **capture_stream);
/* Ends a capture begun above; `ok` = 0 when the enqueueing failed (the capture is then discarded and
 * HZ_OK returned with *out NULL). */
int hz_decode_graph_end_capture(void *capture_stream, int ok, hz_decode_graph **out);
/* token_src non-NULL: the step's token is read on the device from there when the graph runs (the
 * previous step's argmax), and `token` is ignored. */
int hz_decode_graph_launch(hz_decode_graph *g, int32_t token, uint32_t pos, hz_dstep *d_step,
                           const int32_t *token_src, void *stream);
/* Kernel nodes in the graph (reported in the session stats). */
uint32_t hz_decode_graph_nodes(const hz_decode_graph *g);
void hz_decode_graph_destroy(hz_decode_graph *g);

#ifdef __cplusplus
}
#endif

#endif
