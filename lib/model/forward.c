/* The forward pass of OLMoE and Qwen1.5-MoE on the CPU path (MODELS.md; rounding points in
 * doc/numerics.md). Reads top to bottom: embed -> layers -> final norm -> lm_head. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "model.h"

/* ---------------------------------------------------------------------------------------------------
 * FP16 -> FP32 for weight rows: a 64 Ki-entry table is much faster than the branchy conversion in the
 * inner loops, and gives the identical value.
 * ------------------------------------------------------------------------------------------------- */

static float g_f16_table[65536];
static pthread_once_t g_f16_once = PTHREAD_ONCE_INIT;

static void f16_table_fill(void) {
    for (uint32_t i = 0; i < 65536u; i++) g_f16_table[i] = hz_f16_to_f32((hz_f16)i);
}

static void row_to_f32(const hz_f16 *src, uint32_t n, float *dst) {
    for (uint32_t i = 0; i < n; i++) dst[i] = g_f16_table[src[i]];
}

/* FP32 dot product with eight interleaved partial sums (vectorisable without reassociation flags). */
static float dot(const float *a, const float *b, uint32_t n) {
    float s[8] = {0};
    uint32_t n8 = n & ~7u, i = 0;
    for (; i < n8; i += 8)
        for (uint32_t l = 0; l < 8; l++) s[l] += a[i + l] * b[i + l];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* y[t][r] = sum_i W[r][i] * x[t][i] (+ bias[r]) for T tokens: FP16 weights, FP32 accumulation.
 * round16: round the outputs to FP16 (a linear layer's stored output) or keep FP32 (logits, the
 * shared expert's gate/up inputs of SiLU). Rows outer, tokens inner: each weight row is converted once
 * and reused for every token. */
static void linear(const float *x, uint32_t T, uint32_t in, const hz_f16 *W, const hz_f16 *bias,
                   uint32_t out, float *y, int round16, float *wrow) {
    for (uint32_t r = 0; r < out; r++) {
        row_to_f32(W + (size_t)r * in, in, wrow);
        float b = bias ? g_f16_table[bias[r]] : 0.0f;
        for (uint32_t t = 0; t < T; t++) {
            float v = dot(wrow, x + (size_t)t * in, in) + b;
            y[(size_t)t * out + r] = round16 ? hz_round_f16(v) : v;
        }
    }
}

/* RMSNorm as the reference computes it: in FP32, cast to FP16, then times the FP16 weight (rounded). */
static void rmsnorm(const float *x, uint32_t T, uint32_t n, const hz_f16 *w, float eps, float *y) {
    for (uint32_t t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * n;
        float *yt = y + (size_t)t * n;
        float ss = dot(xt, xt, n) / (float)n;
        float inv = 1.0f / sqrtf(ss + eps);
        for (uint32_t i = 0; i < n; i++) yt[i] = hz_round_f16(g_f16_table[w[i]] * hz_round_f16(xt[i] * inv));
    }
}

/* RoPE, rotate_half style: dimension i pairs with i + D/2, angle = pos * theta^(-2i/D), all in FP32
 * as the reference builds its cos/sin tables; the rotated values are stored as FP16. */
static void rope(float *v, uint32_t heads, uint32_t D, uint32_t pos, float theta) {
    uint32_t half = D / 2u;
    for (uint32_t i = 0; i < half; i++) {
        float inv_freq = 1.0f / powf(theta, (float)(2u * i) / (float)D);
        float ang = (float)pos * inv_freq;
        float c = cosf(ang), s = sinf(ang);
        for (uint32_t h = 0; h < heads; h++) {
            float *x = v + (size_t)h * D;
            float a = x[i], b = x[i + half];
            x[i] = hz_round_f16(a * c - b * s);
            x[i + half] = hz_round_f16(b * c + a * s);
        }
    }
}

static float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Softmax over n FP32 values in place. */
static void softmax(float *x, uint32_t n) {
    float m = x[0];
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    float sum = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (uint32_t i = 0; i < n; i++) x[i] *= inv;
}

/* The router's softmax over n FP32 values in place: the same maximum and expf as softmax(), with the
 * sum added in the GPU's fixed order (doc/numerics.md): lane l of 32 adds values l, l + 32, ... in that
 * order, then the 32 lane sums meet pairwise at distances 16, 8, 4, 2, 1 (lane l adds lane l ^ d;
 * a + b and b + a are the same float, so every lane holds the same sum), as a warp's xor butterflies do. */
static void router_softmax(float *x, uint32_t n) {
    float m = x[0], lanes[32] = {0}, next[32];
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    for (uint32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        lanes[i % 32u] += x[i];
    }
    for (uint32_t d = 16; d > 0; d >>= 1) {
        for (uint32_t l = 0; l < 32; l++) next[l] = lanes[l] + lanes[l ^ d];
        memcpy(lanes, next, sizeof lanes);
    }
    float inv = 1.0f / lanes[0];
    for (uint32_t i = 0; i < n; i++) x[i] *= inv;
}

/* ---------------------------------------------------------------------------------------------------
 * Run state
 * ------------------------------------------------------------------------------------------------- */

void hz_run_state_free(hz_run_state *rs) {
    free(rs->h);
    free(rs->xn);
    free(rs->q);
    free(rs->k);
    free(rs->v);
    free(rs->att);
    free(rs->proj);
    free(rs->acc);
    free(rs->rlog);
    free(rs->topk_ids);
    free(rs->topk_w);
    free(rs->x16);
    free(rs->sh_g);
    free(rs->sh_u);
    free(rs->scores);
    free(rs->wrow);
    free(rs->group);
    free(rs->rows);
    free(rs->used);
    memset(rs, 0, sizeof *rs);
}

static int grow(void **p, size_t count, size_t size) {
    void *n = realloc(*p, (count ? count : 1) * size);
    if (!n) return hz_error(HZ_ENOMEM, "out of memory growing a run-state buffer (%zu x %zu bytes)", count, size);
    *p = n;
    return HZ_OK;
}

int hz_run_state_reserve(hz_session *s, uint32_t n) {
    hz_run_state *rs = &s->rs;
    const hz_model_config *c = &s->model->cfg;
    if (n <= rs->cap) return HZ_OK;
    pthread_once(&g_f16_once, f16_table_fill);
    size_t T = n, H = c->hidden, QD = (size_t)c->heads * c->head_dim, KD = (size_t)c->kv_heads * c->head_dim;
    size_t E = c->experts, K = c->top_k, S = c->shared_inter;
    size_t wmax = H > QD ? H : QD;
    if (S > wmax) wmax = S;
    int st = HZ_OK;
    st = st ? st : grow((void **)&rs->h, T * H, sizeof(float));
    st = st ? st : grow((void **)&rs->xn, T * H, sizeof(float));
    st = st ? st : grow((void **)&rs->q, T * QD, sizeof(float));
    st = st ? st : grow((void **)&rs->k, T * KD, sizeof(float));
    st = st ? st : grow((void **)&rs->v, T * KD, sizeof(float));
    st = st ? st : grow((void **)&rs->att, T * QD, sizeof(float));
    st = st ? st : grow((void **)&rs->proj, T * H, sizeof(float));
    st = st ? st : grow((void **)&rs->acc, T * H, sizeof(float));
    st = st ? st : grow((void **)&rs->rlog, T * E, sizeof(float));
    st = st ? st : grow((void **)&rs->topk_ids, T * K, sizeof(uint32_t));
    st = st ? st : grow((void **)&rs->topk_w, T * K, sizeof(float));
    st = st ? st : grow((void **)&rs->x16, T * H, sizeof(hz_f16));
    st = st ? st : grow((void **)&rs->sh_g, T * S, sizeof(float));
    st = st ? st : grow((void **)&rs->sh_u, T * S, sizeof(float));
    st = st ? st : grow((void **)&rs->scores, s->max_context, sizeof(float));
    st = st ? st : grow((void **)&rs->wrow, wmax, sizeof(float));
    st = st ? st : grow((void **)&rs->group, E, sizeof(uint32_t));
    st = st ? st : grow((void **)&rs->rows, E, sizeof(const uint8_t *));
    st = st ? st : grow((void **)&rs->used, E, 1);
    if (st) return st;
    rs->cap = n;
    return HZ_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Attention: q/k/v projections, (OLMoE) q/k norm, RoPE, the KV cache, causal softmax attention, o_proj.
 * Writes the attention block's output into rs->proj.
 * ------------------------------------------------------------------------------------------------- */

static void attention(hz_session *s, uint32_t l, uint32_t T) {
    const hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    const hz_layer_weights *w = &m->w.layers[l];
    hz_run_state *rs = &s->rs;
    const uint32_t H = c->hidden, D = c->head_dim, Hq = c->heads, Hkv = c->kv_heads;
    const uint32_t QD = Hq * D, KD = Hkv * D;

    linear(rs->xn, T, H, w->wq, w->bq, QD, rs->q, 1, rs->wrow);
    linear(rs->xn, T, H, w->wk, w->bk, KD, rs->k, 1, rs->wrow);
    linear(rs->xn, T, H, w->wv, w->bv, KD, rs->v, 1, rs->wrow);
    if (c->qk_norm) { /* over the full projection width, all heads jointly */
        rmsnorm(rs->q, T, QD, w->q_norm, c->rms_eps, rs->q);
        rmsnorm(rs->k, T, KD, w->k_norm, c->rms_eps, rs->k);
    }
    size_t kv_layer = (size_t)l * s->max_context * KD;
    for (uint32_t t = 0; t < T; t++) {
        uint32_t p = s->pos + t;
        rope(rs->q + (size_t)t * QD, Hq, D, p, c->rope_theta);
        rope(rs->k + (size_t)t * KD, Hkv, D, p, c->rope_theta);
        hz_f16 *kc = s->kcache + kv_layer + (size_t)p * KD, *vc = s->vcache + kv_layer + (size_t)p * KD;
        for (uint32_t i = 0; i < KD; i++) {
            kc[i] = hz_f32_to_f16(rs->k[(size_t)t * KD + i]);
            vc[i] = hz_f32_to_f16(rs->v[(size_t)t * KD + i]);
        }
    }

    const float scale = 1.0f / sqrtf((float)D);
    const uint32_t group = Hq / Hkv; /* query heads per KV head */
    float *kf = rs->wrow;            /* one cached K or V vector in FP32 (D <= wrow's length) */
    for (uint32_t t = 0; t < T; t++) {
        uint32_t p = s->pos + t; /* attends to positions 0..p */
        for (uint32_t h = 0; h < Hq; h++) {
            const float *qh = rs->q + (size_t)t * QD + (size_t)h * D;
            size_t koff = kv_layer + (size_t)(h / group) * D;
            for (uint32_t j = 0; j <= p; j++) {
                row_to_f32(s->kcache + koff + (size_t)j * KD, D, kf);
                rs->scores[j] = dot(qh, kf, D) * scale;
            }
            softmax(rs->scores, p + 1);
            float *out = rs->att + (size_t)t * QD + (size_t)h * D;
            for (uint32_t d = 0; d < D; d++) out[d] = 0.0f;
            for (uint32_t j = 0; j <= p; j++) {
                const hz_f16 *vj = s->vcache + koff + (size_t)j * KD;
                float pj = rs->scores[j];
                for (uint32_t d = 0; d < D; d++) out[d] += pj * g_f16_table[vj[d]];
            }
            for (uint32_t d = 0; d < D; d++) out[d] = hz_round_f16(out[d]);
        }
    }
    linear(rs->att, T, QD, w->wo, w->bo, H, rs->proj, 1, rs->wrow);
}

/* ---------------------------------------------------------------------------------------------------
 * MoE block: router softmax + top-k, routed experts through cache leases and the executor, and (Qwen)
 * the sigmoid-gated shared expert. Writes the block's output into rs->proj.
 * ------------------------------------------------------------------------------------------------- */

/* Top-k of p[0..E) by value, ties to the lower id (torch.topk does not promise an order for ties;
 * this rule is ours and is what the GPU path must do too). The router ranks its logits with it: softmax
 * is monotonic, so they give the experts of the largest probabilities, and the ranking needs no
 * exponential (the GPU ranks while it adds them). */
static void topk(const float *p, uint32_t E, uint32_t K, uint32_t *ids, float *vals) {
    uint32_t n = 0;
    for (uint32_t e = 0; e < E; e++) {
        /* insertion into the sorted prefix; strict > keeps an earlier (lower) id ahead on ties */
        if (n == K && !(p[e] > vals[K - 1])) continue;
        uint32_t i = n < K ? n++ : K - 1;
        while (i > 0 && p[e] > vals[i - 1]) {
            vals[i] = vals[i - 1];
            ids[i] = ids[i - 1];
            i--;
        }
        vals[i] = p[e];
        ids[i] = e;
    }
}

/* Speculative prefetch (cache option HZ_PREFETCH_NEXT_LAYER): layer l+1's router applied to layer l's
 * MoE input (rs->xn, the same FP16 values the router of layer l saw) predicts the next layer's experts,
 * and the cache starts loading the missing ones on its own thread while layer l's experts compute here.
 * Decode only (one token): a prefill's union of experts can exceed a layer's capacity and is not
 * latency-bound per layer. The request is advisory and cannot change a result (a row holds its expert's
 * bytes whoever loaded it), so its status is dropped: the cache counts what it did, and a FAULTED cache
 * is reported by the next acquire. Uses rs->rlog, whose probabilities are already in topk_ids/topk_w. */
#define HZ_PREFETCH_MAX_IDS 64u

static void prefetch_next_layer(hz_session *s, uint32_t l) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_run_state *rs = &s->rs;
    uint32_t n = c->top_k;
    if (n > HZ_PREFETCH_MAX_IDS) n = HZ_PREFETCH_MAX_IDS;
    if (n > m->group_limit) n = m->group_limit; /* a request is one group: at most the capacity */
    if (l + 1 >= c->layers || n == 0) return;
    if (!hz_cache_prefetch_admit(m->cache)) return; /* the gate is closed: no router work either */
    uint32_t ids[HZ_PREFETCH_MAX_IDS];
    float vals[HZ_PREFETCH_MAX_IDS];
    linear(rs->xn, 1, c->hidden, m->w.layers[l + 1].router, NULL, c->experts, rs->rlog, 1, rs->wrow);
    topk(rs->rlog, c->experts, n, ids, vals); /* on the logits, as the router (see topk) */
    (void)hz_cache_prefetch(m->cache, l + 1, ids, n);
}

static int routed_experts(hz_session *s, uint32_t l, uint32_t T) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    hz_run_state *rs = &s->rs;
    const uint32_t H = c->hidden, E = c->experts, K = c->top_k;

    /* The union of experts routed to by any token, ascending. */
    uint8_t *used = rs->used;
    memset(used, 0, E);
    for (size_t i = 0; i < (size_t)T * K; i++) used[rs->topk_ids[i]] = 1;
    uint32_t n_union = 0;
    for (uint32_t e = 0; e < E; e++)
        if (used[e]) rs->group[n_union++] = e;

    for (size_t i = 0; i < (size_t)T * H; i++) {
        rs->acc[i] = 0.0f;
        rs->x16[i] = hz_f32_to_f16(rs->xn[i]);
    }
    /* Groups of at most group_limit experts, ascending ids, one lease each. The executor adds into the
     * FP32 accumulators in ascending expert id across groups, so the grouping (decode vs prefill,
     * full vs partial residency) never changes the result. */
    for (uint32_t g0 = 0; g0 < n_union; g0 += m->group_limit) {
        uint32_t gn = n_union - g0 < m->group_limit ? n_union - g0 : m->group_limit;
        const uint32_t *ids = rs->group + g0;
        hz_generation *lease = NULL;
        int st = hz_model_lease_group(m, l, ids, gn, &lease, rs->rows);
        if (st) return st;
        /* After this layer's last acquire (so it never queues ahead of it), before its experts run. */
        if (T == 1 && g0 + gn == n_union && hz_cache_prefetch_mode(m->cache) == HZ_PREFETCH_NEXT_LAYER)
            prefetch_next_layer(s, l);
        hz_moe_call call = {
            .layout = m->layout,
            .n_tokens = T,
            .x = rs->x16,
            .top_k = K,
            .topk_ids = rs->topk_ids,
            .topk_w = rs->topk_w,
            .n_group = gn,
            .group_ids = ids,
            .rows = rs->rows,
            .acc = rs->acc,
        };
        st = m->exec->ops->moe(m->exec, &call);
        /* The cpu executors are synchronous: when moe() returns, the rows have been read, so the
         * lease ends with no consumer event (NULL = already finished). */
        st = hz_model_lease_end(NULL, l, lease, NULL, st);
        if (st) return st;
    }
    for (size_t i = 0; i < (size_t)T * H; i++) rs->proj[i] = hz_round_f16(rs->acc[i]);
    return HZ_OK;
}

static int moe(hz_session *s, uint32_t l, uint32_t T) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    const hz_layer_weights *w = &m->w.layers[l];
    hz_run_state *rs = &s->rs;
    const uint32_t H = c->hidden, E = c->experts, K = c->top_k;

    /* Router: FP16 logits, the top-k of the logits (see topk), softmax over all experts in FP32, the
     * chosen experts' probabilities, optional renormalisation. The weights stay FP32 into the executor
     * (one rounding fewer than storing them as FP16). */
    linear(rs->xn, T, H, w->router, NULL, E, rs->rlog, 1, rs->wrow);
    for (uint32_t t = 0; t < T; t++) {
        float *p = rs->rlog + (size_t)t * E;
        uint32_t *ids = rs->topk_ids + (size_t)t * K;
        float *tw = rs->topk_w + (size_t)t * K;
        topk(p, E, K, ids, tw);
        router_softmax(p, E);
        for (uint32_t k = 0; k < K; k++) tw[k] = p[ids[k]];
        if (c->norm_topk_prob) {
            float sum = 0.0f;
            for (uint32_t k = 0; k < K; k++) sum += tw[k];
            for (uint32_t k = 0; k < K; k++) tw[k] /= sum;
        }
    }
    int st = routed_experts(s, l, T);
    if (st) return st;

    if (c->arch == HZ_ARCH_QWEN2MOE) {
        /* out += sigmoid(shared_expert_gate(x)) * shared_expert(x); the shared expert uses the routed
         * experts' math: FP32 gate/up, a = fp16(silu(g) * u), down stored as FP16. */
        const uint32_t S = c->shared_inter;
        linear(rs->xn, T, H, w->sh_gate, NULL, S, rs->sh_g, 0, rs->wrow);
        linear(rs->xn, T, H, w->sh_up, NULL, S, rs->sh_u, 0, rs->wrow);
        for (size_t i = 0; i < (size_t)T * S; i++) {
            float g = rs->sh_g[i];
            rs->sh_g[i] = hz_round_f16(g / (1.0f + expf(-g)) * rs->sh_u[i]);
        }
        linear(rs->sh_g, T, S, w->sh_down, NULL, H, rs->acc, 1, rs->wrow); /* acc is free again */
        float *gate = rs->rlog; /* [T] shared_expert_gate outputs; the router logits are used up */
        linear(rs->xn, T, H, w->sh_router, NULL, 1, gate, 1, rs->wrow);
        for (uint32_t t = 0; t < T; t++) {
            float sg = sigmoidf_(gate[t]);
            for (uint32_t j = 0; j < H; j++) {
                size_t i = (size_t)t * H + j;
                rs->proj[i] = hz_round_f16(rs->proj[i] + hz_round_f16(sg * rs->acc[i]));
            }
        }
    }
    return HZ_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * The whole pass
 * ------------------------------------------------------------------------------------------------- */

static void residual_add(float *h, const float *d, size_t n) {
    for (size_t i = 0; i < n; i++) h[i] = hz_round_f16(h[i] + d[i]);
}

int hz_forward(hz_session *s, const int32_t *tokens, uint32_t T) {
    hz_model *m = s->model;
    const hz_model_config *c = &m->cfg;
    int st = hz_run_state_reserve(s, T);
    if (st) return st;
    hz_run_state *rs = &s->rs;
    const uint32_t H = c->hidden;

    for (uint32_t t = 0; t < T; t++) row_to_f32(m->w.embed + (size_t)tokens[t] * H, H, rs->h + (size_t)t * H);

    for (uint32_t l = 0; l < c->layers; l++) {
        rmsnorm(rs->h, T, H, m->w.layers[l].attn_norm, c->rms_eps, rs->xn);
        attention(s, l, T);
        residual_add(rs->h, rs->proj, (size_t)T * H);
        rmsnorm(rs->h, T, H, m->w.layers[l].ffn_norm, c->rms_eps, rs->xn);
        st = moe(s, l, T);
        if (st) return st;
        residual_add(rs->h, rs->proj, (size_t)T * H);
    }

    /* Only the last token's logits are kept (prefill needs no others). */
    const float *last = rs->h + (size_t)(T - 1) * H;
    rmsnorm(last, 1, H, m->w.final_norm, c->rms_eps, rs->xn);
    linear(rs->xn, 1, H, m->w.lm_head, NULL, c->vocab, s->logits, 0, rs->wrow);
    return HZ_OK;
}
