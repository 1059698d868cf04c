/* The forward pass on a cuda device: the same graph and rounding points as forward.c (doc/numerics.md),
 * run by the kernels of cuda/model/model_ops.cuh and the cuda W4A16 executors, all on the backend's
 * compute queue.
 *
 * Residency decides how a layer's routed experts are reached:
 *   full    (cache capacity == experts): the model holds one lease per layer on the published
 *           generation for its whole life, so rows cannot move or be reused, and keeps a device table
 *           [layer x expert] -> row address. The router kernel writes the chosen rows straight into the
 *           executor's device argument array: no host round trip inside a step.
 *   partial: per layer the top-k ids and weights come back to the host (one small counted D2H,
 *           purpose ROUTING, then a compute-queue sync), the cache acquires the group (misses travel on
 *           the copy queue inside the acquire), the executor is enqueued on the leased rows and the
 *           lease is released with an event recorded on the compute queue after it.
 * Prefill runs its tokens one at a time through the decode kernels (same arithmetic per token as the
 * CPU path, which makes prefill equal token-by-token decode here too); batched GEMM prefill is a later
 * optimisation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cache/cache.h"
#include "exec/exec_cuda.h"
#include "model.h"
#include "forward_cuda.h"

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
    if (g->weights) g->be->ops->mem_free(g->be, g->weights);
    free(g);
    m->gpu = NULL;
}

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

void hz_gpu_session_destroy(hz_session *s) {
    hz_gpu_session *g = s->gpu;
    if (!g) return;
    hz_backend *be = s->model->gpu->be;
    (void)be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    hz_event_destroy(g->done);
    if (g->act) be->ops->mem_free(be, g->act);
    if (g->kc) be->ops->mem_free(be, g->kc);
    if (g->vc) be->ops->mem_free(be, g->vc);
    if (g->pinned) be->ops->pinned_free(be, g->pinned);
    free(g->rows);
    free(g);
    s->gpu = NULL;
    s->logits = NULL; /* it pointed into the pinned block */
}

/* Carves one aligned piece from a running offset (base NULL: sizing pass). */
static void *carve(uint8_t *base, uint64_t *off, uint64_t bytes) {
    void *p = base ? base + *off : NULL;
    *off += hz_align_up(bytes ? bytes : 1, ALIGN);
    return p;
}

static uint64_t layout_act(hz_session *s, hz_gpu_session *g, uint8_t *base) {
    const hz_model_config *c = &s->model->cfg;
    const uint64_t H = c->hidden, QD = (uint64_t)c->heads * c->head_dim, KD = (uint64_t)c->kv_heads * c->head_dim;
    const uint64_t E = c->experts, K = c->top_k, S = c->shared_inter ? c->shared_inter : 1, V = c->vocab;
    uint64_t off = 0;
    g->h = carve(base, &off, H * 2);
    g->xn = carve(base, &off, H * 2);
    g->q = carve(base, &off, QD * 2);
    g->k = carve(base, &off, KD * 2);
    g->v = carve(base, &off, KD * 2);
    g->att = carve(base, &off, QD * 2);
    g->proj = carve(base, &off, H * 2);
    g->rlog = carve(base, &off, E * 2);
    g->sha = carve(base, &off, S * 2);
    g->shd = carve(base, &off, H * 2);
    g->sgate = carve(base, &off, 2);
    g->acc = carve(base, &off, H * 4);
    g->shg = carve(base, &off, S * 4);
    g->shu = carve(base, &off, S * 4);
    g->scores = carve(base, &off, (uint64_t)c->heads * s->max_context * 4);
    g->logits = carve(base, &off, V * 4);
    g->rope = carve(base, &off, (uint64_t)s->max_context * c->head_dim * 4);
    g->route = carve(base, &off, 2 * K * 4);
    g->route_w = g->route ? (float *)(g->route + K) : NULL;
    g->rows_dev = carve(base, &off, K * sizeof(void *));
    g->argmax = carve(base, &off, 4);
    g->scratch = carve(base, &off, g->scratch_bytes);
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

int hz_gpu_session_create(hz_session *s) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_backend *be = m->gpu->be;
    hz_gpu_session *g = hz_calloc(1, sizeof *g);
    if (!g) return HZ_ENOMEM;
    s->gpu = g;
    g->scratch_bytes = hz_exec_cuda_scratch_bytes(m->layout);
    const uint64_t act_bytes = layout_act(s, g, NULL);
    const uint64_t kv_bytes = (uint64_t)c->layers * s->max_context * c->kv_heads * c->head_dim * sizeof(hz_f16);
    const uint32_t K = c->top_k, rows_n = m->group_limit > K ? m->group_limit : K;
    const uint64_t pinned_bytes = hz_align_up(2u * K * 4u + 4u, 64) + (uint64_t)c->vocab * 4u;
    g->rows = hz_calloc(rows_n, sizeof *g->rows);
    if (!g->rows) return HZ_ENOMEM;
    int st = be->ops->mem_alloc(be, act_bytes, (void **)&g->act);
    if (!st) st = be->ops->mem_alloc(be, kv_bytes, (void **)&g->kc);
    if (!st) st = be->ops->mem_alloc(be, kv_bytes, (void **)&g->vc);
    if (!st) st = be->ops->pinned_alloc(be, pinned_bytes, (void **)&g->pinned);
    if (!st) st = hz_event_create(m->device, &g->done);
    if (st) return hz_error_prefix(st, "session: device state (%llu + 2 x %llu bytes)",
                                   (unsigned long long)act_bytes, (unsigned long long)kv_bytes);
    layout_act(s, g, g->act);
    g->h_ids = (uint32_t *)g->pinned;
    g->h_w = (float *)(g->pinned + (size_t)K * 4u);
    g->h_argmax = (int32_t *)(g->pinned + (size_t)2u * K * 4u);
    s->logits = (float *)(g->pinned + hz_align_up(2u * K * 4u + 4u, 64));
    memset(s->logits, 0, (size_t)c->vocab * 4u);

    float *rope = rope_table(c, s->max_context);
    if (!rope) return HZ_ENOMEM;
    st = hz_backend_copy_h2d(be, HZ_QUEUE_COMPUTE, g->rope, rope, (uint64_t)s->max_context * c->head_dim * 4u,
                             HZ_PURPOSE_WEIGHTS);
    if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    free(rope);
    return st;
}

/* ---------------------------------------------------------------------------------------------------
 * The step
 * ------------------------------------------------------------------------------------------------- */

/* Routed experts of layer l at partial residency: ids back to the host, leases, executor, release. */
static int routed_partial(hz_session *s, uint32_t l) {
    hz_model *m = s->model;
    hz_gpu_model *gm = m->gpu;
    hz_gpu_session *g = s->gpu;
    hz_backend *be = gm->be;
    const uint32_t K = m->cfg.top_k;
    int st = hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, g->h_ids, g->route, 2u * K * 4u, HZ_PURPOSE_ROUTING);
    if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    if (st) return hz_error_prefix(st, "layer %u: reading the routing back", l);
    /* The router kernel wrote the ids ascending and distinct: the groups are consecutive slices. */
    for (uint32_t g0 = 0; g0 < K; g0 += m->group_limit) {
        const uint32_t gn = K - g0 < m->group_limit ? K - g0 : m->group_limit;
        const uint32_t *ids = g->h_ids + g0;
        hz_generation *lease = NULL;
        st = hz_model_lease_group(m, l, ids, gn, &lease, g->rows);
        if (st) return st;
        hz_moe_call call = {
            .layout = m->layout,
            .n_tokens = 1,
            .x = g->xn,
            .top_k = K,
            .topk_ids = g->h_ids,
            .topk_w = g->h_w,
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
        /* The rows are read by queued kernels: the lease ends with the event recorded after them. When
         * the call or the record failed, wait for whatever was queued and end it as finished. */
        int rst;
        if (!st && hz_event_record(g->done) == HZ_OK) {
            rst = hz_generation_release(lease, g->done);
        } else {
            int keep = st ? st : HZ_EDEVICE;
            (void)be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
            rst = hz_generation_release(lease, NULL);
            st = keep;
        }
        if (st) return st;
        if (rst) return hz_error_prefix(rst, "layer %u: releasing a lease", l);
    }
    return HZ_OK;
}

#define CALL(expr)                                                                                        \
    do {                                                                                                  \
        int st_ = (expr);                                                                                 \
        if (st_) return hz_error_prefix(st_, "layer %u", l);                                              \
    } while (0)

static int step(hz_session *s, int32_t token, uint32_t pos, int last) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_gpu_model *gm = m->gpu;
    hz_gpu_session *g = s->gpu;
    hz_backend *be = gm->be;
    void *q = gm->queue;
    const uint32_t H = c->hidden, D = c->head_dim, Hq = c->heads, Hkv = c->kv_heads, QD = Hq * D, KD = Hkv * D;
    const uint32_t E = c->experts, K = c->top_k, S = c->shared_inter, L = c->layers;
    const int qwen = c->arch == HZ_ARCH_QWEN2MOE;
    uint32_t l = 0;

    hz_resnorm_args rn = {.h = g->h, .h_in = gm->dw.embed + (size_t)token * H, .w = gm->dw.layers[0].attn_norm,
                          .y = g->xn, .eps = c->rms_eps, .n = H};
    CALL(hz_model_resnorm(&rn, q));
    for (l = 0; l < L; l++) {
        const hz_layer_weights *w = &gm->dw.layers[l];
        hz_mgemv_seg qkv[3] = {{w->wq, w->bq, g->q, QD, 0}, {w->wk, w->bk, g->k, KD, 0}, {w->wv, w->bv, g->v, KD, 0}};
        CALL(hz_model_gemv(g->xn, H, qkv, 3, q));
        const size_t kv_layer = (size_t)l * s->max_context * KD;
        hz_qkv_post_args qp = {.q = g->q, .k = g->k, .v = g->v, .q_norm = w->q_norm, .k_norm = w->k_norm,
                               .eps = c->rms_eps, .rope_cs = g->rope + (size_t)pos * D,
                               .k_dst = g->kc + kv_layer + (size_t)pos * KD, .v_dst = g->vc + kv_layer + (size_t)pos * KD,
                               .heads = Hq, .kv_heads = Hkv, .head_dim = D};
        CALL(hz_model_qkv_post(&qp, q));
        CALL(hz_model_attention(g->q, g->kc + kv_layer, g->vc + kv_layer, g->att, g->scores, s->max_context, Hq,
                                Hkv, D, pos + 1, q));
        hz_mgemv_seg o = {w->wo, w->bo, g->proj, H, 0};
        CALL(hz_model_gemv(g->att, QD, &o, 1, q));
        rn = (hz_resnorm_args){.h = g->h, .d = g->proj, .w = w->ffn_norm, .y = g->xn, .eps = c->rms_eps, .n = H};
        CALL(hz_model_resnorm(&rn, q));

        /* Router logits (FP16) and, for Qwen, the shared expert's FP32 gate/up and its FP16 gate logit:
         * four products of the same x in one launch. */
        hz_mgemv_seg mx[4] = {{w->router, NULL, g->rlog, E, 0},
                              {w->sh_gate, NULL, g->shg, S, 1},
                              {w->sh_up, NULL, g->shu, S, 1},
                              {w->sh_router, NULL, g->sgate, 1, 0}};
        CALL(hz_model_gemv(g->xn, H, mx, qwen ? 4 : 1, q));
        CALL(hz_model_route(g->rlog, E, K, c->norm_topk_prob, g->route, g->route_w,
                            gm->full ? gm->table + (size_t)l * E : NULL, g->rows_dev, q));
        CALL(be->ops->memset(be, HZ_QUEUE_COMPUTE, g->acc, 0, (uint64_t)H * 4u));
        if (gm->full)
            CALL(hz_exec_cuda_moe_device(m->exec, K, g->rows_dev, g->route_w, g->xn, g->acc, g->scratch,
                                         g->scratch_bytes, q));
        else
            CALL(routed_partial(s, l));
        if (qwen) {
            CALL(hz_model_silu_mul(g->shg, g->shu, g->sha, S, q));
            hz_mgemv_seg dn = {w->sh_down, NULL, g->shd, H, 0};
            CALL(hz_model_gemv(g->sha, S, &dn, 1, q));
        }
        /* h += moe, then the next layer's input norm (or the final norm after the last layer). */
        rn = (hz_resnorm_args){.h = g->h, .acc = g->acc, .shared = qwen ? g->shd : NULL,
                               .shared_gate = qwen ? g->sgate : NULL,
                               .w = l + 1 < L ? gm->dw.layers[l + 1].attn_norm : gm->dw.final_norm,
                               .y = g->xn, .eps = c->rms_eps, .n = H};
        CALL(hz_model_resnorm(&rn, q));
    }
    if (!last) return HZ_OK;
    hz_mgemv_seg head = {gm->dw.lm_head, NULL, g->logits, c->vocab, 1};
    CALL(hz_model_gemv(g->xn, H, &head, 1, q));
    CALL(hz_model_argmax(g->logits, c->vocab, g->argmax, q));
    CALL(hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, s->logits, g->logits, (uint64_t)c->vocab * 4u,
                             HZ_PURPOSE_ACTIVATION));
    CALL(hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, g->h_argmax, g->argmax, 4u, HZ_PURPOSE_ACTIVATION));
    CALL(be->ops->queue_sync(be, HZ_QUEUE_COMPUTE));
    return HZ_OK;
}

int hz_forward_gpu(hz_session *s, const int32_t *tokens, uint32_t n) {
    for (uint32_t t = 0; t < n; t++) {
        int st = step(s, tokens[t], s->pos + t, t + 1 == n);
        if (st) return st;
    }
    return HZ_OK;
}

int32_t hz_gpu_greedy_token(const hz_session *s) { return *s->gpu->h_argmax; }
