/* The forward pass on a cuda device: the same graph and rounding points as forward.c (doc/numerics.md),
 * run by the fused decode kernels of cuda/model/decode_ops.cuh and the cuda W4A16 executors, all on the
 * backend's compute queue. A decode step is 4 or 5 kernels per layer plus the experts (enqueue_step): the
 * residual norms run inside the GEMVs that consume them, q/k norm + RoPE + KV store inside the split
 * attention, the router's top-k and the lm_head's argmax as GEMV tails; the position and token reach
 * the kernels through device memory (g->dstep), never as launch arguments.
 *
 * Residency decides how a layer's routed experts are reached:
 *   full    (cache capacity == experts): the model holds one lease per layer on the published
 *           generation for its whole life, so rows cannot move or be reused, and keeps a device table
 *           [layer x expert] -> row address. The router tail writes the chosen rows straight into the
 *           executor's device argument array: no host round trip inside a step. The last-token step is
 *           therefore captured once per session as a CUDA graph (embedding .. argmax) and replayed,
 *           with the token and position set in its first node; if the capture fails the session runs
 *           the same kernels one by one and its stats say why.
 *   partial: per layer the top-k ids and weights come back to the host (a small D2H, counted under
 *           purpose ROUTING): the router stores them into pinned memory itself and then a tag word, which
 *           the host polls (wait_routing), or, with the next-layer prediction, HZ_GPU_ROUTE_MIRROR=0 or
 *           the routing in a kernel of its own (route_mirrored), by a copy and a compute-queue sync.
 *           Then the cache acquires the group (misses travel on the copy queue inside the acquire), the
 *           executor is enqueued on the leased rows and the lease is released with an event recorded
 *           on the compute queue after it. Eager, except with the hits on the device, where the step
 *           is captured as a graph too (HZ_GPU_PARTIAL_GRAPH; doc/architecture.md).
 *           The stored routing made OLMoE's decode at 63 and 30 of 64 experts resident 8-10% faster
 *           than the copy and sync (H200, 2026-11-30, doc/benchmarks.md, twenty-second round). With
 *           the router's store, the experts are queued ahead of the routing behind a gate the host
 *           opens once the rows are leased ("the experts ahead", below routed_partial): 2-4% more
 *           for OLMoE at 63 and 30 of 64, no difference for Qwen (twenty-third round). A gate
 *           whose group is resident in the generation the session holds during the forward passes
 *           on the device's own table of its rows ("the hits on the device", below): 4-9% more for
 *           OLMoE at 63 and 30 of 64, 1-3% for Qwen at 30 and 39 of 60 (twenty-fourth round).
 * A step ends with the argmax (4 bytes) back on the host; the logits stay on the device until
 * hz_gpu_logits_fetch (hz_session_logits, a non-greedy sampler). A greedy step does not compute them:
 * its argmax comes from the lm_head screen (lm_screen below), and hz_gpu_logits_fetch runs the lm_head
 * GEMV on the step's stored x when they are asked for, with the same bits.
 * A prompt of more than one token goes to the batched prefill of prefill_cuda.c (chunks of up to 512
 * tokens: cuBLAS GEMMs, batched norms/RoPE/attention, a tensor-core W4A16 kernel per expert group);
 * HZ_GPU_PREFILL=token keeps the token-by-token path through the decode step, which the tests compare
 * against. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cache/cache.h"
#include "exec/exec_cuda.h"
#include "model.h"
#include "forward_cuda.h"

#include "../../cuda/model/decode_screen.cuh"
#include "../../cuda/model/model_ops.cuh"
#include "../../cuda/w4a16.cuh"

/* ---------------------------------------------------------------------------------------------------
 * Model: weights upload, full-residency routing table
 * ------------------------------------------------------------------------------------------------- */

typedef struct wslot {
    const hz_f16 *host;
    const hz_f16 **dev;
    uint64_t elems;
} wslot;

/* Every non-routed tensor of the model with its element count; NULL tensors are skipped. */
static uint32_t weight_slots(hz_model *m, hz_gpu_model *g, wslot *out) {
    const hz_model_config *c = &m->cfg;
    const uint64_t H = c->hidden, V = c->vocab, QD = (uint64_t)c->heads * c->head_dim;
    const uint64_t KD = (uint64_t)c->kv_heads * c->head_dim, E = c->experts, S = c->shared_inter;
    uint32_t n = 0;
#define SLOT(field, count)                                                                                 \
    do {                                                                                                   \
        if (m->w.field) out[n++] = (wslot){m->w.field, &g->dw.field, (count)};                             \
    } while (0)
    SLOT(embed, V * H);
    SLOT(final_norm, H);
    if (m->w.lm_head != m->w.embed) SLOT(lm_head, V * H);
    for (uint32_t l = 0; l < c->layers; l++) {
        SLOT(layers[l].attn_norm, H);
        SLOT(layers[l].wq, QD * H);
        SLOT(layers[l].wk, KD * H);
        SLOT(layers[l].wv, KD * H);
        SLOT(layers[l].wo, H * QD);
        SLOT(layers[l].bq, QD);
        SLOT(layers[l].bk, KD);
        SLOT(layers[l].bv, KD);
        SLOT(layers[l].bo, H);
        SLOT(layers[l].q_norm, QD);
        SLOT(layers[l].k_norm, KD);
        SLOT(layers[l].ffn_norm, H);
        SLOT(layers[l].router, E * H);
        SLOT(layers[l].sh_gate, S * H);
        SLOT(layers[l].sh_up, S * H);
        SLOT(layers[l].sh_down, H * S);
        SLOT(layers[l].sh_router, H);
    }
#undef SLOT
    return n;
}

static int build_routing_table(hz_model *m, hz_gpu_model *g) {
    const uint32_t L = m->cfg.layers, E = m->cfg.experts;
    hz_backend *be = g->be;
    g->leases = hz_calloc(L, sizeof *g->leases);
    const void **host = hz_calloc((size_t)L * E, sizeof *host);
    uint32_t *ids = hz_calloc(E, sizeof *ids);
    int st = g->leases && host && ids ? HZ_OK : HZ_ENOMEM;
    for (uint32_t e = 0; ids && e < E; e++) ids[e] = e;
    for (uint32_t l = 0; l < L && !st; l++) {
        st = hz_generation_acquire(m->cache, l, ids, E, &g->leases[l]);
        if (st) {
            hz_error_prefix(st, "layer %u: leasing every expert for the device routing table", l);
            break;
        }
        for (uint32_t e = 0; e < E && !st; e++) {
            uint32_t row;
            st = hz_generation_row(g->leases[l], e, &row, &host[(size_t)l * E + e]);
        }
    }
    if (!st) st = be->ops->mem_alloc(be, (uint64_t)L * E * sizeof(void *), (void **)&g->table);
    if (!st)
        st = hz_backend_copy_h2d(be, HZ_QUEUE_COMPUTE, g->table, host, (uint64_t)L * E * sizeof(void *),
                                 HZ_PURPOSE_ROUTING);
    if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE); /* `host` is pageable and freed below */
    free(host);
    free(ids);
    return st;
}

void hz_gpu_model_destroy(hz_model *m) {
    hz_gpu_model *g = m->gpu;
    if (!g) return;
    /* Nothing of this model may still read the rows or the weights. */
    (void)g->be->ops->queue_sync(g->be, HZ_QUEUE_COMPUTE);
    if (g->leases)
        for (uint32_t l = 0; l < m->cfg.layers; l++)
            if (g->leases[l]) (void)hz_generation_release(g->leases[l], NULL);
    free(g->leases);
    free(g->dw.layers);
    if (g->table) g->be->ops->mem_free(g->be, (void *)g->table);
    if (g->lm_screen_mem) g->be->ops->mem_free(g->be, g->lm_screen_mem);
    if (g->weights) g->be->ops->mem_free(g->be, g->weights);
    free(g);
    m->gpu = NULL;
}

/* The decode kernels' requirements and launch shapes (device SM count, GEMV grid bound). */
static int decode_setup(hz_model *m, hz_gpu_model *g) {
    const hz_model_config *c = &m->cfg;
    if (!hz_decode_attention_supported(c->head_dim))
        return hz_error(HZ_EUNSUPPORTED, "model: head_dim %u: the cuda decode step needs a multiple of 8 up to 256",
                        c->head_dim);
    if (c->experts > 1024 || c->top_k > 64)
        return hz_error(HZ_EUNSUPPORTED, "model: %u experts top-%u: the cuda router takes at most 1024, top-64",
                        c->experts, c->top_k);
    uint32_t max_in = c->hidden, qd = c->heads * c->head_dim;
    if (qd > max_in) max_in = qd;
    if (c->shared_inter > max_in) max_in = c->shared_inter;
    int st = hz_decode_device_info(g->queue, max_in, &g->dev);
    return st ? hz_error_prefix(st, "model") : HZ_OK;
}

/* The lm_head screen (cuda/model/decode_screen.cuh): a greedy step reads an INT8 copy of the lm_head
 * rows and then only the FP16 rows that can hold the largest logit, instead of every FP16 row (OLMoE-1B-7B
 * shape, 206 MB per token; Qwen1.5-MoE-A2.7B, 622 MB), and picks the same token. It costs vocab x hidden
 * bytes (+ 12 per row) of device memory; without that memory, with HZ_MODEL_NO_LM_HEAD_SCREEN or
 * with HZ_GPU_LM_SCREEN=0 at model creation, every step reads the FP16 rows as before
 * (doc/architecture.md). */
static int lm_screen_setup(hz_model *m, hz_gpu_model *g) {
    const hz_model_config *c = &m->cfg;
    uint32_t on = 1;
    hz_env_u32("HZ_GPU_LM_SCREEN", 0, 1, &on);
    if (!on || !m->lm_head_screen || !hz_decode_screen_supported(c->hidden)) return HZ_OK;
    const uint64_t V = c->vocab, codes = hz_align_up(V * c->hidden, ALIGN), rows4 = hz_align_up(V * 4u, ALIGN);
    int st = g->be->ops->mem_alloc(g->be, codes + 3u * rows4, (void **)&g->lm_screen_mem);
    if (st == HZ_ENOMEM) {
        hz_log(HZ_LOG_INFO, "model: no device memory for the lm_head screen (%llu bytes): greedy steps read every "
                            "lm_head row: %s", (unsigned long long)(codes + 3u * rows4), hz_last_error_message());
        g->lm_screen_mem = NULL;
        return HZ_OK;
    }
    if (st) return hz_error_prefix(st, "model: lm_head screen");
    g->lm_q = (int8_t *)g->lm_screen_mem;
    g->lm_scale = (float *)(void *)(g->lm_screen_mem + codes);
    g->lm_coef = (float *)(void *)(g->lm_screen_mem + codes + rows4);
    g->lm_qnorm = (float *)(void *)(g->lm_screen_mem + codes + 2u * rows4);
    st = hz_decode_screen_prepare(g->dw.lm_head, c->vocab, c->hidden, g->lm_q, g->lm_scale, g->lm_coef, g->lm_qnorm,
                                  g->queue);
    if (!st) st = g->be->ops->queue_sync(g->be, HZ_QUEUE_COMPUTE);
    return st ? hz_error_prefix(st, "model: preparing the lm_head screen") : HZ_OK;
}

int hz_gpu_model_has_lm_screen(const hz_model *m) { return m->gpu && m->gpu->lm_screen_mem; }

int hz_gpu_model_create(hz_model *m) {
    const hz_model_config *c = &m->cfg;
    hz_gpu_model *g = hz_calloc(1, sizeof *g);
    if (!g) return HZ_ENOMEM;
    m->gpu = g;
    g->be = m->device->be;
    g->queue = g->be->ops->native_queue(g->be, HZ_QUEUE_COMPUTE);
    if (!g->queue) return hz_error(HZ_EDEVICE, "model: device %s has no native compute queue", g->be->name);
    g->dw.layers = hz_calloc(c->layers, sizeof *g->dw.layers);
    wslot *slots = hz_calloc(3u + 17u * (size_t)c->layers, sizeof *slots);
    if (!g->dw.layers || !slots) {
        free(slots);
        return HZ_ENOMEM;
    }
    const uint32_t n = weight_slots(m, g, slots);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += hz_align_up(slots[i].elems * sizeof(hz_f16), ALIGN);
    int st = g->be->ops->mem_alloc(g->be, total, (void **)&g->weights);
    uint64_t off = 0;
    for (uint32_t i = 0; i < n && !st; i++) {
        uint64_t bytes = slots[i].elems * sizeof(hz_f16);
        *slots[i].dev = (const hz_f16 *)(g->weights + off);
        st = hz_backend_copy_h2d(g->be, HZ_QUEUE_COMPUTE, g->weights + off, slots[i].host, bytes, HZ_PURPOSE_WEIGHTS);
        off += hz_align_up(bytes, ALIGN);
    }
    free(slots);
    if (!st && m->w.lm_head == m->w.embed) g->dw.lm_head = g->dw.embed;
    if (!st) st = g->be->ops->queue_sync(g->be, HZ_QUEUE_COMPUTE);
    if (st) return hz_error_prefix(st, "model: uploading %llu bytes of non-routed weights", (unsigned long long)total);
    st = decode_setup(m, g);
    if (st) return st;
    st = lm_screen_setup(m, g);
    if (st) return st;
    /* The routed experts' kernels (grouped executor), chosen once here: for a model without a shared
     * expert (nothing runs beside the routed experts), the two-pass kernels, whose down kernel leaves room on the multiprocessors
     * for the next layer's q/k/v GEMV to be placed and start its loads (OLMoE-1B-7B shape, full
     * residency, step at positions 32-96 / ~200 / ~1024, H200, 2026-11-30: 0.674 / 0.713 / 0.772 ms
     * fused, 0.667 / 0.704 / 0.770 two-pass); beside Qwen's shared down the fused kernel (1.355 / 1.440
     * / 1.507 against 1.401 / 1.485 / 1.527). doc/benchmarks.md, sixteenth and seventeenth rounds. */
    st = hz_exec_cuda_set_two_pass(m->exec, c->shared_inter == 0);
    if (st) return st;

    /* The device table needs one executor call per layer to cover the token's experts. */
    if (m->group_limit >= c->experts && c->top_k <= HZ_W4A16_MAX_EXPERTS) {
        g->full = 1;
        st = build_routing_table(m, g);
    }
    return st;
}

/* ---------------------------------------------------------------------------------------------------
 * Session: device KV cache and activations
 * ------------------------------------------------------------------------------------------------- */

static void session_destroy(hz_session *s) {
    hz_gpu_session *g = s->gpu;
    hz_backend *be = s->model->gpu->be;
    (void)be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    hz_gpu_prefill_destroy(s);
    for (int p = 0; p < 2; p++) {
        for (int b = 0; b < 2; b++) hz_decode_graph_destroy(g->graphs[b][p]);
        if (g->step_done[p]) be->ops->event_destroy(be, g->step_done[p]);
    }
    for (int p = 0; p < 2; p++)
        if (g->route_ev[p]) be->ops->event_destroy(be, g->route_ev[p]);
    if (g->graph_ev) be->ops->event_destroy(be, g->graph_ev);
    hz_decode_side_destroy(g->side);
    hz_event_destroy(g->done);
    if (g->act) be->ops->mem_free(be, g->act);
    if (g->kc) be->ops->mem_free(be, g->kc);
    if (g->vc) be->ops->mem_free(be, g->vc);
    if (g->pinned) be->ops->pinned_free(be, g->pinned);
    free(g->map);
    free(g->rows);
    free(g);
    s->gpu = NULL;
    s->logits = NULL; /* it pointed into the pinned block */
}

/* Points the session's current logits buffer and argmax slot (host and device address) at those of
 * position parity p: where the next queued lm_head writes, and where the caller's run reads. */
static void use_parity(hz_gpu_session *g, uint32_t p) {
    g->logits = g->logits_buf[p];
    g->xlm = g->xlm_buf[p];
    g->h_argmax = g->h_argmax_slot[p];
    g->d_argmax = g->d_argmax_slot[p];
}

/* The attention kernel's group count for the step at position pos (hz_gpu_session.step_groups). */
static uint32_t step_groups_at(const hz_gpu_session *g, uint32_t pos) {
    return g->attn_groups ? hz_decode_attention_groups(pos) : 1u;
}

/* The captured graph that runs the step at position pos. */
static hz_decode_graph *graph_at(const hz_gpu_session *g, uint32_t pos) {
    return g->graphs[step_groups_at(g, pos) - 1u][pos & 1u];
}

static uint64_t layout_act(hz_session *s, hz_gpu_session *g, uint8_t *base) {
    const hz_model_config *c = &s->model->cfg;
    const uint64_t H = c->hidden, QD = (uint64_t)c->heads * c->head_dim, KD = (uint64_t)c->kv_heads * c->head_dim;
    const uint64_t E = c->experts, K = c->top_k, S = c->shared_inter ? c->shared_inter : 1, V = c->vocab;
    uint64_t off = 0;
    g->h = hz_gpu_carve(base, &off, H * 2);
    g->xn = hz_gpu_carve(base, &off, H * 2);
    g->q = hz_gpu_carve(base, &off, QD * 2);
    g->k = hz_gpu_carve(base, &off, KD * 2);
    g->v = hz_gpu_carve(base, &off, KD * 2);
    g->att = hz_gpu_carve(base, &off, QD * 2);
    g->proj = hz_gpu_carve(base, &off, H * 2);
    g->rlog = hz_gpu_carve(base, &off, E * 2);
    g->shd = hz_gpu_carve(base, &off, H * 2);
    g->sgate = hz_gpu_carve(base, &off, 2);
    g->acc = hz_gpu_carve(base, &off, H * 4);
    g->shg = hz_gpu_carve(base, &off, S * 4);
    g->shu = hz_gpu_carve(base, &off, S * 4);
    g->logits_buf[0] = hz_gpu_carve(base, &off, V * 4);
    g->logits_buf[1] = hz_gpu_carve(base, &off, V * 4);
    g->rope = hz_gpu_carve(base, &off, (uint64_t)s->max_context * c->head_dim * 4);
    g->route = hz_gpu_carve(base, &off, 2 * K * 4);
    g->route_w = g->route ? (float *)(g->route + K) : NULL;
    g->rows_dev = hz_gpu_carve(base, &off, K * sizeof(void *));
    g->argmax = hz_gpu_carve(base, &off, 4);
    g->scratch = hz_gpu_carve(base, &off, g->scratch_bytes);
    g->h2 = hz_gpu_carve(base, &off, H * 2);
    g->dstep = hz_gpu_carve(base, &off, sizeof(hz_dstep));
    g->attn_part = hz_gpu_carve(base, &off, (uint64_t)c->heads * g->attn_splits * (c->head_dim + 2u) * 4u);
    g->attn_count = hz_gpu_carve(base, &off, (uint64_t)c->heads * 4u);
    g->tail = hz_gpu_carve(base, &off, hz_decode_tail_bytes(&s->model->gpu->dev));
    g->ready = hz_gpu_carve(base, &off, (uint64_t)c->layers * 2u * 4u);
    g->rtags = hz_gpu_carve(base, &off, (uint64_t)c->layers * c->experts * 4u);
    g->tab = hz_gpu_carve(base, &off, (uint64_t)c->layers * c->experts * sizeof(void *));
    g->xlm_buf[0] = hz_gpu_carve(base, &off, H * 2);
    g->xlm_buf[1] = hz_gpu_carve(base, &off, H * 2);
    g->lm_ub = hz_gpu_carve(base, &off, V * 4);
    g->lm_best = hz_gpu_carve(base, &off, 8);
    g->lm_summed = hz_gpu_carve(base, &off, 8);
    return off;
}

/* cos/sin of every position, computed exactly as forward.c's rope() does on the host, so both paths
 * rotate by bit-identical angles: row p = [cos(p * f_i) for i < D/2 | sin(p * f_i) for i < D/2]. */
static float *rope_table(const hz_model_config *c, uint32_t ctx) {
    const uint32_t D = c->head_dim, half = D / 2u;
    float *t = hz_malloc((size_t)ctx * D * sizeof(float));
    if (!t) return NULL;
    for (uint32_t i = 0; i < half; i++) {
        float inv_freq = 1.0f / powf(c->rope_theta, (float)(2u * i) / (float)D);
        for (uint32_t p = 0; p < ctx; p++) {
            float ang = (float)p * inv_freq;
            t[(size_t)p * D + i] = cosf(ang);
            t[(size_t)p * D + half + i] = sinf(ang);
        }
    }
    return t;
}

/* A session's switch, read once at its creation: on unless the variable is 0. Each is on by default
 * and exists for the comparisons in doc/benchmarks.md:
 * - HZ_GPU_SHARED_BESIDE: Qwen's shared down projection runs beside the routed experts, on a second
 *   stream, instead of after them on the compute queue.
 * - HZ_GPU_ROUTE_READY: with the router tail inside the router GEMV, the GEMV sets two per-layer flags
 *   to the step's epoch (block 0 once x and the zeroed accumulators are written, the routing warp once
 *   the routing is) and the fused expert kernel, placed early by programmatic dependent launch, starts
 *   on them instead of on the GEMV's end: on Qwen's shape that GEMV still streams the shared expert's
 *   46 MB of gate/up rows after the routing is known (Qwen1.5-MoE-A2.7B shape, step at positions 32-96
 *   / ~200 / ~1024, H200, 2026-11-30: 1.476 / 1.514 / 1.566 -> 1.453 / 1.498 / 1.543 ms).
 * - HZ_GPU_SIDE_EDGE: in a captured step, Qwen's shared down GEMV on the side stream gets a
 *   programmatic edge from the router GEMV (hz_decode_fork): it is placed while that GEMV runs and
 *   loads its first rows then, instead of being launched after its end (same shape and positions,
 *   two runs each: 1.449-1.459 / 1.494-1.502 / 1.543-1.544 ms with the full edge, 1.425-1.427 /
 *   1.477-1.479 / 1.538 with this one; that GEMV launched with programmatic dependent launch on its
 *   own stream instead: 1.499-1.501 / 1.550-1.551 / 1.601-1.602).
 * - HZ_GPU_ROUTER_ALONE: where the router tail runs inside the router GEMV, each router row gets a warp
 *   of its own (hz_dgemv_args.router_alone).
 * - HZ_GPU_ROUTE_TAGS: there, the router rows hand their logits to the routing warp through per-layer
 *   tagged words (hz_dgemv_args.tags) instead of a ticket.
 * - HZ_GPU_SPECULATE: the step queued ahead (hz_gpu_session.speculate).
 * - HZ_GPU_ROUTE_CLUSTER: where the router tail leaves the router GEMV, it runs in that GEMV's thread-
 *   block cluster rather than in a kernel of its own (route_placement).
 * - HZ_GPU_RES_IN_DOWN: at full residency without a shared expert, the two-pass down kernel stores
 *   h = fp16(h_in + fp16(acc)) and the next q/k/v GEMV reads h alone (hz_exec_cuda_hands_h).
 * - HZ_GPU_EXPERTS_AHEAD: at partial residency, the experts queued ahead of the routing behind a gate.
 * - HZ_GPU_DEVICE_HITS: there, the gates resolve all-hit groups from the device's table of rows.
 * - HZ_GPU_PARTIAL_GRAPH: with those hits, the partial-residency step is captured as a graph.
 * - HZ_GPU_GATE_IN_ROUTER: the experts' gate run by the router's routing warp, not as a kernel.
 * - HZ_GPU_ROUTE_MIRROR: at partial residency, the router stores the routing into pinned memory itself
 *   (route_mirrored); off, a copy and a compute-queue sync bring it back.
 * - HZ_GPU_ATTN_GROUPS: the attention kernel's group count follows the position (step_groups_at); off,
 *   one group at every position. Logits differ in their last bits (the groups' partial sums are
 *   merged in another order), within the same bound against the CPU path (test_model_gpu).
 * All logits are bit-identical either way (test_model_gpu), except with HZ_GPU_ATTN_GROUPS. */
static int env_on(const char *name) {
    uint32_t on = 1;
    hz_env_u32(name, 0, 1, &on);
    return (int)on;
}

/* HZ_GPU_ROUTE_KERNEL, read once per session (route_placement): -1 unset or unknown, 0, 1 for "all". */
static int route_kernel_env(void) {
    const char *env = getenv("HZ_GPU_ROUTE_KERNEL");
    if (env && strcmp(env, "0") == 0) return 0;
    if (env && strcmp(env, "all") == 0) return 1;
    return -1;
}

static int session_create(hz_session *s) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_backend *be = m->gpu->be;
    hz_gpu_session *g = hz_calloc(1, sizeof *g);
    if (!g) return HZ_ENOMEM;
    s->gpu = g;
    g->scratch_bytes = hz_exec_cuda_scratch_bytes(m->layout);
    g->attn_splits = hz_decode_attention_splits(&m->gpu->dev, c->heads, s->max_context);
    g->use_graph = 1;
    g->use_pdl = 1;
    g->route_kernel = route_kernel_env();
    g->route_cluster = env_on("HZ_GPU_ROUTE_CLUSTER");
    g->speculate = env_on("HZ_GPU_SPECULATE");
    g->route_ready = env_on("HZ_GPU_ROUTE_READY");
    g->attn_groups = env_on("HZ_GPU_ATTN_GROUPS");
    const uint64_t act_bytes = layout_act(s, g, NULL);
    const uint64_t kv_bytes = (uint64_t)c->layers * s->max_context * c->kv_heads * c->head_dim * sizeof(hz_f16);
    const uint32_t K = c->top_k, rows_n = m->group_limit > K ? m->group_limit : K;
    /* pinned: [K ids | K weights (the routing copied back) | 2 argmax slots | the gate word | the gate's
     * late word | the gates' waited count | K gate rows] then, 64-byte aligned, the logits, the staging
     * of the device's table of rows ([layers x experts]) and the routing slots the routers store into
     * ([layers], slot_bytes each) */
    const uint64_t gate_at = 2u * K * 4u + 8u;
    const uint64_t pinned_head = hz_align_up(gate_at + 24u + (uint64_t)K * 8u, 64);
    const uint64_t stage_at = hz_align_up(pinned_head + (uint64_t)c->vocab * 4u, 64);
    const uint64_t slots_at = stage_at + (uint64_t)c->layers * c->experts * sizeof(void *);
    g->slot_bytes = hz_align_up(2u * K * 4u + 8u, 64);
    const uint64_t changes_at = slots_at + c->layers * g->slot_bytes;
    const uint64_t summed_at = hz_align_up(changes_at + (1u + (uint64_t)c->layers) * 4u, 8);
    const uint64_t pinned_bytes = summed_at + 8u;
    g->rows = hz_calloc(rows_n, sizeof *g->rows);
    g->map = hz_calloc((size_t)c->layers * c->experts, sizeof *g->map);
    if (!g->rows || !g->map) return HZ_ENOMEM;
    int st = be->ops->mem_alloc(be, act_bytes, (void **)&g->act);
    if (!st) st = be->ops->mem_alloc(be, kv_bytes, (void **)&g->kc);
    if (!st) st = be->ops->mem_alloc(be, kv_bytes, (void **)&g->vc);
    if (!st) st = be->ops->pinned_alloc(be, pinned_bytes, (void **)&g->pinned);
    if (!st) st = hz_event_create(m->device, &g->done);
    for (int p = 0; p < 2 && !st; p++) st = be->ops->event_create(be, &g->step_done[p]);
    for (int p = 0; p < 2 && !st; p++) st = be->ops->event_create(be, &g->route_ev[p]);
    if (!st) st = be->ops->event_create(be, &g->graph_ev);
    if (!st && c->shared_inter && env_on("HZ_GPU_SHARED_BESIDE")) st = hz_decode_side_create(m->gpu->queue, &g->side);
    g->side_edge = env_on("HZ_GPU_SIDE_EDGE");
    g->router_alone = env_on("HZ_GPU_ROUTER_ALONE");
    g->route_tags = env_on("HZ_GPU_ROUTE_TAGS");
    g->res_in_down = env_on("HZ_GPU_RES_IN_DOWN");
    if (st) return hz_error_prefix(st, "session: device state (%llu + 2 x %llu bytes)",
                                   (unsigned long long)act_bytes, (unsigned long long)kv_bytes);
    layout_act(s, g, g->act);
    g->h_ids = (uint32_t *)g->pinned;
    g->h_w = (float *)(g->pinned + (size_t)K * 4u);
    g->h_argmax_slot[0] = (int32_t *)(g->pinned + (size_t)2u * K * 4u);
    g->h_argmax_slot[1] = g->h_argmax_slot[0] + 1;
    for (int p = 0; p < 2 && !st; p++)
        if (hz_decode_host_pointer(g->h_argmax_slot[p], (void **)&g->d_argmax_slot[p]) != HZ_OK) {
            hz_log(HZ_LOG_INFO, "decode: the argmax comes back by a copy after each step: %s", hz_last_error_message());
            g->d_argmax_slot[0] = g->d_argmax_slot[1] = NULL;
            break;
        }
    g->slots = g->pinned + slots_at;
    memset(g->slots, 0, c->layers * g->slot_bytes);
    g->route_mirror = env_on("HZ_GPU_ROUTE_MIRROR");
    if (g->route_mirror && hz_decode_host_pointer(g->slots, (void **)&g->d_slots) != HZ_OK) {
        hz_log(HZ_LOG_INFO, "decode: the routing comes back by a copy after each router: %s", hz_last_error_message());
        g->route_mirror = 0;
    }
    /* The gate's words, and its rows pointing into the cache's arena until a lease gives it others. */
    g->h_go = (volatile uint64_t *)(void *)(g->pinned + gate_at);
    g->h_gate_late = g->h_go + 1;
    g->h_waited = g->h_go + 2;
    g->h_gate_rows = g->h_go + 3;
    *g->h_go = *g->h_gate_late = *g->h_waited = 0;
    g->tab_stage = (const void **)(void *)(g->pinned + stage_at);
    g->h_changes = (uint32_t *)(void *)(g->pinned + changes_at);
    g->h_changes[0] = 0;
    g->h_lm_summed = (volatile unsigned long long *)(void *)(g->pinned + summed_at);
    *g->h_lm_summed = 0;
    if (hz_decode_host_pointer((void *)g->h_lm_summed, (void **)&g->d_lm_summed) != HZ_OK) g->d_lm_summed = NULL;
    for (uint32_t i = 0; i < K; i++) g->h_gate_rows[i] = (uint64_t)(uintptr_t)hz_cache_first_row(m->cache);
    g->ahead_on = g->route_mirror && !m->gpu->full && env_on("HZ_GPU_EXPERTS_AHEAD");
    if (g->ahead_on && (hz_decode_host_pointer((void *)g->h_go, (void **)&g->d_go) != HZ_OK ||
                        hz_decode_host_pointer((void *)g->h_gate_late, (void **)&g->d_gate_late) != HZ_OK ||
                        hz_decode_host_pointer((void *)g->h_gate_rows, (void **)&g->d_gate_rows) != HZ_OK)) {
        hz_log(HZ_LOG_INFO, "decode: the experts wait for the host's lease before they are queued: %s",
               hz_last_error_message());
        g->ahead_on = 0;
    }
    g->dev_hits = g->ahead_on && env_on("HZ_GPU_DEVICE_HITS");
    g->partial_graph = env_on("HZ_GPU_PARTIAL_GRAPH");
    g->gate_in_router = env_on("HZ_GPU_GATE_IN_ROUTER");
    if (g->dev_hits && (hz_decode_host_pointer((void *)g->h_waited, (void **)&g->d_waited) != HZ_OK ||
                        hz_decode_host_pointer(g->h_changes, (void **)&g->d_changes) != HZ_OK ||
                        hz_decode_host_pointer((void *)g->tab_stage, (void **)&g->d_tab_stage) != HZ_OK)) {
        hz_log(HZ_LOG_INFO, "decode: every gate waits for the host: %s", hz_last_error_message());
        g->dev_hits = 0;
    }
    use_parity(g, 0);
    s->logits = (float *)(g->pinned + pinned_head);
    memset(s->logits, 0, (size_t)c->vocab * 4u);

    float *rope = rope_table(c, s->max_context);
    if (!rope) return HZ_ENOMEM;
    /* Zero: the attention and GEMV-tail counters must start at 0 (they return there after each use). */
    st = be->ops->memset(be, HZ_QUEUE_COMPUTE, g->act, 0, act_bytes);
    if (!st)
        st = hz_backend_copy_h2d(be, HZ_QUEUE_COMPUTE, g->rope, rope, (uint64_t)s->max_context * c->head_dim * 4u,
                                 HZ_PURPOSE_WEIGHTS);
    if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    free(rope);
    return st;
}

/* The cache's turn (hz_cache_run_lock) for a session of `m` at partial residency: its forwards, and
 * its creation and destruction. Returns the cache taken, NULL at full residency (nothing to take). */
static hz_cache *turn_take(const hz_model *m) {
    if (m->gpu->full) return NULL;
    hz_cache_run_lock(m->cache);
    return m->cache;
}

static void turn_give(hz_cache *c) {
    if (c) hz_cache_run_unlock(c);
}

/* At partial residency a session's device memory is allocated and freed in the cache's turn, as its
 * forwards are run: a CUDA free waits for the whole device, so a free in another thread while a gate
 * waits for its host can hold up that host's next CUDA call until the gate gives up after 10 s.
 * Without the turn the sessions-in-threads test on cuda:0 failed that way in 3 runs of 69 (H200,
 * 2026-11-30; the free is the explanation that fits, doc/benchmarks.md). */
int hz_gpu_session_create(hz_session *s) {
    hz_cache *c = turn_take(s->model);
    int st = session_create(s);
    turn_give(c);
    return st;
}

void hz_gpu_session_destroy(hz_session *s) {
    if (!s->gpu) return;
    hz_cache *c = turn_take(s->model);
    session_destroy(s);
    turn_give(c);
}

/* ---------------------------------------------------------------------------------------------------
 * The step
 * ------------------------------------------------------------------------------------------------- */

/* Speculative next-layer prefetch at partial residency (helpers after routed_partial). */
#define HZ_GPU_PREDICT_MAX 64u /* the route kernel's top-k limit */
static uint32_t prediction_count(const hz_model *m, uint32_t l);
static int enqueue_prediction(hz_session *s, uint32_t l);
static int read_prediction(hz_session *s, uint32_t *ids, uint32_t n);

/* Layer l's slot of the routing the router stores (hz_gpu_session.slots): ids, weights, tag. */
static uint32_t *slot_ids(const hz_gpu_session *g, uint32_t l) { return (uint32_t *)(void *)(g->slots + l * g->slot_bytes); }
static float *slot_w(const hz_gpu_session *g, uint32_t l, uint32_t K) { return (float *)(void *)(slot_ids(g, l) + K); }
static uint64_t slot_tag_at(uint32_t K) { return hz_align_up(2u * K * 4u, 8); }
static volatile uint64_t *slot_tag(const hz_gpu_session *g, uint32_t l, uint32_t K) {
    return (volatile uint64_t *)(void *)(g->slots + l * g->slot_bytes + slot_tag_at(K));
}

/* Waits until the router has stored layer l's selection into its slot and then `tag` into the slot's
 * tag word (hz_dgemv_args.host_*). The word is polled; every 256 polls `ev`, recorded right after the
 * router (enqueue_layers), is asked whether the queue got past it: if it did and the tag is still not
 * there, or the queue failed, the wait ends with an error instead of spinning on. The bytes count as one
 * ROUTING D2H, as the copy they replace. */
static int wait_routing(hz_session *s, uint32_t l, uint64_t tag, hz_bevent *ev) {
    hz_gpu_session *g = s->gpu;
    hz_backend *be = s->model->gpu->be;
    const uint32_t K = s->model->cfg.top_k;
    volatile uint64_t *word = slot_tag(g, l, K);
    int st = HZ_OK;
    for (uint32_t i = 1;; i++) {
        if (*word == tag) break;
        if ((i & 255u) == 0) {
            st = be->ops->event_query(be, ev);
            if (st == HZ_OK && *word != tag)
                return hz_error(HZ_EDEVICE, "layer %u: the router ended without storing the routing (tag %llu, found "
                                            "%llu; gate word %llu, gate %llu %s, late %llu)",
                                l, (unsigned long long)tag, (unsigned long long)*word,
                                (unsigned long long)*g->h_go, (unsigned long long)g->gate_seq,
                                *g->h_go != g->gate_seq ? "waiting" : "open", (unsigned long long)*g->h_gate_late);
            if (st != HZ_OK && st != HZ_EBUSY) return hz_error_prefix(st, "layer %u: waiting for the routing", l);
        }
    }
    atomic_thread_fence(memory_order_acquire); /* the ids and weights were stored before the tag */
    hz_backend_count_d2h_store(be, HZ_PURPOSE_ROUTING, 2u * K * 4u);
    g->route_stored++;
    return HZ_OK;
}

/* Routed experts of layer l at partial residency: ids back to the host, leases, executor, release. With
 * the cache's HZ_PREFETCH_NEXT_LAYER, layer l+1's router also runs on this layer's MoE input before the
 * ids come back (one sync brings both), and the predicted experts are handed to the cache right after
 * this layer's executor is queued, so their copies overlap its compute. */
static int routed_partial(hz_session *s, uint32_t l, uint64_t tag) {
    hz_model *m = s->model;
    hz_gpu_model *gm = m->gpu;
    hz_gpu_session *g = s->gpu;
    hz_backend *be = gm->be;
    const uint32_t K = m->cfg.top_k;
    const uint32_t npred = prediction_count(m, l);
    uint32_t pred[HZ_GPU_PREDICT_MAX];
    int st = HZ_OK;
    const uint32_t *h_ids = tag ? slot_ids(g, l) : g->h_ids;
    const float *h_w = tag ? slot_w(g, l, K) : g->h_w;
    if (tag) { /* the router stores the routing into layer l's slot itself (route_mirrored: no prediction) */
        st = wait_routing(s, l, tag, g->route_ev[l & 1u]);
        if (st) return st;
    } else {
        st = npred ? enqueue_prediction(s, l) : HZ_OK;
        if (!st) st = hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, g->h_ids, g->route, 2u * K * 4u, HZ_PURPOSE_ROUTING);
        if (!st && npred) st = read_prediction(s, pred, npred);
        if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
        if (st) return hz_error_prefix(st, "layer %u: reading the routing back", l);
    }
    /* The router kernel wrote the ids ascending and distinct: the groups are consecutive slices. */
    for (uint32_t g0 = 0; g0 < K; g0 += m->group_limit) {
        const uint32_t gn = K - g0 < m->group_limit ? K - g0 : m->group_limit;
        const uint32_t *ids = h_ids + g0;
        hz_generation *lease = NULL;
        st = hz_model_lease_group(m, l, ids, gn, &lease, g->rows);
        if (st) return st;
        hz_moe_call call = {
            .layout = m->layout,
            .n_tokens = 1,
            .x = g->xn,
            .top_k = K,
            .topk_ids = h_ids,
            .topk_w = h_w,
            .n_group = gn,
            .group_ids = ids,
            .rows = g->rows,
            .acc = g->acc,
            .group_w = g->route_w + g0,
            .scratch = g->scratch,
            .scratch_bytes = g->scratch_bytes,
            .queue = gm->queue,
        };
        st = m->exec->ops->moe(m->exec, &call);
        /* The rows are read by queued kernels: the lease ends with the event recorded after them. */
        st = hz_model_lease_end(be, l, lease, g->done, st);
        if (st) return st;
    }
    /* Advisory: the cache counts what it does with the request; a FAULTED cache shows at the next
     * acquire. The prediction cannot change a result, only which copies happen when. */
    if (npred) (void)hz_cache_prefetch(m->cache, l + 1, pred, npred);
    return HZ_OK;
}

/* ---- the experts ahead (partial residency) ----------------------------------------------------------
 * Without it, a layer's experts are enqueued only once the host has read the routing and leased the
 * rows, and the next layer's kernels after them: the device idles for the round trip and for every
 * launch after it. With it, enqueue_step queues layer l's experts behind a gate (hz_decode_gate) right
 * after the router, then layer l+1's kernels up to its router, and only then does the host serve layer
 * l (routed_ahead): it reads the routing the router stored, leases the group, writes the rows for the
 * gate and opens it. The rule that keeps this from waiting on itself: while a gate waits, the host
 * waits only for things queued before that gate. The lease of layer l therefore ends with an event
 * recorded behind layer l+1's router, before the next gate, and a session that fails anywhere opens its
 * waiting gate on the rows of an earlier gate before it returns (the step then fails). Sessions sharing
 * a cache run their partial-residency forwards one at a time (hz_forward_gpu), so that no acquire waits
 * for another session's consumer queued behind a gate. */

/* Whether this step queues the experts ahead: on for the session, armed (below), the router stores the
 * routing (route_mirrored: partial residency, no next-layer prediction), and one group per layer (the
 * capacity holds the top-k).
 * Armed: once one last-token step of the session has run without gates. CUDA loads a kernel's code at
 * its first launch (lazy loading, the default since CUDA 12.2), and that load waits for the kernels
 * already running: a first launch behind a waiting gate therefore waited for the gate, which waited
 * for this host (H200, 2026-11-30: hz-bench's first step stalled until the gate's 10 s ran out). The
 * kernels of a step do not change with the position, so after one whole step every one is loaded. */
static int experts_ahead(const hz_session *s, int mirror) {
    /* The gate and the executor call behind it take at most HZ_W4A16_MAX_EXPERTS rows: a larger top-k
     * (the API allows 64) runs the experts after the routing, in several executor calls. */
    return s->gpu->ahead_on && s->gpu->ahead_armed && mirror && s->model->cfg.top_k <= s->model->group_limit &&
           s->model->cfg.top_k <= HZ_W4A16_MAX_EXPERTS;
}

/* Gate and tag numbers at partial residency: (epoch << 16) | (layer + 1), the epoch being the step's
 * (hz_gpu_session.epoch); the kernels read the epoch from the device, so a captured step numbers its
 * gates and routings like an eager one. */
static uint64_t step_number(const hz_gpu_session *g, uint32_t low) { return (uint64_t)g->epoch << 16 | low; }

/* Opens the waiting gate, if any (the word still holds an earlier gate's number): its experts read the
 * rows in h_gate_rows, written before. */
static void gate_open(hz_gpu_session *g) {
    if (*g->h_go == g->gate_seq) return;
    atomic_thread_fence(memory_order_release);
    *g->h_go = g->gate_seq;
}

/* After a failure: every gate of the step still to come passes (on the rows of an earlier gate), none
 * copying table changes, so that nothing queued waits for this host. */
static void gates_open_all(hz_gpu_session *g) {
    if (g->h_changes) g->h_changes[0] = 0;
    g->gate_seq = step_number(g, 0xffffu);
    gate_open(g);
}

/* ---- the hits on the device (partial residency, with the experts ahead) ----------------------------
 * Most layers of a step find every expert they route to resident, and then the host's round trip (the
 * tag it polls, the lease, the word the gate polls) is all the gate waits for. So each gate first looks
 * its ids up in a device table of the layer's rows (tab) and passes at once when every one has a row;
 * the host serves only the gates of groups that miss. The host keeps the same table (map), so it knows
 * which gates wait for it; it leases every group as before (the cache's LRU and counters do not change).
 * What keeps the table's rows from being reused while a gate may pass on them: during a forward the
 * session holds a lease on a generation that maps them all (held, hz_cache_hold), and the table holds
 * that generation's rows. On a miss at layer l the host lets go of the held lease before it acquires,
 * since the acquire may need spare rows that only its release frees. No consumer event is needed
 * there: the host has seen layer l's router store its tag, so every kernel queued before that router,
 * and with it every read of the table's rows in this step, has ended (each kernel of the chain waits
 * for the one before it to end before it stores anything), this layer's experts wait at their gate,
 * and nothing behind them has started. After the acquire it holds the generation then current, and the
 * gate that waits copies the layers whose rows changed into the table before it lets the experts run
 * (hz_dgate_args.changes): every later gate reads them. The group's own lease is released at once when
 * the held generation maps the same rows (it always does unless another thread published in between);
 * otherwise once the next router's tag is seen (deferred). No event is recorded in the middle of a
 * step, which lets the step be captured as a graph. At a forward's start the layers changed since the
 * last one are copied by the queue ahead of the step's first kernel. The forward ends with the queue
 * drained and every lease released. */

/* Holds the current generation if the session does not, and brings map up to it: at a forward's
 * start (at_miss 0) the changed layers are copied into tab by the queue, ahead of the step queued
 * next; at a miss (at_miss 1) they are listed in h_changes for the gate that waits. The staging is
 * rewritten only when nothing can still read it: before a step's first kernel (the last forward ended
 * drained), or at a miss, where the host has seen this layer's router, which ran after the copy or the
 * gate that read the staging last. */
static int hold_sync(hz_session *s, int at_miss) {
    hz_model *m = s->model;
    hz_gpu_session *g = s->gpu;
    hz_backend *be = m->gpu->be;
    const uint32_t L = m->cfg.layers, E = m->cfg.experts;
    int st = HZ_OK;
    if (!g->held) {
        st = hz_cache_hold(m->cache, &g->held);
        if (st) return hz_error_prefix(st, "holding the rows of the device's expert table");
    }
    uint32_t lo = L, hi = 0, n = 0;
    for (uint32_t l = 0; l < L && !st; l++) {
        const void **stage = g->tab_stage + (size_t)l * E, **mine = g->map + (size_t)l * E;
        st = hz_generation_layer_rows(g->held, l, stage);
        if (st || memcmp(stage, mine, (size_t)E * sizeof *mine) == 0) continue;
        memcpy(mine, stage, (size_t)E * sizeof *mine);
        if (l < lo) lo = l;
        hi = l;
        g->h_changes[1 + n++] = l;
    }
    if (!st && at_miss) {
        g->h_changes[0] = n;
    } else if (!st && lo <= hi) {
        st = hz_backend_copy_h2d(be, HZ_QUEUE_COMPUTE, g->tab + (size_t)lo * E, g->tab_stage + (size_t)lo * E,
                                 (uint64_t)(hi - lo + 1u) * E * sizeof(void *), HZ_PURPOSE_ROUTING);
    }
    if (!st) g->tab_copies += n;
    /* map may now describe rows the table never gets: nothing may pass on the table any more. */
    if (st) g->dev_hits = 0;
    return st ? hz_error_prefix(st, "copying the rows of the device's expert table") : HZ_OK;
}

/* Releases the group lease left for later, if any (no consumer: see above). */
static int deferred_end(hz_gpu_session *g) {
    if (!g->deferred) return HZ_OK;
    int st = hz_generation_release(g->deferred, NULL);
    g->deferred = NULL;
    return st ? hz_error_prefix(st, "releasing a routed-expert lease") : HZ_OK;
}

/* At the end of a forward (status st): the leases released once nothing can read their rows. After a
 * failure the queue is drained first, and the host's count of waiting gates is set to the device's,
 * since a failure may open a gate the host never served. The failure may also have left the device's
 * table behind the host's copy of it (a gate that gave up before the host's miss was served never
 * copied that layer's new rows; a gate opened by gates_open_all copies none): the copy is marked unlike
 * any generation, so that the next forward's hold_sync copies every layer to the table before its
 * first kernel. A late gate of this forward was reported by its failure or no longer matters: its flag
 * is cleared, so that it does not fail the next, healthy step. */
static int hold_end(hz_session *s, int st) {
    hz_gpu_session *g = s->gpu;
    if (st) {
        (void)s->model->gpu->be->ops->queue_sync(s->model->gpu->be, HZ_QUEUE_COMPUTE);
        g->gates_waited = *g->h_waited;
        *g->h_gate_late = 0;
        if (g->map) memset(g->map, 0xff, (size_t)s->model->cfg.layers * s->model->cfg.experts * sizeof *g->map);
    }
    int rst = deferred_end(g);
    if (g->held) {
        int hst = hz_generation_release(g->held, NULL);
        g->held = NULL;
        if (!rst && hst) rst = hz_error_prefix(hst, "releasing the rows of the device's expert table");
    }
    return st ? st : rst;
}

/* The arguments of layer l's gate. */
static hz_dgate_args gate_args(const hz_session *s, uint32_t l) {
    const hz_model *m = s->model;
    const hz_gpu_session *g = s->gpu;
    const uint32_t K = m->cfg.top_k, E = m->cfg.experts;
    hz_dgate_args ga = {.go = g->d_go, .want = l + 1u, .step = g->dstep, .rows_host = g->d_gate_rows,
                        .rows_dev = g->rows_dev, .n = K, .late = g->d_gate_late};
    if (g->dev_hits) {
        ga.table = g->tab + (size_t)l * E;
        ga.experts = E;
        ga.ids = g->route;
        ga.waited = g->d_waited;
        ga.changes = g->d_changes;
        ga.stage = g->d_tab_stage;
        ga.table_all = g->tab;
        ga.layers = m->cfg.layers;
    }
    return ga;
}

/* Layer l's experts behind a gate: the gate (unless the router runs it, in_router), then the executor
 * on the device rows it fills. */
static int enqueue_gated(hz_session *s, uint32_t l, const hz_klaunch *kl, int in_router) {
    hz_model *m = s->model;
    hz_gpu_session *g = s->gpu;
    const uint32_t K = m->cfg.top_k;
    if (!in_router) {
        const hz_dgate_args ga = gate_args(s, l);
        int st = hz_decode_gate(&ga, kl);
        if (st) return st;
    }
    if (!g->capturing) g->gate_seq = step_number(g, l + 1u);
    return hz_exec_cuda_moe_device(m->exec, K, g->rows_dev, g->route_w, g->xn, g->acc, g->scratch, g->scratch_bytes,
                                   NULL, NULL, NULL, NULL, kl->stream);
}

/* Serves the gate of layer l, whose router stored the routing with its tag (ev: recorded after the
 * router, or after the step's graph): the group leased (misses loaded inside), its rows written, the
 * gate opened. A gate that finds every row in the device's table has passed already; opening it
 * changes nothing then. On a miss the held generation is given up before the acquire and the current
 * one held after it (the hits on the device, above). Without the hits on the device the lease ends
 * with an event recorded now (behind the next layer's router, or the step's last kernel). */
static int routed_ahead(hz_session *s, uint32_t l, hz_bevent *ev) {
    hz_model *m = s->model;
    hz_gpu_session *g = s->gpu;
    const uint32_t K = m->cfg.top_k, E = m->cfg.experts;
    int st = wait_routing(s, l, step_number(g, l + 1u), ev);
    if (st) return st;
    /* Layer l's router has run: so have the experts of every layer before it */
    st = deferred_end(g);
    if (st) return st;
    const uint32_t *ids = slot_ids(g, l);
    const void **mine = g->map + (size_t)l * E;
    int hit = g->dev_hits;
    for (uint32_t i = 0; i < K && hit; i++) hit = ids[i] < E && mine[ids[i]] != NULL;
    if (g->dev_hits && !hit && g->held) {
        st = hz_generation_release(g->held, NULL); /* no consumer left: see above */
        g->held = NULL;
        if (st) return hz_error_prefix(st, "layer %u: releasing the rows of the device's expert table", l);
    }
    hz_generation *lease = NULL;
    st = hz_model_lease_group(m, l, ids, K, &lease, g->rows);
    if (!st && g->dev_hits && !hit) st = hold_sync(s, 1); /* the gate copies the changes */
    if (st) {
        if (lease) (void)hz_generation_release(lease, NULL); /* nothing has read its rows yet */
        return st;
    }
    for (uint32_t i = 0; i < K; i++) g->h_gate_rows[i] = (uint64_t)(uintptr_t)g->rows[i];
    g->gate_seq = step_number(g, l + 1u);
    gate_open(g);
    g->experts_gated++;
    if (hit) g->gate_hits++;
    else if (g->dev_hits) g->gates_waited++;
    if (!g->dev_hits) return hz_model_lease_end(m->gpu->be, l, lease, g->done, HZ_OK);
    /* On a hit the experts read the table's rows, which the held generation keeps: the lease only
     * counted. On a miss they read the lease's rows, which the generation held since keeps too, unless
     * another thread published between the acquire and the hold. */
    int covered = hit || g->held != NULL;
    for (uint32_t i = 0; i < K && covered && !hit; i++) covered = mine[ids[i]] == (const void *)g->rows[i];
    if (covered) {
        st = hz_generation_release(lease, NULL);
        return st ? hz_error_prefix(st, "layer %u: releasing a routed-expert lease", l) : HZ_OK;
    }
    g->deferred = lease;
    return HZ_OK;
}

/* After a step: a gate that waited about 10 s for the host let its experts read stale rows; and the
 * gates that waited on the device must be those the host's copy of the table said would. */
static int gate_check(hz_gpu_session *g) {
    const uint64_t late = *g->h_gate_late;
    if (late) {
        *g->h_gate_late = 0;
        return hz_error(HZ_EDEVICE, "the routed experts behind gate %llu ran on rows that were not leased: the host "
                                    "did not open that gate within about 10 s",
                        (unsigned long long)late);
    }
    const uint64_t waited = *g->h_waited;
    if (g->dev_hits && waited != g->gates_waited) {
        const uint64_t expected = g->gates_waited;
        g->gates_waited = waited;
        return hz_error(HZ_EDEVICE, "the device's table of expert rows and the host's copy disagreed: %llu gates "
                                    "waited for the host, %llu expected",
                        (unsigned long long)waited, (unsigned long long)expected);
    }
    return HZ_OK;
}

/* How many predicted ids layer l hands to the cache: 0 without prefetch or a next layer, or while the
 * cache's gate declines predictions (then no router GEMV is queued for it either); else top-k, at most
 * one group (the cache's capacity) and the route kernel's limit. Called once per layer. */
static uint32_t prediction_count(const hz_model *m, uint32_t l) {
    if (hz_cache_prefetch_mode(m->cache) != HZ_PREFETCH_NEXT_LAYER || l + 1 >= m->cfg.layers) return 0;
    const uint32_t K = m->cfg.top_k;
    if (K == 0 || K > HZ_GPU_PREDICT_MAX) return 0;
    if (!hz_cache_prefetch_admit(m->cache)) return 0;
    return K < m->group_limit ? K : m->group_limit;
}

/* Layer l+1's router and top-k on layer l's MoE input, on the compute queue. Buffers: the FP16 logits
 * go to g->rlog, which layer l's route kernel (queued before) has read and layer l+1's router will
 * rewrite; ids and FP32 weights go to g->rows_dev ([K] device pointers = 8K bytes), which the route
 * kernel writes only at full residency, where this path does not run. */
static int enqueue_prediction(hz_session *s, uint32_t l) {
    hz_model *m = s->model;
    hz_gpu_session *g = s->gpu;
    const hz_model_config *c = &m->cfg;
    void *q = m->gpu->queue;
    hz_mgemv_seg router = {m->gpu->dw.layers[l + 1].router, NULL, g->rlog, c->experts, 0};
    int st = hz_model_gemv(g->xn, c->hidden, &router, 1, q);
    uint32_t *ids = (uint32_t *)(void *)g->rows_dev;
    if (!st)
        st = hz_model_route(g->rlog, c->experts, c->top_k, c->norm_topk_prob, ids, (float *)(void *)(ids + c->top_k),
                            NULL, NULL, 0, q);
    if (st) return hz_error_prefix(st, "layer %u: predicting layer %u's experts", l, l + 1);
    return HZ_OK;
}

/* Where a layer's router tail (softmax + top-k + the device row table) runs.
 * - ROUTE_IN_GEMV: inside the router GEMV. The GEMV must learn which warp wrote the last router row:
 *   a fence and a gpu-scope atomic per row (or tagged words), and the tail holds the grid open. With
 *   Qwen's shared-expert rows in the same GEMV the tail runs while they stream: Qwen's default.
 * - ROUTE_KERNEL: in its own one-block kernel after the router GEMV (hz_model_route), whose completion
 *   orders the logits for it (OLMoE-1B-7B shape, step at positions 32-96, H200, 2026-11-29: 0.746 /
 *   0.747 -> 0.691 / 0.694 ms against the tail inside; Qwen: 1.491 / 1.483 -> 1.529 / 1.521 ms).
 * - ROUTE_CLUSTER: the router GEMV as one thread-block cluster whose block 0 routes once the others
 *   have stored their logits into its shared memory (hz_decode_router_cluster): one kernel instead of
 *   two, no round trip of the logits through L2. Where the router GEMV holds only the router rows and
 *   the device can launch clusters; see doc/benchmarks.md (eighteenth round) for the figures.
 * HZ_GPU_ROUTE_KERNEL = 0 (inside the GEMV) or all (its own kernel, whatever the rows) and
 * HZ_GPU_ROUTE_CLUSTER = 0 (its own kernel instead of the cluster) for the comparisons; the logits are
 * bit-identical in every placement (test_model_gpu). */
enum { ROUTE_IN_GEMV, ROUTE_KERNEL, ROUTE_CLUSTER };
static int route_placement(const hz_session *s) {
    const hz_gpu_session *g = s->gpu;
    const int shared_rows = s->model->cfg.arch == HZ_ARCH_QWEN2MOE; /* enqueue_step's router GEMV */
    const int own = g->route_kernel >= 0 ? g->route_kernel : !shared_rows;
    if (!own) return ROUTE_IN_GEMV;
    return !shared_rows && g->route_cluster && s->model->gpu->dev.clusters &&
                   s->model->cfg.experts <= HZ_DECODE_CLUSTER_ROWS
               ? ROUTE_CLUSTER
               : ROUTE_KERNEL;
}

static const char *route_placement_name(int p) {
    return p == ROUTE_IN_GEMV ? "router GEMV" : p == ROUTE_KERNEL ? "own kernel" : "router cluster";
}

/* Whether the routed experts of a full-residency step start on the router GEMV's ready flags: where
 * the router tail runs inside that GEMV (HZ_GPU_ROUTE_READY). */
static int experts_on_flags(const hz_session *s) {
    return s->model->gpu->full && s->gpu->route_ready && route_placement(s) == ROUTE_IN_GEMV &&
           hz_exec_cuda_starts_on_flags(s->model->exec);
}

/* Whether the routing of a partial-residency step comes back through the router's own stores into
 * pinned memory (route_mirror; routed_partial then polls a tag word instead of copying and waiting
 * for the queue): not with the route kernel of its own, which has no host copy, nor with the
 * next-layer prediction, whose ids come back by a copy anyway. */
static int route_mirrored(const hz_session *s, int place) {
    return s->gpu->route_mirror && !s->model->gpu->full && place != ROUTE_KERNEL &&
           hz_cache_prefetch_mode(s->model->cache) != HZ_PREFETCH_NEXT_LAYER;
}

/* Enqueues the copy of the first n predicted ids into `ids` (host stack memory, so the copy completes
 * before the call returns on cuda; counted under purpose routing). */
static int read_prediction(hz_session *s, uint32_t *ids, uint32_t n) {
    hz_backend *be = s->model->gpu->be;
    return hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, ids, (const void *)s->gpu->rows_dev, (uint64_t)n * 4u,
                               HZ_PURPOSE_ROUTING);
}

#define CALL(expr)                                                                                        \
    do {                                                                                                  \
        int st_ = (expr);                                                                                 \
        if (st_) return hz_error_prefix(st_, "layer %u", l);                                              \
    } while (0)

/* Whether the experts ahead have their gate run by the router's routing warp (hz_dgemv_args.gate), not
 * by a kernel of its own: with HZ_GPU_GATE_IN_ROUTER (on by default). The experts ahead need the router's
 * store (route_mirrored), so the routing runs in the router GEMV or its cluster, which both run it. */
static int gate_in_router(const hz_session *s, int mirror) {
    return experts_ahead(s, mirror) && s->gpu->gate_in_router;
}

/* Whether a step's argmax comes from the lm_head screen: where the model has it and the session samples
 * greedily (a sampler reads every logit anyway). */
static int screen_wanted(const hz_session *s) {
    return s->model->gpu->lm_screen_mem != NULL && s->sampler.temperature == 0.0f;
}

/* Every kernel of a step after hz_decode_begin, on `stream` (the compute queue, or the capture stream
 * of the graph). Per layer:
 *   qkv GEMV      x = attn_norm(h + moe of the previous layer), or of the embedding row (layer 0)
 *   attention     q/k norm, RoPE, KV store, split softmax over positions 0..pos
 *   o GEMV
 *   router GEMV   x = ffn_norm(h + o) (also stored in xn for the experts), zeroes acc; Qwen adds the
 *                 shared expert's gate/up/gate-logit rows; tail: softmax + top-k (+ device row table),
 *                 inside the GEMV, as its own kernel, or in the GEMV's cluster (route_placement)
 *   experts       full: one executor call on the device table, which starts on the router GEMV's
 *                 ready flags when the router tail runs inside that GEMV (route_ready); partial:
 *                 routed_partial
 *   (Qwen) shared down GEMV, x = fp16(silu(g) * u): on the side stream (g->side), beside the routed
 *                 experts, joined back before the next layer (see there)
 * then, for the last token, the lm_head GEMV with x = final_norm(h + moe) and the argmax tail.
 * Residual norm r (0, 1, 2, ...) writes h into hb[r & 1] and reads hb[(r - 1) & 1]. Nothing here
 * depends on the position or the token except through g->dstep, so the sequence can be replayed. */
static int enqueue_layers(hz_session *s, int last, void *stream) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_gpu_model *gm = m->gpu;
    hz_gpu_session *g = s->gpu;
    const uint32_t H = c->hidden, D = c->head_dim, Hq = c->heads, Hkv = c->kv_heads, QD = Hq * D, KD = Hkv * D;
    const uint32_t E = c->experts, K = c->top_k, S = c->shared_inter, L = c->layers;
    const int qwen = c->arch == HZ_ARCH_QWEN2MOE;
    const hz_klaunch kl = {stream, g->use_pdl};
    hz_f16 *hb[2] = {g->h, g->h2};
    /* Where every layer's routing runs, and whether the experts then start on the router's flags */
    const int place = route_placement(s), ready = experts_on_flags(s), mirror = route_mirrored(s, place);
    /* The experts ahead: the layer whose gate waits is served once the next router is queued. */
    const int ahead = experts_ahead(s, mirror);
    const int gate_here = gate_in_router(s, mirror);
    /* At full residency without a shared expert, the two-pass down kernel adds the residual itself and
     * the next layer's q/k/v GEMV reads h alone (4 KB per block after its wait instead of 12) */
    const int h_down = g->res_in_down && gm->full && !qwen && hz_exec_cuda_hands_h(m->exec, K);
    uint32_t r = 0, l = 0;
    for (l = 0; l < L; l++) {
        const hz_layer_weights *w = &gm->dw.layers[l];
        hz_dgemv_args qa = {.seg = {{w->wq, w->bq, g->q, QD, 0}, {w->wk, w->bk, g->k, KD, 0}, {w->wv, w->bv, g->v, KD, 0}},
                            .nseg = 3, .in = H, .x_mode = HZ_DGEMV_X_RESNORM, .norm_w = w->attn_norm,
                            .eps = c->rms_eps, .h_out = hb[r & 1]};
        if (l == 0) {
            qa.embed = gm->dw.embed;
            qa.step = g->dstep;
        } else {
            if (h_down) { /* the previous layer's down kernel stored h = fp16(h_in + fp16(acc)) here */
                qa.h_in = hb[r & 1];
                qa.h_out = NULL;
            } else {
                qa.h_in = hb[(r - 1) & 1];
                qa.acc = g->acc;
                qa.shared = qwen ? g->shd : NULL;
                qa.shared_gate = qwen ? g->sgate : NULL;
            }
        }
        r++;
        CALL(hz_decode_gemv(&qa, &gm->dev, &kl));
        const size_t kv_layer = (size_t)l * s->max_context * KD;
        hz_dattn_args aa = {.q = g->q, .k = g->k, .v = g->v, .q_norm = w->q_norm, .k_norm = w->k_norm,
                            .eps = c->rms_eps, .rope = g->rope, .step = g->dstep, .kc = g->kc + kv_layer,
                            .vc = g->vc + kv_layer, .out = g->att, .part = g->attn_part, .count = g->attn_count,
                            .splits = g->attn_splits, .heads = Hq, .kv_heads = Hkv, .head_dim = D,
                            .groups = g->step_groups};
        CALL(hz_decode_attention(&aa, &kl));
        hz_dgemv_args oa = {.seg = {{w->wo, w->bo, g->proj, H, 0}}, .nseg = 1, .in = QD, .x_mode = HZ_DGEMV_X_PLAIN,
                            .x = g->att};
        CALL(hz_decode_gemv(&oa, &gm->dev, &kl));
        hz_dgemv_args ra = {.seg = {{w->router, NULL, g->rlog, E, 0},
                                    {w->sh_gate, NULL, g->shg, S, 1},
                                    {w->sh_up, NULL, g->shu, S, 1},
                                    {w->sh_router, NULL, g->sgate, 1, 0}},
                            .nseg = qwen ? 4 : 1, .in = H, .x_mode = HZ_DGEMV_X_RESNORM, .h_in = hb[(r - 1) & 1],
                            .d = g->proj, .norm_w = w->ffn_norm, .eps = c->rms_eps, .h_out = hb[r & 1],
                            .x_out = g->xn, .zero = g->acc, .zero_n = H, .tail = HZ_DGEMV_TAIL_ROUTE, .top_k = K,
                            .norm_topk = c->norm_topk_prob, .ids_out = g->route, .w_out = g->route_w,
                            .table = gm->full ? gm->table + (size_t)l * E : NULL, .rows_out = g->rows_dev,
                            .tail_scratch = g->tail, .step = g->dstep};
        r++;
        ra.router_alone = (uint32_t)g->router_alone;
        if (place == ROUTE_IN_GEMV && g->router_alone && g->route_tags) ra.tags = g->rtags + (size_t)l * E;
        /* With the router inside the GEMV, the experts start on its flags, not at its end. */
        if (ready) ra.ready = g->ready + 2u * l;
        if (mirror) {
            uint8_t *slot = g->d_slots + l * g->slot_bytes;
            ra.host_ids = (uint32_t *)(void *)slot;
            ra.host_w = (float *)(void *)(slot + (size_t)K * 4u);
            ra.host_tag_out = (uint64_t *)(void *)(slot + slot_tag_at(K));
            ra.host_tag = l + 1u; /* stored as step_number(epoch, l + 1) */
            ra.host_tag_epoch = 1;
        }
        if (gate_here) {
            ra.gate_on = 1;
            ra.gate = gate_args(s, l);
        }
        if (place == ROUTE_CLUSTER) {
            CALL(hz_decode_router_cluster(&ra, &gm->dev, &kl));
        } else if (place == ROUTE_KERNEL) {
            ra.tail = HZ_DGEMV_TAIL_NONE; /* the tail ra describes, in its own kernel */
            CALL(hz_decode_gemv(&ra, &gm->dev, &kl));
            CALL(hz_model_route(g->rlog, E, ra.top_k, ra.norm_topk, ra.ids_out, ra.w_out, ra.table, ra.rows_out, kl.pdl,
                                stream));
        } else {
            CALL(hz_decode_gemv(&ra, &gm->dev, &kl));
        }
        /* Behind the router: wait_routing asks it whether the router ended without storing the routing.
         * A captured step is served after its launch instead (step). */
        if (mirror && !g->capturing) CALL(gm->be->ops->event_record(gm->be, g->route_ev[l & 1u], HZ_QUEUE_COMPUTE));
        if (ahead && l > 0 && !g->capturing) CALL(routed_ahead(s, l - 1, g->route_ev[(l - 1) & 1u]));
        /* Qwen's shared down projection needs only the rows above: with a side stream it runs beside
         * the routed experts, queued after them so that their kernel is offered the device first
         * (Qwen1.5-MoE-A2.7B shape, step at positions 32..96, H200, 2026-11-29, one run: 1.596 ms
         * after them, 1.544 ms beside them at the usual grid; doc/benchmarks.md, fifth round). */
        hz_dgemv_args da = {.seg = {{w->sh_down, NULL, g->shd, H, 0}}, .nseg = 1, .in = S,
                            .x_mode = HZ_DGEMV_X_SILU, .g = g->shg, .u = g->shu};
        if (qwen && g->side) CALL(hz_decode_fork(g->side, stream, g->use_pdl && g->side_edge));
        if (gm->full)
            CALL(hz_exec_cuda_moe_device(m->exec, K, g->rows_dev, g->route_w, g->xn, g->acc, g->scratch,
                                         g->scratch_bytes, ready ? ra.ready : NULL, ready ? &g->dstep->epoch : NULL,
                                         h_down ? hb[(r - 1) & 1] : NULL, h_down ? hb[r & 1] : NULL, stream));
        else if (ahead)
            CALL(enqueue_gated(s, l, &kl, gate_here));
        else
            CALL(routed_partial(s, l, mirror ? step_number(g, l + 1u) : 0));
        if (qwen && g->side) {
            void *ss = NULL;
            CALL(hz_decode_side_begin(g->side, &ss));
            const hz_klaunch sk = {ss, 0}; /* its stream's previous kernel is another layer's */
            /* One block per multiprocessor: it then fits beside the routed-expert kernel's block on
             * every multiprocessor (Qwen step 1.548 -> 1.508 ms against the 2-per-multiprocessor
             * grid; half as many blocks: 1.761 ms; H200, 2026-11-29) */
            da.beside = 1;
            CALL(hz_decode_gemv(&da, &gm->dev, &sk));
            CALL(hz_decode_join(g->side, stream));
        } else if (qwen) {
            CALL(hz_decode_gemv(&da, &gm->dev, &kl));
        }
    }
    if (last) {
        hz_dgemv_args ha = {.seg = {{gm->dw.lm_head, NULL, g->logits, c->vocab, 1}}, .nseg = 1, .in = H,
                            .x_mode = HZ_DGEMV_X_RESNORM, .h_in = hb[(r - 1) & 1], .acc = g->acc,
                            .shared = qwen ? g->shd : NULL, .shared_gate = qwen ? g->sgate : NULL,
                            .norm_w = gm->dw.final_norm, .eps = c->rms_eps, .tail = HZ_DGEMV_TAIL_ARGMAX,
                            .argmax_out = g->argmax, .argmax_host = g->d_argmax, .tail_scratch = g->tail};
        if (g->step_screen) {
            /* the argmax through the screen; the logits only when asked for (hz_gpu_logits_fetch) */
            hz_dscreen_args sa = {.x = ha, .w = gm->dw.lm_head, .q = gm->lm_q, .scale = gm->lm_scale,
                                  .coef = gm->lm_coef, .qnorm = gm->lm_qnorm, .rows = c->vocab, .ub = g->lm_ub, .best = g->lm_best,
                                  .argmax_out = g->argmax, .argmax_host = g->d_argmax, .summed = g->lm_summed,
                                  .summed_host = g->d_lm_summed, .tail_scratch = g->tail};
            sa.x.x_out = g->xlm;
            sa.x.step = g->dstep;
            CALL(hz_decode_screen(&sa, &gm->dev, &kl));
        } else {
            CALL(hz_decode_gemv(&ha, &gm->dev, &kl));
        }
    }
    l = L - 1;
    if (ahead && !g->capturing) CALL(routed_ahead(s, l, g->route_ev[l & 1u]));
    return HZ_OK;
}

/* enqueue_layers, and on its failure the gate it left waiting opened (on the rows of an earlier gate), so
 * that whatever waits for the queue next does not wait for this host forever. */
static int enqueue_step(hz_session *s, int last, void *stream) {
    int st = enqueue_layers(s, last, stream);
    if (st && !s->gpu->capturing) gates_open_all(s->gpu);
    return st;
}

/* Keeps the reason a capture failed (the session then runs eagerly) and says so once in the log. */
static void graph_failed(hz_gpu_session *g, const char *why) {
    g->graph_state = -1;
    snprintf(g->graph_why, sizeof g->graph_why, "%s", why && *why ? why : "unknown");
    hz_log(HZ_LOG_WARN, "decode: CUDA graph capture failed, running the step eagerly: %s", g->graph_why);
}

/* Queues the copy of the device argmax into slot p, unless the argmax kernel stores it there itself. */
static int queue_argmax_copy(hz_session *s, uint32_t p) {
    hz_gpu_session *g = s->gpu;
    if (g->d_argmax_slot[p]) return HZ_OK;
    return hz_backend_copy_d2h(s->model->gpu->be, HZ_QUEUE_COMPUTE, g->h_argmax_slot[p], g->argmax, 4u,
                               HZ_PURPOSE_ACTIVATION);
}

/* Captures the whole full-residency step, once per attention group count the session can reach and
 * per position parity (graphs[groups - 1][p] writes logits_buf[p]; with attn_groups off only groups 1,
 * and graphs[1][*] stay NULL): begin (token and position as kernel parameters, set again at every
 * replay), the layers, lm_head and argmax. Nothing is executed by the capture. */
static void graph_capture(hz_session *s) {
    hz_gpu_session *g = s->gpu;
    const uint32_t cur = g->logits == g->logits_buf[1];
    const uint32_t n = g->attn_groups ? 4u : 2u; /* step_groups_at is 1 at every position without them */
    for (uint32_t bp = 0; bp < n; bp++) {
        const uint32_t b = bp >> 1, p = bp & 1u;
        void *cs = NULL;
        int st = hz_decode_graph_begin_capture(s->model->gpu->queue, &cs);
        if (st) {
            graph_failed(g, hz_last_error_message());
            return;
        }
        use_parity(g, p);
        g->capturing = 1;
        g->step_groups = b + 1u;
        int est = hz_decode_begin(0, 0, g->dstep, cs);
        if (!est) est = enqueue_step(s, 1, cs);
        g->capturing = 0;
        use_parity(g, cur);
        char why[sizeof g->graph_why] = "";
        if (est) snprintf(why, sizeof why, "%s", hz_last_error_message());
        st = hz_decode_graph_end_capture(cs, est == HZ_OK, &g->graphs[b][p]);
        if (est || st || !g->graphs[b][p]) {
            graph_failed(g, est ? why : hz_last_error_message());
            return;
        }
    }
    g->graph_state = 1;
    g->graph_screen = g->step_screen;
}

/* Queues the step at position pos ahead (its graph, its token the device's argmax of the step
 * before), its argmax copy into h_argmax_slot[pos & 1] and the event after it. */
static int spec_launch(hz_session *s, uint32_t pos) {
    hz_gpu_session *g = s->gpu;
    hz_backend *be = s->model->gpu->be;
    const int p = (int)(pos & 1u);
    g->screened[p] = g->graph_screen;
    int st = hz_decode_graph_launch(graph_at(g, pos), 0, pos, g->dstep, g->argmax, s->model->gpu->queue);
    if (!st) g->epoch++;
    if (!st) st = queue_argmax_copy(s, (uint32_t)p);
    if (!st) st = be->ops->event_record(be, g->step_done[p], HZ_QUEUE_COMPUTE);
    if (st) return hz_error_prefix(st, "queueing the step at position %u ahead", pos);
    g->spec_inflight = 1;
    g->spec_pos = pos;
    return HZ_OK;
}

/* Whether the step after position pos may be queued ahead: a greedy session on the graph path with a
 * position left. */
static int spec_wanted(const hz_session *s, uint32_t pos) {
    const hz_gpu_session *g = s->gpu;
    return g->speculate && g->use_graph && g->graph_state == 1 && s->model->gpu->full &&
           s->sampler.temperature == 0.0f && pos + 1u < s->max_context;
}

/* The step at position pos has been queued (its argmax copy too): queues the next one ahead when
 * wanted, then waits for this one. The next step's token is then the argmax just read. */
static int finish_step(hz_session *s, uint32_t pos) {
    hz_gpu_session *g = s->gpu;
    hz_backend *be = s->model->gpu->be;
    int st;
    if (spec_wanted(s, pos)) {
        const int p = (int)(pos & 1u);
        st = be->ops->event_record(be, g->step_done[p], HZ_QUEUE_COMPUTE);
        if (!st) st = spec_launch(s, pos + 1u);
        if (!st) st = be->ops->event_wait(be, g->step_done[p]);
        if (!st) g->spec_token = *g->h_argmax_slot[p];
    } else {
        st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    }
    if (st) g->spec_inflight = 0; /* not adoptable; the queue is in order, so later runs follow it */
    return st;
}

/* A run other than the one queued ahead: waits for that step (it wrote the device's activations, the
 * argmax and a K/V row that the run will overwrite) and forgets it. */
static int spec_drain(hz_session *s) {
    hz_gpu_session *g = s->gpu;
    hz_backend *be = s->model->gpu->be;
    g->spec_inflight = 0;
    g->spec_discarded++;
    int st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    return st ? hz_error_prefix(st, "waiting for the step queued ahead") : HZ_OK;
}

static int graphs_reset(hz_session *s);

/* One token at position pos; `last`: also lm_head and the argmax, brought back to *h_argmax (the
 * logits stay on the device until hz_gpu_logits_fetch). At full residency the last-token step is the
 * captured graph (unless disabled or its capture failed); otherwise the same kernels are launched one
 * by one, which gives the same bits. */
static int step(hz_session *s, int32_t token, uint32_t pos, int last) {
    hz_model *m = s->model;
    hz_gpu_model *gm = m->gpu;
    hz_gpu_session *g = s->gpu;
    void *q = gm->queue;
    uint32_t l = 0;
    CALL(hz_decode_enter(q));
    /* The hits on the device: the generation held and the table brought up to it at a forward's
     * start, ahead of its first kernel. */
    const int hits = g->dev_hits && experts_ahead(s, route_mirrored(s, route_placement(s)));
    if (hits && !g->held) CALL(hold_sync(s, 0));
    /* The first such step runs eagerly (one-time initialisations of the kernels' launchers happen
     * outside any capture), the second is captured and replayed, and so are all later ones. At partial
     * residency only with the hits on the device: a captured step records no event between its
     * kernels, and only then does none need one. */
    const int graphable = last && g->use_graph && (gm->full || (hits && g->partial_graph));
    /* The graphs hold the lm_head screen or the GEMV: a session whose sampler changed between greedy
     * and sampling captures them again. */
    g->step_screen = last && screen_wanted(s);
    if (graphable && g->graph_state == 1 && g->graph_screen != g->step_screen) CALL(graphs_reset(s));
    /* armed by an eager step of the other kind: one more eager step first, so that the capture launches
     * no kernel for the first time (graph_screen: what the arming step ran) */
    if (graphable && g->graph_state == 2 && g->graph_screen != g->step_screen) g->graph_state = 0;
    if (graphable && g->graph_state == 2) graph_capture(s);
    if (last) g->screened[pos & 1u] = g->step_screen;
    if (graphable && g->graph_state == 1) {
        int st = hz_decode_graph_launch(graph_at(g, pos), token, pos, g->dstep, NULL, q);
        if (st) return hz_error_prefix(st, "decode step at position %u", pos);
        g->epoch++;
        g->graph_steps++;
        if (!gm->full) {
            /* The step's gates are all queued: serve them in order, the graph's end as the check that
             * a router did not end without storing its routing. */
            st = gm->be->ops->event_record(gm->be, g->graph_ev, HZ_QUEUE_COMPUTE);
            for (l = 0; l < m->cfg.layers && !st; l++) st = routed_ahead(s, l, g->graph_ev);
            if (st) {
                gates_open_all(g);
                return hz_error_prefix(st, "decode step at position %u", pos);
            }
        }
    } else {
        CALL(hz_decode_begin(token, pos, g->dstep, q));
        g->epoch++;
        g->step_groups = step_groups_at(g, pos);
        int st = enqueue_step(s, last, q);
        if (st) return hz_error_prefix(st, "decode step at position %u", pos);
        g->eager_steps++;
        if (graphable && g->graph_state == 0) {
            g->graph_state = 2;
            g->graph_screen = g->step_screen;
        }
    }
    if (!last) return HZ_OK;
    g->logits_on_host = 0;
    int st = queue_argmax_copy(s, pos & 1u); /* h_argmax is that slot (hz_forward_gpu) */
    if (!st) st = finish_step(s, pos);
    if (st) return hz_error_prefix(st, "decode step at position %u: reading the argmax back", pos);
    st = deferred_end(g); /* the step has ended */
    if (!st) st = gate_check(g);
    if (st) return hz_error_prefix(st, "decode step at position %u", pos);
    g->ahead_armed = 1; /* every kernel of a step has been launched once (experts_ahead) */
    return HZ_OK;
}

/* The caller's step is the one queued ahead: it is adopted (counted as a graph step), the next one is
 * queued ahead when wanted, and this one is waited for. */
static int spec_adopt(hz_session *s) {
    hz_gpu_session *g = s->gpu;
    const uint32_t pos = g->spec_pos;
    const int p = (int)(pos & 1u);
    g->spec_inflight = 0;
    g->spec_adopted++;
    g->graph_steps++;
    use_parity(g, (uint32_t)p);
    g->logits_on_host = 0;
    int st = hz_decode_enter(s->model->gpu->queue);
    if (!st) st = finish_step(s, pos);
    return st ? hz_error_prefix(st, "decode step at position %u (queued ahead)", pos) : HZ_OK;
}

static int forward(hz_session *s, const int32_t *tokens, uint32_t n) {
    hz_gpu_session *g = s->gpu;
    if (g->spec_inflight) {
        /* Adopted only where this run would have taken the same graph step (a one-token prompt may be
         * sent to the batched prefill: HZ_GPU_PREFILL=batched). */
        if (n == 1 && s->pos == g->spec_pos && tokens[0] == g->spec_token && g->graph_state == 1 &&
            !hz_gpu_prefill_wanted(s, n))
            return spec_adopt(s);
        int st = spec_drain(s);
        if (st) return st;
    }
    /* The logits and the argmax of this run's last position go to its parity's buffers. */
    use_parity(g, (s->pos + n - 1u) & 1u);
    g->screened[(s->pos + n - 1u) & 1u] = 0; /* a step below says otherwise; the prefill writes the logits */
    /* Prompts run through the batched prefill (prefill_cuda.c); HZ_GPU_PREFILL=token keeps them on the
     * token-by-token path below, =batched sends single tokens there too (tests compare the paths). */
    if (hz_gpu_prefill_wanted(s, n)) return hz_gpu_prefill_forward(s, tokens, n);
    for (uint32_t t = 0; t < n; t++) {
        int st = step(s, tokens[t], s->pos + t, t + 1 == n);
        if (st) return st;
    }
    return HZ_OK;
}

/* At partial residency, one forward at a time among the sessions of the cache (hz_cache_run_lock: the
 * experts queued ahead of the routing). */
int hz_forward_gpu(hz_session *s, const int32_t *tokens, uint32_t n) {
    if (s->model->gpu->full) return forward(s, tokens, n);
    hz_cache *c = turn_take(s->model);
    int st = hold_end(s, forward(s, tokens, n));
    turn_give(c);
    return st;
}

int32_t hz_gpu_greedy_token(const hz_session *s) { return *s->gpu->h_argmax; }

/* ---------------------------------------------------------------------------------------------------
 * Logits on demand, decode options, stats
 * ------------------------------------------------------------------------------------------------- */

int hz_gpu_logits_fetch(const hz_session *s) {
    hz_gpu_session *g = s->gpu;
    if (g->logits_on_host) return HZ_OK;
    hz_backend *be = s->model->gpu->be;
    const uint32_t p = g->logits == g->logits_buf[1];
    int st = HZ_OK;
    if (g->screened[p]) {
        /* The step ran the screen: its logits are the lm_head GEMV on the x it stored, queued behind it
         * (and behind a step queued ahead, which writes the other parity's buffers). */
        const hz_model_config *c = &s->model->cfg;
        hz_dgemv_args la = {.seg = {{s->model->gpu->dw.lm_head, NULL, g->logits, c->vocab, 1}}, .nseg = 1,
                            .in = c->hidden, .x_mode = HZ_DGEMV_X_PLAIN, .x = g->xlm};
        const hz_klaunch kl = {s->model->gpu->queue, 0};
        st = hz_decode_enter(s->model->gpu->queue);
        if (!st) st = hz_decode_gemv(&la, &s->model->gpu->dev, &kl);
        if (st) return hz_error_prefix(st, "computing the logits of a screened step");
        g->screened[p] = 0;
    }
    st = hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, s->logits, g->logits, (uint64_t)s->model->cfg.vocab * 4u,
                                 HZ_PURPOSE_ACTIVATION);
    if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    if (st) return hz_error_prefix(st, "reading the logits back");
    g->logits_on_host = 1;
    return HZ_OK;
}

void hz_gpu_logits_invalidate(hz_session *s) {
    if (s->gpu) s->gpu->logits_on_host = 0;
}

/* Waits for the compute queue (no replay of the old graphs, no step queued ahead is in flight), forgets
 * the step queued ahead and the captured graphs: the next steps capture again. */
static int graphs_reset(hz_session *s) {
    hz_gpu_session *g = s->gpu;
    hz_backend *be = s->model->gpu->be;
    int st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    if (st) return st;
    if (g->spec_inflight) g->spec_discarded++;
    g->spec_inflight = 0;
    for (int b = 0; b < 2; b++)
        for (int p = 0; p < 2; p++) {
            hz_decode_graph_destroy(g->graphs[b][p]);
            g->graphs[b][p] = NULL;
        }
    g->graph_state = 0;
    return HZ_OK;
}

int hz_gpu_session_set_decode(hz_session *s, int graph, int pdl, uint32_t splits) {
    hz_gpu_session *g = s ? s->gpu : NULL;
    if (!g) return hz_error(HZ_EINVAL, "hz_gpu_session_set_decode: not a cuda session");
    const uint32_t max_splits = hz_decode_attention_splits(&s->model->gpu->dev, s->model->cfg.heads, s->max_context);
    if (splits > max_splits)
        return hz_error(HZ_EINVAL, "hz_gpu_session_set_decode: %u attention splits (at most %u)", splits, max_splits);
    int st = graphs_reset(s);
    if (st) return st;
    g->graph_why[0] = '\0';
    g->use_graph = graph != 0;
    g->use_pdl = pdl != 0;
    g->attn_splits = splits ? splits : max_splits;
    return HZ_OK;
}

int hz_gpu_session_set_attention_groups(hz_session *s, int on) {
    hz_gpu_session *g = s ? s->gpu : NULL;
    if (!g) return hz_error(HZ_EINVAL, "hz_gpu_session_set_attention_groups: not a cuda session");
    int st = graphs_reset(s);
    if (st) return st;
    g->attn_groups = on != 0;
    return HZ_OK;
}

hz_decode_graph *hz_gpu_session_graph(const hz_session *s, uint32_t pos) {
    const hz_gpu_session *g = s ? s->gpu : NULL;
    return g && g->graph_state == 1 ? graph_at(g, pos) : NULL;
}

int hz_gpu_session_stats(const hz_session *s, char *buf, size_t n) {
    const hz_gpu_session *g = s->gpu;
    const char *path = !s->model->gpu->full ? (g->graph_state == 1 ? "graph (partial residency)" : "eager (partial residency)")
                       : !g->use_graph     ? "eager (graph disabled)"
                       : g->graph_state == 1 ? "graph"
                       : g->graph_state < 0  ? "eager (graph capture failed)"
                                             : "graph (not captured yet)";
    /* The reason is CUDA's and ours: no quotes or backslashes are expected, but JSON must stay valid. */
    char why[sizeof g->graph_why];
    size_t j = 0;
    for (size_t i = 0; g->graph_why[i] && j + 1 < sizeof why; i++) {
        char ch = g->graph_why[i];
        why[j++] = (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) ? '\'' : ch;
    }
    why[j] = '\0';
    const int mirror = route_mirrored(s, route_placement(s));
    /* rows the screen summed again since the session began, as of the last screened step that ended */
    char summed[24] = "null";
    if (g->d_lm_summed) snprintf(summed, sizeof summed, "%llu", (unsigned long long)*g->h_lm_summed);
    int k = snprintf(buf, n,
                     ",\"decode_path\":\"%s\",\"decode_pdl\":%s,\"graph_kernels\":%u,\"graph_steps\":%llu,"
                     "\"eager_steps\":%llu,\"attention_splits\":%u,\"attention_groups\":\"%s\",\"steps_queued_ahead\":%s,"
                     "\"steps_ahead_adopted\":%llu,\"steps_ahead_discarded\":%llu,\"argmax_readback\":\"%s\","
                     "\"router_tail\":\"%s\",\"experts_start\":\"%s\",\"expert_kernels\":\"%s\",\"shared_down_start\":%s,"
                     "\"routing_readback\":\"%s\",\"routing_stored\":%llu,\"experts_queued\":\"%s\","
                     "\"experts_gate\":%s,\"experts_gated\":%llu,\"gate_hits\":%llu,\"gates_waited\":%llu,\"gate_table_copies\":%llu,"
                     "\"lm_head_screen\":%s,\"lm_head_rows_summed\":%s,\"graph_fallback\":%s%s%s",
                     path, g->use_pdl ? "true" : "false", hz_decode_graph_nodes(g->graphs[0][0]),
                     (unsigned long long)g->graph_steps, (unsigned long long)g->eager_steps, g->attn_splits,
                     g->attn_groups ? "by position" : "one",
                     g->speculate ? "true" : "false", (unsigned long long)g->spec_adopted,
                     (unsigned long long)g->spec_discarded, g->d_argmax_slot[0] ? "kernel store" : "copy",
                     route_placement_name(route_placement(s)),
                     experts_on_flags(s) ? "router flags" : "router end", hz_exec_cuda_path_name(s->model->exec),
                     !g->side ? "null"
                     : hz_decode_side_programmatic_edges(g->side) ? "\"router trigger\""
                                                                  : "\"router end\"",
                     s->model->gpu->full ? "none (routing on the device)"
                     : mirror            ? "router store"
                                         : "copy",
                     (unsigned long long)g->route_stored,
                     s->model->gpu->full        ? "on the device"
                     : experts_ahead(s, mirror) ? "ahead of the routing"
                                                : "after the routing",
                     !experts_ahead(s, mirror)   ? "null"
                     : gate_in_router(s, mirror) ? "\"router\""
                                                 : "\"own kernel\"",
                     (unsigned long long)g->experts_gated, (unsigned long long)g->gate_hits,
                     (unsigned long long)g->gates_waited, (unsigned long long)g->tab_copies,
                     screen_wanted(s) ? "true" : "false", summed, g->graph_state < 0 ? "\"" : "",
                     g->graph_state < 0 ? why : "null", g->graph_state < 0 ? "\"" : "");
    return k < 0 || (size_t)k >= n ? hz_error(HZ_ENOMEM, "session stats: decode fields do not fit") : HZ_OK;
}
