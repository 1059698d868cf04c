/* Plain non-routed kernels on CUDA: FP16 GEMV, decode attention, router softmax + top-k,
 * SiLU-and-multiply and argmax. The decode step itself runs the fused kernels of decode_ops.cuh; these
 * serve the batched prefill, the speculative router at partial residency and the benchmarks' baselines.
 *
 * Plain C interface (included from lib/model/forward_cuda.c): no CUDA types, a stream is a `void *`
 * holding a cudaStream_t. FP16 tensors are `uint16_t` (IEEE binary16 bits, hz_f16 on the C side).
 * Every function only enqueues work on `stream`; it returns HZ_OK, HZ_EINVAL (bad arguments) or
 * HZ_EDEVICE (the launch failed; the message names the kernel and CUDA's error).
 *
 * Numerics follow doc/numerics.md and lib/model/forward.c, rounding at the same points: every value
 * that forward.c holds as "exactly FP16" is stored as FP16 here, dot products accumulate in FP32 (in a
 * different order than the CPU: comparisons use tolerances), elementwise formulas are evaluated with
 * the CPU's operation order and no fused multiply-add where the CPU has none (RoPE, norms), and the
 * cos/sin of RoPE come from a table the host fills with the CPU's own formula, so positions encode
 * identically. */
#ifndef HZ_CUDA_MODEL_OPS_CUH
#define HZ_CUDA_MODEL_OPS_CUH

#ifdef __cplusplus
#include <cstdint>
extern "C" {
#else
#include <stdint.h>
#endif

/* ---- GEMV: y = W x (+ b), FP16 weights [rows x in] row-major, FP32 accumulation ----------------
 * Up to HZ_MGEMV_MAX_SEGS matrices that read the same x run in one launch (q/k/v; router and the
 * shared expert's gate, up and gate logit). Each output is FP16 (rounded once, after the bias) or FP32
 * (not rounded: logits, the shared expert's gate/up before SiLU). W must be 16-byte aligned and x
 * 16-byte aligned; `in` need not be a multiple of 8 (a scalar path covers other widths). */
#define HZ_MGEMV_MAX_SEGS 4

typedef struct hz_mgemv_seg {
    const uint16_t *w;    /* [rows x in] */
    const uint16_t *bias; /* [rows] or NULL */
    void *y;              /* [rows] FP16 or FP32 */
    uint32_t rows;
    uint32_t out_f32; /* 0: FP16 output, 1: FP32 output */
} hz_mgemv_seg;

int hz_model_gemv(const uint16_t *x, uint32_t in, const hz_mgemv_seg *segs, uint32_t nseg, void *stream);

/* ---- decode attention over the FP16 KV cache ---------------------------------------------------
 * One query token; for every head: scores over positions 0..n_pos-1 (FP32, scaled), softmax in FP32,
 * out = fp16(sum_j p_j v_j). kc / vc: this layer's cache [positions x kv_heads*D]; scores: FP32 scratch
 * [heads x score_stride], score_stride >= n_pos. */
int hz_model_attention(const uint16_t *q, const uint16_t *kc, const uint16_t *vc, uint16_t *out, float *scores,
                       uint32_t score_stride, uint32_t heads, uint32_t kv_heads, uint32_t head_dim, uint32_t n_pos,
                       void *stream);

/* ---- router: softmax over E FP16 logits in FP32, top-k (ties to the lower id), optional
 * renormalisation. Writes the k ids ascending with their FP32 weights (ids_out[k], w_out[k]) and, when
 * `table` (device [E] blob addresses) is given, rows_out[k] = table[ids_out[k]]. E <= 1024, k <= 64.
 * pdl: launched with programmatic dependent launch after the kernel that writes the logits (the decode
 * step's router GEMV without its tail); the table must then not change while that kernel runs. */
int hz_model_route(const uint16_t *logits, uint32_t E, uint32_t K, int norm_topk, uint32_t *ids_out, float *w_out,
                   const void *const *table, const void **rows_out, int pdl, void *stream);

/* ---- a = fp16(silu(g) * u), silu(g) = g / (1 + expf(-g)), FP32 g and u ------------------------- */
int hz_model_silu_mul(const float *g, const float *u, uint16_t *a, uint32_t n, void *stream);

/* ---- argmax of n FP32 values, ties to the lowest index ------------------------------------------ */
int hz_model_argmax(const float *x, uint32_t n, int32_t *out, void *stream);

#ifdef __cplusplus
}
#endif

#endif
