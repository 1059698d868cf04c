/* lib/exec: W4A16 executors for routed experts (DESIGN.md 4.6).
 *
 * An executor computes the routed-expert part of one MoE layer for T tokens, reading the qpacked expert
 * blobs in place (the rows a cache lease maps) and expanding INT4 values only into registers or a small
 * stack buffer; no expert is ever kept expanded.
 *
 * The numerics are fixed by the CPU reference executor ("reference", exec_ref.c) and every other
 * executor is checked against it:
 *   weight value        w = (float)(code - 8) * (float)scale            (exact in FP32)
 *   gate_i, up_i        FP32 dot products of the gate / up rows with x   (x: FP16 activations)
 *   a_i                 fp16_round(silu(gate_i) * up_i), computed in FP32, silu(g) = g / (1 + expf(-g))
 *   y_e[j]              FP32 dot product of down row j with a
 *   acc[j]             += w_e * y_e[j] in FP32, experts in ASCENDING id order
 * and the caller rounds acc to FP16 once every routed expert of the token has been added. The summation
 * order inside one dot product is an implementation detail of each executor (checks use tolerances);
 * the order of the expert sum is not, so that the result never depends on how the experts of a layer
 * were split into cache leases (see hz_moe_call.acc).
 */
#ifndef HZ_EXEC_H
#define HZ_EXEC_H

#include <stdint.h>

#include "core/core.h"
#include "core/fp16.h"
#include "format/qpack.h"

/* One executor call: the experts of one lease (a group of a layer's routed experts) applied to every
 * token routed to them. */
typedef struct hz_moe_call {
    const hz_expert_layout *layout; /* blob layout: hidden, inter, the three qpacked matrices */
    uint32_t n_tokens;              /* T */
    const hz_f16 *x;                /* [T x hidden] FP16 input of the MoE block (post-attention norm) */
    uint32_t top_k;
    const uint32_t *topk_ids; /* [T x top_k] routed expert ids of each token */
    const float *topk_w;      /* [T x top_k] routing weights (FP32) */
    uint32_t n_group;         /* experts of this call, strictly ascending ids */
    const uint32_t *group_ids;
    const uint8_t *const *rows; /* [n_group] blob addresses (device addresses; host on cpu) */
    /* [T x hidden] FP32 accumulators, in/out. The caller zeroes them before the first group of a layer
     * and calls groups in ascending id order, so every token's experts are added in ascending id order
     * no matter how they were grouped. */
    float *acc;
    /* Device executors only (cuda; the cpu executors ignore these, callers there leave them zero).
     * x and acc are device addresses, topk_ids / topk_w / group_ids / rows stay host arrays (rows holding
     * device addresses), and:
     *   group_w   device FP32 [T x n_group]: the weight of group expert g for token t, 0 when t does
     *             not route to it (the kernels take weights in the experts' order, so the caller, which
     *             computed the routing on the device, lays them out once instead of the executor
     *             searching topk_ids);
     *   scratch   device scratch, 256-byte aligned, of hz_exec_cuda_scratch_bytes(layout) bytes, owned
     *             by the caller: one per session, since sessions share the backend's compute queue;
     *   queue     the native compute queue (cudaStream_t) the work is enqueued on. */
    const float *group_w;
    void *scratch;
    uint64_t scratch_bytes;
    void *queue;
} hz_moe_call;

typedef struct hz_executor hz_executor;

typedef struct hz_executor_ops {
    const char *name;        /* "reference", "scalar", "grouped" */
    const char *accum_dtype; /* accumulation dtype declared in describe calls: "f32" */
    const char *device_kind; /* backend kind it runs on: "cpu" or "cuda" */
    /* Runs one call. Synchronous executors (cpu) have finished reading the rows when it returns;
     * asynchronous ones enqueue on the backend's compute queue. */
    int (*moe)(hz_executor *ex, const hz_moe_call *call);
    void (*destroy)(hz_executor *ex);
} hz_executor_ops;

struct hz_executor {
    const hz_executor_ops *ops;
};

/* Creates the executor `name` ("auto" picks the best one) for a backend of kind `device_kind`, sized
 * for experts of `layout`. Errors: HZ_EUNSUPPORTED (no such executor for this device kind; the message
 * says which exist), HZ_EINVAL, HZ_ENOMEM. */
int hz_executor_create(const char *name, const char *device_kind, const hz_expert_layout *layout,
                       hz_executor **out);
void hz_executor_destroy(hz_executor *ex); /* NULL allowed */

/* The CPU reference executor. */
int hz_exec_reference_create(const hz_expert_layout *layout, hz_executor **out);

/* Validates a call's shape (used by every executor before it touches memory). */
int hz_moe_call_check(const hz_moe_call *call);

#endif
