/* Which weights the decode step pulls into L2 ahead of the kernel that reads them.
 *
 * A batch-1 step alternates bandwidth-bound kernels (the q/k/v, o, router and shared-expert GEMVs,
 * the routed experts) with latency-bound ones (attention, the GEMV tails) that leave HBM idle. A plan
 * names, for each of the step's kernels (a "slot"), the weight tensors it prefetches into L2 at its
 * start, so that a later kernel reads them from L2. The plan changes timing only, never results.
 *
 * Written as a spec string (the HZ_DECODE_L2PF environment variable overrides the built-in default
 * of each architecture): comma-separated `SLOT[MB]=TENSORS`, or "off" for none.
 *   SLOT     A attention of layer l, O o_proj GEMV, R router GEMV (Qwen: with the shared expert's
 *            gate and up), D Qwen shared-expert down GEMV
 *   MB       optional cap in MiB on what the slot prefetches (the last tensor is cut short)
 *   TENSORS  up to HZ_L2PLAN_MAX letters, prefetched in this order:
 *            o o_proj of layer l, r router of layer l (with Qwen's shared-expert gate vector),
 *            g / u / d Qwen shared expert gate / up / down of layer l,
 *            q / k / v q/k/v projections of layer l + 1 (nothing after the last layer)
 * Example: "A=or,R=qkv": attention prefetches o_proj and the router, the router GEMV the next layer's
 * q/k/v projections (they then stream while the routed experts run). */
#ifndef HZ_MODEL_L2PLAN_H
#define HZ_MODEL_L2PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define HZ_L2PLAN_MAX 4 /* tensors per slot (the kernels' prefetch slots) */

typedef enum hz_l2slot { HZ_L2SLOT_ATTN, HZ_L2SLOT_O, HZ_L2SLOT_ROUTER, HZ_L2SLOT_SHDOWN, HZ_L2SLOT_COUNT } hz_l2slot;

typedef struct hz_l2plan {
    char tensors[HZ_L2SLOT_COUNT][HZ_L2PLAN_MAX + 1]; /* letters, NUL-terminated */
    uint64_t cap[HZ_L2SLOT_COUNT];                   /* bytes, 0 = no cap */
} hz_l2plan;

/* The plan an architecture uses when HZ_DECODE_L2PF is not set (measured on the H200, see
 * doc/benchmarks.md). */
const char *hz_l2plan_default(hz_arch arch);

/* Parses `spec` into *out. HZ_EINVAL with a message naming the offending part when it is not of the
 * grammar above; *out is then all empty. */
int hz_l2plan_parse(const char *spec, hz_l2plan *out);

/* The ranges slot `slot` of layer l prefetches, given the device copies of the weights (`layers`,
 * one per layer of cfg). Writes at most HZ_L2PLAN_MAX (ptr, bytes) pairs, starts rounded up to 16
 * bytes, empty ones skipped; returns how many. */
uint32_t hz_l2plan_ranges(const hz_l2plan *plan, hz_l2slot slot, const hz_model_config *cfg,
                          const hz_layer_weights *layers, uint32_t l, const void **ptr, uint64_t *bytes);

#endif
