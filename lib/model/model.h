/* lib/model: architectures (olmoe, qwen2moe), sessions, KV cache, sampler, prefill and decode.
 *
 * Three kinds of state, kept apart so the forward pass reads top to bottom:
 *   hz_model_config (lib/format/hfconfig.h)  the shape, immutable
 *   hz_weights                                 pointers to the non-routed FP16 tensors, immutable
 *   hz_run_state / KV cache (in hz_session)    everything a forward pass writes
 * Routed experts are not in hz_weights: they are reached through cache leases only.
 *
 * Activations are FP16 values between operations. They are held in float arrays whose every element
 * is exactly representable in binary16 (rounded with hz_round_f16 at the points doc/numerics.md lists),
 * which keeps the arithmetic simple and makes the rounding points explicit. */
#ifndef HZ_MODEL_H
#define HZ_MODEL_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/core.h"
#include "core/fp16.h"
#include "exec/exec.h"
#include "format/hfconfig.h"
#include "format/qpack.h"

typedef struct hz_layer_weights {
    const hz_f16 *attn_norm;                /* [H] input_layernorm */
    const hz_f16 *wq, *wk, *wv, *wo;        /* [Hq*D x H], [Hkv*D x H] x2, [H x Hq*D] */
    const hz_f16 *bq, *bk, *bv;             /* q/k/v biases (Qwen; OLMoE attention_bias), else NULL */
    const hz_f16 *bo;                       /* o_proj bias (OLMoE attention_bias only), else NULL */
    const hz_f16 *q_norm, *k_norm;          /* OLMoE: [Hq*D], [Hkv*D]; NULL for Qwen */
    const hz_f16 *ffn_norm;                 /* [H] post_attention_layernorm */
    const hz_f16 *router;                   /* [E x H] mlp.gate */
    const hz_f16 *sh_gate, *sh_up, *sh_down; /* Qwen shared expert [S x H], [S x H], [H x S] */
    const hz_f16 *sh_router;                /* Qwen shared_expert_gate [1 x H] */
} hz_layer_weights;

typedef struct hz_weights {
    const hz_f16 *embed;      /* [V x H] */
    const hz_f16 *final_norm; /* [H] */
    const hz_f16 *lm_head;    /* [V x H] (the embedding when tied) */
    hz_layer_weights *layers; /* [layers] */
} hz_weights;

/* The GPU path's state (forward_cuda.c, CUDA builds only); NULL on the cpu path. */
typedef struct hz_gpu_model hz_gpu_model;
typedef struct hz_backend hz_backend; /* backend/backend.h */
typedef struct hz_gpu_session hz_gpu_session;

struct hz_model {
    hz_model_config cfg;
    hz_weights w;
    hz_host_backing *backing;
    hz_device *device;
    hz_cache *cache;
    hz_executor *exec;
    const hz_expert_layout *layout;
    uint32_t group_limit; /* most experts one lease may cover (cache capacity, spare rows) */
    _Atomic int sessions;
    hz_gpu_model *gpu; /* device-side weights and routing table when the device is cuda */
    int lm_head_screen; /* no HZ_MODEL_NO_LM_HEAD_SCREEN in hz_model_options.flags: cuda keeps the screen */
};

/* Sampler state (sampler.c). */
typedef struct hz_sampler {
    float temperature;
    uint32_t top_k;
    float top_p;
    uint64_t seed;
    uint64_t s[4];  /* xoshiro256** state */
    uint32_t *idx;  /* [vocab] candidate ids */
    float *prob;    /* [vocab] candidate probabilities */
} hz_sampler;

int hz_sampler_init(hz_sampler *sp, uint32_t vocab);
void hz_sampler_free(hz_sampler *sp);
/* Validates and installs options (HZ_EINVAL naming the field); restarts the PRNG from the seed. */
int hz_sampler_configure(hz_sampler *sp, const hz_sampler_options *opts);
void hz_sampler_restart(hz_sampler *sp);
/* Picks the next token from FP32 logits. Greedy (temperature 0): the largest logit, ties to the lowest
 * id. Otherwise softmax(logits / temperature) restricted to the top_k largest, then to the smallest
 * prefix whose mass reaches top_p, sampled with the seeded PRNG. */
int32_t hz_sampler_sample(hz_sampler *sp, const float *logits, uint32_t vocab);

/* Buffers a forward pass of up to `cap` tokens writes (grown on demand). */
typedef struct hz_run_state {
    uint32_t cap;
    float *h;      /* [T x H] residual stream */
    float *xn;     /* [T x H] normed input of attention / MoE */
    float *q;      /* [T x Hq*D] */
    float *k, *v;  /* [T x Hkv*D] */
    float *att;    /* [T x Hq*D] attention output */
    float *proj;   /* [T x H] o_proj / MoE output */
    float *acc;    /* [T x H] FP32 routed-expert accumulator */
    float *rlog;   /* [T x E] router logits, then probabilities */
    uint32_t *topk_ids; /* [T x K] */
    float *topk_w;      /* [T x K] */
    hz_f16 *x16;        /* [T x H] MoE input handed to the executor */
    float *sh_g, *sh_u; /* [T x S] shared-expert gate/up (Qwen) */
    float *scores;      /* [max_context] attention scores of one head */
    float *wrow;        /* [max(H, Hq*D, S)] one weight row in FP32 */
    uint32_t *group;    /* [E] union of routed experts of a layer */
    const uint8_t **rows; /* [E] row addresses of a lease */
    uint8_t *used;        /* [E] experts routed to in a layer */
} hz_run_state;

struct hz_session {
    hz_model *model;
    uint32_t max_context;
    uint32_t pos;
    hz_f16 *kcache, *vcache; /* [layers x max_context x Hkv*D] */
    hz_run_state rs;
    float *logits; /* [vocab] of the last token run */
    int have_logits;
    hz_sampler sampler;
    uint64_t tokens_prefilled, tokens_decoded, prefill_calls, decode_calls;
    double prefill_seconds, decode_seconds;
    hz_gpu_session *gpu; /* device KV cache and activations when the model is on cuda */
};

/* model.c: acquires a lease on experts ids[0..n) (ascending, distinct) of `layer` and writes each
 * expert's row address into rows[0..n). On failure nothing is held and the message names the layer and
 * expert. Both forward paths use it, so a group is leased the same way on every device. */
int hz_model_lease_group(hz_model *m, uint32_t layer, const uint32_t *ids, uint32_t n,
                         hz_generation **out, const uint8_t **rows);

/* model.c: ends a group's lease once the work that reads its rows (status st) is over. done == NULL:
 * that work has finished (synchronous executors). Otherwise `done` is recorded after the work on be's
 * compute queue and the lease ends with it; when the work failed to queue or the record failed, the
 * compute queue is waited for and the lease ends as finished. Returns st when it is nonzero, else the
 * release's status (message prefixed with the layer). */
int hz_model_lease_end(hz_backend *be, uint32_t layer, hz_generation *lease, hz_event *done, int st);

/* forward.c: runs tokens[0..n) at positions session->pos.. through every layer, writes their K/V into
 * the session's cache and the last token's FP32 logits into session->logits. Does not move pos. */
int hz_forward(hz_session *s, const int32_t *tokens, uint32_t n);
/* Grows the run state to hold n tokens. */
int hz_run_state_reserve(hz_session *s, uint32_t n);
void hz_run_state_free(hz_run_state *rs);

/* forward_cuda.c (built with CUDA only): the same forward pass on a cuda device. The model part
 * uploads the non-routed FP16 weights once and, at full residency, builds the device routing table;
 * the session part owns the device KV cache, activations and pinned logits (it sets s->logits).
 * hz_forward_gpu has hz_forward's contract; hz_gpu_greedy_token gives the device argmax of the last
 * logits (ties to the lowest id, as the sampler's greedy rule). */
int hz_gpu_model_create(hz_model *m);
void hz_gpu_model_destroy(hz_model *m);
/* Whether the model's device holds the lm_head screen's INT8 copy (forward_cuda.c, lm_screen_setup). */
int hz_gpu_model_has_lm_screen(const hz_model *m);
int hz_gpu_session_create(hz_session *s);
void hz_gpu_session_destroy(hz_session *s);
int hz_forward_gpu(hz_session *s, const int32_t *tokens, uint32_t n);
int32_t hz_gpu_greedy_token(const hz_session *s);

#endif
