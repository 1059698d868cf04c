/* Kernels and cuBLAS calls of the batched GPU prefill (lib/model/prefill_cuda.c): a chunk of T prompt
 * tokens goes through a layer at once instead of one decode step per token.
 *
 * Plain C interface, as model_ops.cuh: no CUDA types, a stream is a `void *` holding a cudaStream_t,
 * a cuBLAS handle is a `void *`, FP16 tensors are `uint16_t` (binary16 bits). Every function only
 * enqueues work on its stream and returns HZ_OK, HZ_EINVAL (bad arguments), HZ_EUNSUPPORTED (a shape
 * the kernels were not built for) or HZ_EDEVICE (a CUDA or cuBLAS call failed; the message names it).
 * Row-major everywhere: a [T x n] tensor holds token t's n values at t * n.
 *
 * Numerics (doc/numerics.md, "GPU prefill"): the rounding points of forward.c and of the per-token
 * GPU kernels of model_ops.cuh, evaluated with their formulas:
 *   - dense projections are cuBLAS GEMMs with FP16 inputs, FP32 accumulation and FP32 OUTPUT; the one
 *     rounding to FP16 (after the bias, where there is one) happens in the kernel that consumes them,
 *     so it is exactly the GEMV's fp16(sum + bias);
 *   - RMSNorm, q/k norm, RoPE, the residual adds, router softmax/top-k and the attention softmax are
 *     model_ops.cu's code per token (same operation order, same reductions), so for equal inputs they
 *     give equal bits;
 *   - routed experts use the decode tensor-core path's arithmetic: the codes are expanded to exact
 *     FP16 (code - 8), multiplied with FP16 activations by mma.sync (exact products, FP32 sums) per
 *     256-value block, and the block's FP16 scale is applied in FP32 while the blocks are summed;
 *     the routed sum per token is FP32 in ascending expert id, fmaf(w_e, y_e, acc), as the decode
 *     executors add it. */
#ifndef HZ_CUDA_PREFILL_OPS_CUH
#define HZ_CUDA_PREFILL_OPS_CUH

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
extern "C" {
#else
#include <stddef.h>
#include <stdint.h>
#endif

#include "format/qpack.h"

/* ---- cuBLAS -------------------------------------------------------------------------------------
 * One handle per prefill state, bound to `stream`, default math without reduced-precision reductions.
 * hz_pf_gemm: y[t][r] = sum_i w[r][i] * x[t][i] for t < n, r < rows; w FP16 [rows x in] (row stride
 * in), x FP16 rows of stride ldx, y FP32 [n x rows]. */
int hz_pf_blas_create(void *stream, void **out);
void hz_pf_blas_destroy(void *blas); /* NULL allowed */
int hz_pf_gemm(void *blas, const uint16_t *w, uint32_t rows, uint32_t in, const uint16_t *x, uint32_t ldx,
               uint32_t n, float *y);

/* ---- the pair layout ------------------------------------------------------------------------------
 * Inputs of the routed-expert GEMMs are stored with the 32 values of every 32-value chunk permuted
 * into the order in which the tensor-core expansion of a 16-byte code chunk delivers its values
 * (w4a16_device.cuh, hz_expand_pairs), so that a lane's MMA operand is one contiguous 64-byte record.
 * Value i of a row sits at hz_pf_pair_pos(i). Positions whose value lies past the logical length
 * (K padding) must hold zeros: the buffers are cleared once when they are created. */
#ifdef __CUDACC__
#define HZ_PF_HD __host__ __device__
#else
#define HZ_PF_HD
#endif
static inline HZ_PF_HD uint32_t hz_pf_pair_pos(uint32_t i) {
    const uint32_t v = i & 31u;
    return (i & ~31u) + 2u * (4u * ((v & 15u) >> 2) + ((v >> 4) << 1) + (v & 1u)) + ((v >> 1) & 1u);
}

/* ---- residual add + RMSNorm over T rows (the decode GEMV's HZ_DGEMV_X_RESNORM per row) --------------------------------
 *   h[t]  = fp16(src + delta)      src = embed[tokens[t]] when embed is given, else h[t]
 *   delta = none                   (embedding input: h = src)
 *         | fp16(d32[t] + bias)    attention output (FP32 GEMM result, optional FP16 bias)
 *         | fp16(acc)              routed experts: acc = FP32 sum over k < top_k (ascending expert
 *                                  ids) of fmaf(topk_w[t][k], ey[slot_of[t][k]], acc), from 0
 *           and, with shared32,   delta = fp16(delta + fp16(sigmoid(fp16(gate32[t])) * fp16(shared32[t])))
 *   y[t]  = fp16(w * fp16(h * (1 / sqrt(sum(h^2)/n + eps))))      (when w is given)
 *   y_pair[t] = the same values in the pair layout (row stride pair_stride), when given. */
typedef struct hz_pf_norm_args {
    uint32_t rows, n;
    uint16_t *h;                                /* [rows x n] in/out */
    const uint16_t *embed;                      /* [vocab x n] or NULL */
    const int32_t *tokens;                      /* device [rows], with embed */
    const float *d32;                           /* [rows x n] or NULL */
    const uint16_t *d_bias;                     /* [n] or NULL */
    const float *ey;                            /* [slots x ey_stride] expert outputs, or NULL */
    uint32_t ey_stride;
    const uint32_t *slot_of;                    /* [rows x top_k] */
    const float *topk_w;                        /* [rows x top_k] */
    uint32_t top_k;                             /* <= 64 */
    const float *shared32;                      /* [rows x n] or NULL (needs ey) */
    const float *gate32;                        /* [rows] */
    const uint16_t *w;                          /* [n] or NULL: no norm */
    uint16_t *y;                                /* [rows x n] */
    uint16_t *y_pair;                           /* [rows x pair_stride] or NULL */
    uint32_t pair_stride;
    float eps;
} hz_pf_norm_args;

int hz_pf_resnorm(const hz_pf_norm_args *a, void *stream);

/* ---- q/k/v after the projections, T tokens at positions pos0 .. pos0 + T - 1 ----------------------
 * Per token: x = fp16(x32 + bias) for q, k and v; optional q/k RMSNorm over the full widths (OLMoE);
 * RoPE with the table row of the token's position (rope: [positions x head_dim], cos | sin); q goes
 * to q_out, rotated k and plain v to the layer's KV cache rows pos0 + t. */
typedef struct hz_pf_qkv_args {
    uint32_t tokens, pos0;
    const float *q32, *k32, *v32;              /* [T x heads*D], [T x kv_heads*D] x2 */
    const uint16_t *bq, *bk, *bv;              /* biases or NULL */
    const uint16_t *q_norm, *k_norm;           /* both or neither */
    float eps;
    const float *rope;
    uint16_t *q_out;                           /* [T x heads*D] */
    uint16_t *kc, *vc;                         /* this layer's cache [positions x kv_heads*D] */
    uint32_t heads, kv_heads, head_dim;
} hz_pf_qkv_args;

int hz_pf_qkv(const hz_pf_qkv_args *a, void *stream);

/* ---- causal attention of T queries (positions pos0 + t) over the layer's KV cache ----------------
 * Query t attends to positions 0 .. pos0 + t. Per query and head hz_model_attention's arithmetic:
 * FP32 scores scaled by 1/sqrt(D), softmax in FP32, out = fp16(sum_j p_j v_j). A block takes one head
 * and up to eight consecutive queries (they share every K and V row it loads); the scores live in
 * shared memory, so the longest context is bounded by hz_pf_attention_max_positions. */
int hz_pf_attention(const uint16_t *q, const uint16_t *kc, const uint16_t *vc, uint16_t *out, uint32_t tokens,
                    uint32_t pos0, uint32_t heads, uint32_t kv_heads, uint32_t head_dim, void *stream);
/* The most positions (pos0 + T) one attention launch supports for this head_dim on the current
 * device (0 when head_dim is not supported or the device cannot be queried). */
uint32_t hz_pf_attention_max_positions(uint32_t head_dim);

/* ---- router: per token, softmax over E logits (fp16(logits32)) in FP32, top-k with ties to the lower
 * id, optional renormalisation; ids ascending with their FP32 weights: hz_model_route per token. */
int hz_pf_route(const float *logits32, uint32_t tokens, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids,
                float *w, void *stream);

/* ---- bucketing: the T x K (token, expert) pairs sorted into expert order ---------------------------
 * Slots 0 .. T*K-1 hold the pairs by ascending expert id, then ascending token: slot_tok[slot] is the
 * token of a slot, slot_of[t * K + k] the slot of token t's k-th expert. counts[e] is the number of
 * tokens routed to expert e. The tiles cut every expert's slots into runs of at most
 * HZ_PF_TILE_TOKENS, experts ascending: tile i covers slots slot0 .. slot0 + count - 1 of `expert`;
 * *n_tiles is their number. The host derives the same tile numbering from counts alone
 * (hz_pf_tiles_of). One block; T*K <= 65536, E <= 1024. */
#define HZ_PF_TILE_TOKENS 32u

typedef struct hz_pf_tile {
    uint32_t expert, slot0, count, pad;
} hz_pf_tile;

int hz_pf_bucket(const uint32_t *ids, uint32_t tokens, uint32_t K, uint32_t E, uint32_t *counts, uint32_t *slot_tok,
                 uint32_t *slot_of, hz_pf_tile *tiles, uint32_t *n_tiles, void *stream);
/* The most tiles T tokens with top-k of E experts can produce. */
static inline uint32_t hz_pf_max_tiles(uint32_t tokens, uint32_t K, uint32_t E) {
    const uint32_t pairs = tokens * K, nonempty = E < pairs ? E : pairs;
    return pairs / HZ_PF_TILE_TOKENS + nonempty + 1u;
}
static inline uint32_t hz_pf_tiles_of(uint32_t count) {
    return (count + HZ_PF_TILE_TOKENS - 1u) / HZ_PF_TILE_TOKENS;
}

/* ---- routed experts: all tokens of a set of experts, W4A16 on the tensor cores -------------------
 * Two launches: gate_up computes, for every slot of the covered tiles, act[slot] = fp16(silu(g) * u)
 * (pair layout, row stride act_stride, values past inter untouched) from the slot's token row of
 * x_pair; down computes ey[slot][j] = FP32 dot product of down row j with act[slot] (row stride
 * ey_stride). Blob addresses by expert id come either from `table` (device [E], full residency) or
 * from rows_host (host [E], NULL for experts not in this call; copied into the kernel parameters).
 * Tiles tile_base .. tile_base + tile_count - 1 are covered; with n_tiles_dev (device count) given,
 * tiles at or past *n_tiles_dev are skipped (a grid sized for the worst case). */
#define HZ_PF_MAX_EXPERTS 256u

typedef struct hz_pf_experts_args {
    const hz_expert_layout *layout; /* host */
    uint32_t experts;               /* E */
    const void *const *table;       /* device [E] or NULL */
    const void *const *rows_host;   /* host [E] when table is NULL */
    const hz_pf_tile *tiles;
    const uint32_t *n_tiles_dev;
    uint32_t tile_base, tile_count;
    const uint32_t *slot_tok;
    const uint16_t *x_pair;         /* [T x x_stride], x_stride >= gate.kp */
    uint32_t x_stride;
    uint16_t *act;                  /* [slots x act_stride], act_stride >= down.kp */
    uint32_t act_stride;
    float *ey;                      /* [slots x ey_stride], ey_stride >= hidden */
    uint32_t ey_stride;
} hz_pf_experts_args;

int hz_pf_experts(const hz_pf_experts_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
