/* The batched prefill on a cuda device: the prompt runs through each layer a chunk of T tokens at a
 * time (dense projections as cuBLAS GEMMs, routed experts as a grouped tensor-core GEMM over the
 * chunk's (expert, token) pairs) instead of one decode step per token. Kernels: cuda/model/
 * prefill_ops.cuh; numerics: doc/numerics.md, "GPU prefill".
 *
 * One chunk, one layer:
 *   GEMM q, k, v (FP32 out) -> bias, round, q/k norm, RoPE, K/V into the cache rows pos0 .. pos0+T-1
 *   -> causal attention -> GEMM o -> residual + post-attention norm (also written in the pair layout
 *   the expert kernels read) -> GEMM router -> softmax/top-k per token -> bucketing (pairs sorted by
 *   expert, tiles of <= 32 tokens) -> routed experts -> (Qwen: shared expert GEMMs) -> residual +
 *   the next layer's input norm, which adds the routed outputs per token in ascending expert id.
 *
 * Residency, as in the decode step (forward_cuda.c):
 *   full    the experts read their blob addresses from the model's device table; the launch covers
 *           the worst-case tile count and surplus blocks exit: no host round trip in the layer;
 *   partial the per-expert token counts come back to the host (one counted D2H, purpose ROUTING),
 *           the host leases the union of routed experts in ascending groups of at most group_limit,
 *           launches the expert kernels on each group's tiles with the leased rows, and releases each
 *           lease with an event recorded after them.
 * Full and partial residency run the same blocks on the same tiles, so their results are identical.
 *
 * State (hz_gpu_prefill, one per session, created at the first batched prefill): one device
 * allocation sized for a chunk (pf_layout; at 512 tokens 69.4 MB for OLMoE-1B-7B with a 4096-token
 * context, 83.6 MB for Qwen1.5-MoE-A2.7B with 8192, the expert outputs [T*K x H] FP32 the largest
 * part), a cuBLAS handle on the compute queue (plus cuBLAS's own workspace), pinned host memory for the
 * token ids and the routing counts, an event for lease releases. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cache/cache.h"
#include "forward_cuda.h"
#include "model.h"

#include "../../cuda/model/model_ops.cuh"
#include "../../cuda/model/prefill_ops.cuh"

/* Tokens per chunk: large enough for full-width GEMMs and expert tiles, small enough that the
 * scratch stays near 70 MB. HZ_GPU_PREFILL_CHUNK overrides it (tests use small chunks). */
#define PF_CHUNK_DEFAULT 512u

struct hz_gpu_prefill {
    uint32_t chunk;      /* tokens the buffers hold */
    uint64_t bytes;      /* device bytes of mem */
    void *blas;          /* cuBLAS handle bound to the compute queue */
    uint8_t *mem;        /* one device allocation, carved below */
    int32_t *tokens;     /* [max_context] the call's token ids */
    hz_f16 *h;           /* [T x H] residual stream */
    hz_f16 *xn;          /* [T x H] normed input of attention / MoE */
    hz_f16 *xp;          /* [T x xp_stride] MoE input in the pair layout */
    float *q32, *k32, *v32; /* [T x QD], [T x KD] x2 projection sums */
    hz_f16 *q16;         /* [T x QD] rotated q */
    hz_f16 *att;         /* [T x QD] attention output */
    float *o32;          /* [T x H] o_proj sums */
    float *r32;          /* [T x E] router sums */
    uint32_t *ids;       /* [T x K] */
    float *topw;         /* [T x K] */
    uint32_t *counts;    /* [E] */
    uint32_t *n_tiles;   /* [1] */
    uint32_t *slot_tok, *slot_of; /* [T x K] */
    hz_pf_tile *tiles;   /* [max tiles] */
    hz_f16 *act;         /* [T x K x act_stride] expert intermediates, pair layout */
    float *ey;           /* [T x K x H] expert outputs */
    float *shg, *shu;    /* [T x S] shared expert gate / up (Qwen) */
    hz_f16 *sha;         /* [T x S] */
    float *shd;          /* [T x H] shared expert down sums */
    float *sgt;          /* [T] shared expert gate logit */
    uint32_t xp_stride, act_stride, max_tiles;
    uint8_t *pinned;     /* host: token ids | counts */
    int32_t *h_tokens;
    uint32_t *h_counts;
    uint32_t *h_union;   /* [E] experts with tokens, ascending */
    uint32_t *h_tile_first; /* [E] first tile of each expert */
    const void **h_rows; /* [E] blob address by expert id for one lease group, else NULL */
    const uint8_t **lease_rows; /* [group_limit] */
    hz_event *done;      /* recorded after a group's expert kernels, handed to its lease release */
};

/* ---------------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------------- */

static uint64_t pf_layout(const hz_session *s, hz_gpu_prefill *p, uint8_t *base) {
    const hz_model_config *c = &s->model->cfg;
    const uint64_t T = p->chunk, H = c->hidden, QD = (uint64_t)c->heads * c->head_dim;
    const uint64_t KD = (uint64_t)c->kv_heads * c->head_dim, E = c->experts, K = c->top_k, TK = T * K;
    const uint64_t S = c->shared_inter;
    uint64_t off = 0;
    p->tokens = hz_gpu_carve(base, &off, (uint64_t)s->max_context * 4u);
    p->h = hz_gpu_carve(base, &off, T * H * 2u);
    p->xn = hz_gpu_carve(base, &off, T * H * 2u);
    p->xp = hz_gpu_carve(base, &off, T * p->xp_stride * 2u);
    p->q32 = hz_gpu_carve(base, &off, T * QD * 4u);
    p->k32 = hz_gpu_carve(base, &off, T * KD * 4u);
    p->v32 = hz_gpu_carve(base, &off, T * KD * 4u);
    p->q16 = hz_gpu_carve(base, &off, T * QD * 2u);
    p->att = hz_gpu_carve(base, &off, T * QD * 2u);
    p->o32 = hz_gpu_carve(base, &off, T * H * 4u);
    p->r32 = hz_gpu_carve(base, &off, T * E * 4u);
    p->ids = hz_gpu_carve(base, &off, TK * 4u);
    p->topw = hz_gpu_carve(base, &off, TK * 4u);
    p->counts = hz_gpu_carve(base, &off, E * 4u);
    p->n_tiles = hz_gpu_carve(base, &off, 4u);
    p->slot_tok = hz_gpu_carve(base, &off, TK * 4u);
    p->slot_of = hz_gpu_carve(base, &off, TK * 4u);
    p->tiles = hz_gpu_carve(base, &off, (uint64_t)p->max_tiles * sizeof(hz_pf_tile));
    p->act = hz_gpu_carve(base, &off, TK * p->act_stride * 2u);
    p->ey = hz_gpu_carve(base, &off, TK * H * 4u);
    if (S) {
        p->shg = hz_gpu_carve(base, &off, T * S * 4u);
        p->shu = hz_gpu_carve(base, &off, T * S * 4u);
        p->sha = hz_gpu_carve(base, &off, T * S * 2u);
        p->shd = hz_gpu_carve(base, &off, T * H * 4u);
        p->sgt = hz_gpu_carve(base, &off, T * 4u);
    }
    return off;
}

static void pf_free(hz_session *s, hz_gpu_prefill *p) {
    if (!p) return;
    hz_backend *be = s->model->gpu->be;
    /* Nothing queued may still use the buffers or the handle. */
    (void)be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    hz_pf_blas_destroy(p->blas);
    hz_event_destroy(p->done);
    if (p->mem) be->ops->mem_free(be, p->mem);
    if (p->pinned) be->ops->pinned_free(be, p->pinned);
    free(p->h_union);
    free(p->h_tile_first);
    free(p->h_rows);
    free(p->lease_rows);
    free(p);
}

void hz_gpu_prefill_destroy(hz_session *s) {
    if (!s->gpu || !s->gpu->prefill) return;
    pf_free(s, s->gpu->prefill);
    s->gpu->prefill = NULL;
}

/* Tokens per chunk: the default or HZ_GPU_PREFILL_CHUNK, at most the context and what the bucketing
 * kernel takes (65536 pairs). */
static uint32_t pf_chunk_tokens(const hz_session *s) {
    uint32_t chunk = PF_CHUNK_DEFAULT;
    hz_env_u32("HZ_GPU_PREFILL_CHUNK", 1, 65536, &chunk);
    const uint32_t by_pairs = 65536u / s->model->cfg.top_k;
    if (chunk > by_pairs) chunk = by_pairs;
    if (chunk > s->max_context) chunk = s->max_context;
    return chunk;
}

static int pf_create(hz_session *s, hz_gpu_prefill **out) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_gpu_model *gm = m->gpu;
    hz_backend *be = gm->be;
    *out = NULL;
    hz_gpu_prefill *p = hz_calloc(1, sizeof *p);
    if (!p) return HZ_ENOMEM;
    p->chunk = pf_chunk_tokens(s);
    p->xp_stride = m->layout->gate.kp;
    p->act_stride = m->layout->down.kp;
    p->max_tiles = hz_pf_max_tiles(p->chunk, c->top_k, c->experts);
    p->bytes = pf_layout(s, p, NULL);
    const uint64_t pinned_bytes = hz_align_up((uint64_t)s->max_context * 4u, 64) + (uint64_t)c->experts * 4u;
    const uint32_t E = c->experts, G = m->group_limit ? m->group_limit : 1u;
    p->h_union = hz_calloc(E, sizeof *p->h_union);
    p->h_tile_first = hz_calloc(E, sizeof *p->h_tile_first);
    p->h_rows = hz_calloc(E, sizeof *p->h_rows);
    p->lease_rows = hz_calloc(G, sizeof *p->lease_rows);
    int st = p->h_union && p->h_tile_first && p->h_rows && p->lease_rows ? HZ_OK : HZ_ENOMEM;
    if (!st) st = be->ops->mem_alloc(be, p->bytes, (void **)&p->mem);
    if (!st) {
        pf_layout(s, p, p->mem);
        /* K padding of the pair-layout buffers must read as zeros; nothing else writes it. */
        st = be->ops->memset(be, HZ_QUEUE_COMPUTE, p->mem, 0, p->bytes);
    }
    if (!st) st = be->ops->pinned_alloc(be, pinned_bytes, (void **)&p->pinned);
    if (!st) st = hz_event_create(m->device, &p->done);
    if (!st) st = hz_pf_blas_create(gm->queue, &p->blas);
    if (st) {
        hz_error_prefix(st, "prefill: state for %u-token chunks (%llu device bytes)", p->chunk,
                        (unsigned long long)p->bytes);
        pf_free(s, p);
        return st;
    }
    p->h_tokens = (int32_t *)p->pinned;
    p->h_counts = (uint32_t *)(p->pinned + hz_align_up((uint64_t)s->max_context * 4u, 64));
    *out = p;
    return HZ_OK;
}

/* Whether the model's shapes are within the prefill kernels (route/bucket/attention limits). */
static int pf_supported(const hz_session *s) {
    const hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    const hz_expert_layout *l = m->layout;
    const uint32_t qk = (c->heads > c->kv_heads ? c->heads : c->kv_heads) * c->head_dim;
    if (c->experts > HZ_PF_MAX_EXPERTS || c->top_k > 64u || c->head_dim > 256u || c->head_dim % 2u ||
        qk > 12288u || c->heads % c->kv_heads)
        return 0;
    if (l->hidden != c->hidden || l->inter != c->expert_inter) return 0;
    return hz_pf_attention_max_positions(c->head_dim) >= s->max_context;
}

int hz_gpu_prefill_wanted(const hz_session *s, uint32_t n) {
    const char *mode = getenv("HZ_GPU_PREFILL");
    if (mode && strcmp(mode, "token") == 0) return 0;
    if (n < 2 && !(mode && strcmp(mode, "batched") == 0)) return 0;
    return pf_supported(s);
}

/* ---------------------------------------------------------------------------------------------------
 * Routed experts of one layer
 * ------------------------------------------------------------------------------------------------- */

/* Full residency: every tile in one launch pair, blob addresses from the model's device table. */
static int pf_experts_full(hz_session *s, hz_gpu_prefill *p, uint32_t l, uint32_t T, hz_pf_experts_args *xa) {
    const hz_model *m = s->model;
    const uint32_t E = m->cfg.experts;
    xa->table = (const void *const *)(m->gpu->table + (size_t)l * E);
    xa->rows_host = NULL;
    xa->n_tiles_dev = p->n_tiles;
    xa->tile_base = 0;
    xa->tile_count = hz_pf_max_tiles(T, m->cfg.top_k, E);
    return hz_pf_experts(xa, m->gpu->queue);
}

/* Partial residency: counts to the host, then one lease and one launch pair per group of experts. */
static int pf_experts_partial(hz_session *s, hz_gpu_prefill *p, uint32_t l, hz_pf_experts_args *xa) {
    hz_model *m = s->model;
    hz_backend *be = m->gpu->be;
    const uint32_t E = m->cfg.experts;
    int st = hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, p->h_counts, p->counts, (uint64_t)E * 4u, HZ_PURPOSE_ROUTING);
    if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    if (st) return hz_error_prefix(st, "reading the routing counts back");
    /* The tile numbering of the bucketing kernel: experts ascending, ceil(count / 32) tiles each. */
    uint32_t n_union = 0, nt = 0;
    for (uint32_t e = 0; e < E; e++) {
        p->h_tile_first[e] = nt;
        nt += hz_pf_tiles_of(p->h_counts[e]);
        if (p->h_counts[e]) p->h_union[n_union++] = e;
    }
    xa->table = NULL;
    xa->rows_host = p->h_rows;
    xa->n_tiles_dev = NULL;
    for (uint32_t g0 = 0; g0 < n_union; g0 += m->group_limit) {
        const uint32_t gn = n_union - g0 < m->group_limit ? n_union - g0 : m->group_limit;
        const uint32_t *ids = p->h_union + g0, last = ids[gn - 1];
        hz_generation *lease = NULL;
        st = hz_model_lease_group(m, l, ids, gn, &lease, p->lease_rows);
        if (st) return st;
        memset(p->h_rows, 0, (size_t)E * sizeof *p->h_rows);
        for (uint32_t i = 0; i < gn; i++) p->h_rows[ids[i]] = p->lease_rows[i];
        /* A group is a run of ascending experts, so its tiles are one consecutive range. */
        xa->tile_base = p->h_tile_first[ids[0]];
        xa->tile_count = p->h_tile_first[last] + hz_pf_tiles_of(p->h_counts[last]) - xa->tile_base;
        st = hz_pf_experts(xa, m->gpu->queue);
        st = hz_model_lease_end(be, l, lease, p->done, st);
        if (st) return st;
    }
    return HZ_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * One chunk through every layer
 * ------------------------------------------------------------------------------------------------- */

#define CALL(expr)                                                                                        \
    do {                                                                                                  \
        int st_ = (expr);                                                                                 \
        if (st_) return hz_error_prefix(st_, "prefill layer %u", l);                                      \
    } while (0)

/* The attention half of layer l: projections, q/k/v post-processing with the KV store, attention,
 * o_proj, residual and the post-attention norm (natural and pair layout). */
static int pf_attention_block(hz_session *s, hz_gpu_prefill *p, uint32_t l, uint32_t T, uint32_t pos0) {
    const hz_model_config *c = &s->model->cfg;
    hz_gpu_model *gm = s->model->gpu;
    hz_gpu_session *g = s->gpu;
    const hz_layer_weights *w = &gm->dw.layers[l];
    void *q = gm->queue;
    const uint32_t H = c->hidden, D = c->head_dim, QD = c->heads * D, KD = c->kv_heads * D;
    CALL(hz_pf_gemm(p->blas, w->wq, QD, H, p->xn, H, T, p->q32));
    CALL(hz_pf_gemm(p->blas, w->wk, KD, H, p->xn, H, T, p->k32));
    CALL(hz_pf_gemm(p->blas, w->wv, KD, H, p->xn, H, T, p->v32));
    const size_t kv_layer = (size_t)l * s->max_context * KD;
    hz_pf_qkv_args qa = {.tokens = T, .pos0 = pos0, .q32 = p->q32, .k32 = p->k32, .v32 = p->v32, .bq = w->bq,
                         .bk = w->bk, .bv = w->bv, .q_norm = w->q_norm, .k_norm = w->k_norm, .eps = c->rms_eps,
                         .rope = g->rope, .q_out = p->q16, .kc = g->kc + kv_layer, .vc = g->vc + kv_layer,
                         .heads = c->heads, .kv_heads = c->kv_heads, .head_dim = D};
    CALL(hz_pf_qkv(&qa, q));
    CALL(hz_pf_attention(p->q16, g->kc + kv_layer, g->vc + kv_layer, p->att, T, pos0, c->heads, c->kv_heads, D, q));
    CALL(hz_pf_gemm(p->blas, w->wo, H, QD, p->att, QD, T, p->o32));
    hz_pf_norm_args rn = {.rows = T, .n = H, .h = p->h, .d32 = p->o32, .d_bias = w->bo, .w = w->ffn_norm,
                          .y = p->xn, .y_pair = p->xp, .pair_stride = p->xp_stride, .eps = c->rms_eps};
    CALL(hz_pf_resnorm(&rn, q));
    return HZ_OK;
}

/* The MoE half of layer l up to the routed outputs: router, top-k, bucketing, routed experts and
 * (Qwen) the shared expert. The residual add follows in the next norm. */
static int pf_moe_block(hz_session *s, hz_gpu_prefill *p, uint32_t l, uint32_t T) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_gpu_model *gm = m->gpu;
    const hz_layer_weights *w = &gm->dw.layers[l];
    void *q = gm->queue;
    const uint32_t H = c->hidden, E = c->experts, K = c->top_k, S = c->shared_inter;
    CALL(hz_pf_gemm(p->blas, w->router, E, H, p->xn, H, T, p->r32));
    if (c->arch == HZ_ARCH_QWEN2MOE) {
        CALL(hz_pf_gemm(p->blas, w->sh_gate, S, H, p->xn, H, T, p->shg));
        CALL(hz_pf_gemm(p->blas, w->sh_up, S, H, p->xn, H, T, p->shu));
        CALL(hz_pf_gemm(p->blas, w->sh_router, 1, H, p->xn, H, T, p->sgt));
        CALL(hz_model_silu_mul(p->shg, p->shu, p->sha, T * S, q));
        CALL(hz_pf_gemm(p->blas, w->sh_down, H, S, p->sha, S, T, p->shd));
    }
    CALL(hz_pf_route(p->r32, T, E, K, c->norm_topk_prob, p->ids, p->topw, q));
    CALL(hz_pf_bucket(p->ids, T, K, E, p->counts, p->slot_tok, p->slot_of, p->tiles, p->n_tiles, q));
    hz_pf_experts_args xa = {.layout = m->layout, .experts = E, .tiles = p->tiles, .slot_tok = p->slot_tok,
                             .x_pair = p->xp, .x_stride = p->xp_stride, .act = p->act, .act_stride = p->act_stride,
                             .ey = p->ey, .ey_stride = H};
    if (gm->full)
        CALL(pf_experts_full(s, p, l, T, &xa));
    else
        CALL(pf_experts_partial(s, p, l, &xa));
    return HZ_OK;
}

static int pf_chunk(hz_session *s, hz_gpu_prefill *p, uint32_t c0, uint32_t T, int last) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_gpu_model *gm = m->gpu;
    hz_gpu_session *g = s->gpu;
    hz_backend *be = gm->be;
    void *q = gm->queue;
    const uint32_t H = c->hidden, L = c->layers, K = c->top_k, pos0 = s->pos + c0;
    const int qwen = c->arch == HZ_ARCH_QWEN2MOE;
    uint32_t l = 0;

    hz_pf_norm_args rn = {.rows = T, .n = H, .h = p->h, .embed = gm->dw.embed, .tokens = p->tokens + c0,
                          .w = gm->dw.layers[0].attn_norm, .y = p->xn, .eps = c->rms_eps};
    CALL(hz_pf_resnorm(&rn, q));
    for (l = 0; l < L; l++) {
        int st = pf_attention_block(s, p, l, T, pos0);
        if (!st) st = pf_moe_block(s, p, l, T);
        if (st) return st;
        /* h += routed (+ shared), then the next layer's input norm (or the final norm). */
        rn = (hz_pf_norm_args){.rows = T, .n = H, .h = p->h, .ey = p->ey, .ey_stride = H, .slot_of = p->slot_of,
                               .topk_w = p->topw, .top_k = K, .shared32 = qwen ? p->shd : NULL,
                               .gate32 = qwen ? p->sgt : NULL,
                               .w = l + 1 < L ? gm->dw.layers[l + 1].attn_norm : gm->dw.final_norm, .y = p->xn,
                               .eps = c->rms_eps};
        CALL(hz_pf_resnorm(&rn, q));
    }
    if (!last) return HZ_OK;
    /* The last token's logits stay on the device (hz_gpu_logits_fetch brings them when asked for);
     * its argmax comes back, as at the end of a decode step. */
    hz_mgemv_seg head = {gm->dw.lm_head, NULL, g->logits, c->vocab, 1};
    int st = hz_model_gemv(p->xn + (size_t)(T - 1) * H, H, &head, 1, q);
    if (!st) st = hz_model_argmax(g->logits, c->vocab, g->argmax, q);
    if (!st) st = hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, g->h_argmax, g->argmax, 4u, HZ_PURPOSE_ACTIVATION);
    if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    if (st) return hz_error_prefix(st, "prefill: logits of the last token");
    return HZ_OK;
}

int hz_gpu_prefill_forward(hz_session *s, const int32_t *tokens, uint32_t n) {
    hz_gpu_session *g = s->gpu;
    hz_backend *be = s->model->gpu->be;
    if (!g->prefill) {
        int st = pf_create(s, &g->prefill);
        if (st) return st;
    }
    hz_gpu_prefill *p = g->prefill;
    /* The session checked n <= max_context - pos, so every id fits the device array. */
    memcpy(p->h_tokens, tokens, (size_t)n * sizeof *tokens);
    int st = hz_backend_copy_h2d(be, HZ_QUEUE_COMPUTE, p->tokens, p->h_tokens, (uint64_t)n * 4u, HZ_PURPOSE_ACTIVATION);
    if (st) return hz_error_prefix(st, "prefill: copying %u token ids", n);
    for (uint32_t c0 = 0; c0 < n && !st; c0 += p->chunk) {
        const uint32_t T = n - c0 < p->chunk ? n - c0 : p->chunk;
        st = pf_chunk(s, p, c0, T, c0 + T == n);
    }
    /* After a failure the queue may still read the pinned ids the next call overwrites. */
    if (st) (void)be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    return st;
}
