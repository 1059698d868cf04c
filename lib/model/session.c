/* hz_session: FP16 KV cache, position, sampler; prefill, decode and the public session calls. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "model.h"
#ifdef HZ_HAVE_CUDA
#include "forward_cuda.h"
#endif

HZ_EXPORT void hz_session_options_init_sized(hz_session_options *opts, size_t size) {
    hz_session_options d;
    memset(&d, 0, sizeof d);
    hz_options_fill(opts, size, &d, sizeof d);
}

/* The compatibility entry point for programs built before hz_session_options_init became a macro
 * (horizon.h; the parentheses keep the macro from applying): fills sizeof as this library knows it,
 * which is the size in those programs' headers (0.1.0). Should the struct grow, this must keep filling
 * the 0.1.0 size (doc/abi.md; tests/unit/core/test_options.c pins it). */
HZ_EXPORT void (hz_session_options_init)(hz_session_options *opts) {
    hz_session_options_init_sized(opts, sizeof *opts);
}

HZ_EXPORT void hz_sampler_options_init_sized(hz_sampler_options *opts, size_t size) {
    hz_sampler_options d;
    memset(&d, 0, sizeof d);
    d.temperature = 0.0f;
    d.top_k = 0;
    d.top_p = 1.0f;
    d.seed = 0;
    hz_options_fill(opts, size, &d, sizeof d);
}

/* The compatibility entry point for programs built before hz_sampler_options_init became a macro
 * (horizon.h; the parentheses keep the macro from applying): fills sizeof as this library knows it,
 * which is the size in those programs' headers (0.1.0). Should the struct grow, this must keep filling
 * the 0.1.0 size (doc/abi.md; tests/unit/core/test_options.c pins it). */
HZ_EXPORT void (hz_sampler_options_init)(hz_sampler_options *opts) {
    hz_sampler_options_init_sized(opts, sizeof *opts);
}

static void session_free(hz_session *s) {
#ifdef HZ_HAVE_CUDA
    hz_gpu_session_destroy(s); /* its logits live in its pinned block: s->logits becomes NULL */
#endif
    hz_sampler_free(&s->sampler);
    hz_run_state_free(&s->rs);
    free(s->kcache);
    free(s->vcache);
    free(s->logits);
    free(s);
}

HZ_EXPORT int hz_session_create(hz_model *model, const hz_session_options *opts, hz_session **out) {
    if (out) *out = NULL;
    if (!model || !out) return hz_error(HZ_EINVAL, "hz_session_create: model and out must not be NULL");
    hz_session_options o;
    hz_session_options_init(&o);
    int merged = hz_options_merge(&o, sizeof o, opts, 0, "hz_session_create");
    if (merged) return merged;
    const hz_model_config *c = &model->cfg;
    uint32_t ctx = o.max_context ? o.max_context : c->max_pos;
    if (ctx > c->max_pos)
        return hz_error(HZ_ERANGE, "hz_session_create: max_context %u above the model's %u", ctx, c->max_pos);
    uint64_t kv_elems;
    if (!hz_mul_ok((uint64_t)c->layers * ctx, (uint64_t)c->kv_heads * c->head_dim, &kv_elems) ||
        kv_elems > SIZE_MAX / 2u)
        return hz_error(HZ_ENOMEM, "hz_session_create: KV cache of %u tokens too large", ctx);

    hz_session *s = hz_calloc(1, sizeof *s);
    if (!s) return HZ_ENOMEM;
    s->model = model;
    s->max_context = ctx;
    int st;
#ifdef HZ_HAVE_CUDA
    if (model->gpu) {
        /* KV cache, activations and (pinned) logits live with the device state. */
        st = hz_gpu_session_create(s);
        if (!st) st = hz_sampler_init(&s->sampler, c->vocab);
    } else
#endif
    {
        s->kcache = hz_malloc((size_t)kv_elems * sizeof(hz_f16));
        s->vcache = s->kcache ? hz_malloc((size_t)kv_elems * sizeof(hz_f16)) : NULL;
        s->logits = s->vcache ? hz_calloc(c->vocab, sizeof(float)) : NULL;
        st = s->logits ? hz_sampler_init(&s->sampler, c->vocab) : HZ_ENOMEM;
        if (!st) st = hz_run_state_reserve(s, 1);
    }
    if (st) {
        session_free(s);
        return st;
    }
    atomic_fetch_add(&model->sessions, 1);
    *out = s;
    return HZ_OK;
}

HZ_EXPORT void hz_session_destroy(hz_session *s) {
    if (!s) return;
    atomic_fetch_sub(&s->model->sessions, 1);
    session_free(s);
}

HZ_EXPORT int hz_session_reset(hz_session *s) {
    if (!s) return hz_error(HZ_EINVAL, "hz_session_reset: NULL session");
    s->pos = 0;
    s->have_logits = 0;
    hz_sampler_restart(&s->sampler);
    return HZ_OK;
}

HZ_EXPORT int hz_session_set_sampler(hz_session *s, const hz_sampler_options *opts) {
    if (!s) return hz_error(HZ_EINVAL, "hz_session_set_sampler: NULL session");
    return hz_sampler_configure(&s->sampler, opts);
}

HZ_EXPORT uint32_t hz_session_position(const hz_session *s) { return s ? s->pos : 0; }

/* Validates, runs, advances. Nothing runs when the input is rejected; on a failure during the run the
 * position stays where it was (the K/V written for the failed tokens is overwritten by the next run)
 * and no logits are readable. *out_next (never NULL: run() passes its own local) is written only on
 * success. */
static int run_tokens(hz_session *s, const int32_t *tokens, uint32_t n, int32_t *out_next, int decode) {
    const char *what = decode ? "hz_decode_step" : "hz_prefill";
    if (!s || !tokens) return hz_error(HZ_EINVAL, "%s: NULL argument", what);
    if (n == 0) return hz_error(HZ_EINVAL, "%s: zero tokens to run", what);
    /* The length first: it is O(1) and bounds the reads of tokens below (a huge n, e.g. a negative
     * count cast to uint32_t, must not make the loop read past the caller's buffer). */
    if (n > s->max_context - s->pos)
        return hz_error(HZ_ERANGE, "%s: %u token(s) at position %u exceed the session's max_context %u",
                        what, n, s->pos, s->max_context);
    const uint32_t V = s->model->cfg.vocab;
    for (uint32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= V) {
            if (decode)
                return hz_error(HZ_ERANGE, "%s: token %d is outside the vocabulary [0, %u)", what,
                                (int)tokens[i], V);
            return hz_error(HZ_ERANGE, "%s: token %u of %u is %d, outside the vocabulary [0, %u)", what, i, n,
                            (int)tokens[i], V);
        }
    double t0 = hz_now_seconds();
    s->have_logits = 0;
    int st;
    int32_t next;
#ifdef HZ_HAVE_CUDA
    if (s->gpu) {
        /* The logits stay on the device: greedy picks come from the device's argmax (same rule:
         * largest logit, lowest id on ties); a sampler or hz_session_logits fetches them. */
        hz_gpu_logits_invalidate(s);
        st = hz_forward_gpu(s, tokens, n);
        if (st) return st;
        if (s->sampler.temperature == 0.0f) {
            next = hz_gpu_greedy_token(s);
        } else {
            st = hz_gpu_logits_fetch(s);
            if (st) return st;
            next = hz_sampler_sample(&s->sampler, s->logits, V);
        }
    } else
#endif
    {
        st = hz_forward(s, tokens, n);
        if (st) return st;
        next = hz_sampler_sample(&s->sampler, s->logits, V);
    }
    s->pos += n;
    s->have_logits = 1;
    double dt = hz_now_seconds() - t0;
    if (decode) {
        s->tokens_decoded += n;
        s->decode_calls++;
        s->decode_seconds += dt;
    } else {
        s->tokens_prefilled += n;
        s->prefill_calls++;
        s->prefill_seconds += dt;
    }
    *out_next = next;
    return HZ_OK;
}

/* *out_next is written once, when the outcome is known (the token on success, 0 on any error), so an
 * out_next that aliases an element of tokens cannot change the tokens that are run. */
static int run(hz_session *s, const int32_t *tokens, uint32_t n, int32_t *out_next, int decode) {
    int32_t next = 0;
    int st = run_tokens(s, tokens, n, &next, decode);
    if (out_next) *out_next = st ? 0 : next;
    return st;
}

HZ_EXPORT int hz_prefill(hz_session *s, const int32_t *tokens, uint32_t n, int32_t *out_next) {
    return run(s, tokens, n, out_next, 0);
}

HZ_EXPORT int hz_decode_step(hz_session *s, int32_t token, int32_t *out_next) {
    return run(s, &token, 1, out_next, 1);
}

HZ_EXPORT int hz_session_logits(const hz_session *s, const float **out, uint32_t *out_count) {
    if (out) *out = NULL;
    if (out_count) *out_count = 0;
    if (!s || !out) return hz_error(HZ_EINVAL, "hz_session_logits: NULL argument");
    if (!s->have_logits)
        return hz_error(HZ_ESTATE, "hz_session_logits: no logits (no token has run since the session was created "
                                   "or reset, or the last run failed)");
#ifdef HZ_HAVE_CUDA
    /* On a cuda session the logits are copied from the device on first request after a run (the
     * buffer s->logits itself never moves; it is overwritten by the next run's first request). */
    if (s->gpu) {
        int st = hz_gpu_logits_fetch(s);
        if (st) return hz_error_prefix(st, "hz_session_logits");
    }
#endif
    *out = s->logits;
    if (out_count) *out_count = s->model->cfg.vocab;
    return HZ_OK;
}

HZ_EXPORT int hz_session_stats_json(const hz_session *s, char **out) {
    if (out) *out = NULL;
    if (!s || !out) return hz_error(HZ_EINVAL, "hz_session_stats_json: NULL argument");
    char buf[1536], dev[1024] = ""; /* dev: the decode fields, a 200-byte capture failure reason included */
#ifdef HZ_HAVE_CUDA
    /* cuda sessions add how their decode steps ran (CUDA graph or eager, and why). */
    if (s->gpu) {
        int st = hz_gpu_session_stats(s, dev, sizeof dev);
        if (st) return hz_error_prefix(st, "hz_session_stats_json");
    }
#endif
    int n = snprintf(buf, sizeof buf,
                     "{\"position\":%u,\"max_context\":%u,\"tokens_prefilled\":%llu,\"prefill_calls\":%llu,"
                     "\"prefill_seconds\":%.6f,\"tokens_decoded\":%llu,\"decode_calls\":%llu,"
                     "\"decode_seconds\":%.6f%s}",
                     s->pos, s->max_context, (unsigned long long)s->tokens_prefilled,
                     (unsigned long long)s->prefill_calls, s->prefill_seconds,
                     (unsigned long long)s->tokens_decoded, (unsigned long long)s->decode_calls,
                     s->decode_seconds, dev);
    if (n < 0 || (size_t)n >= sizeof buf) return hz_error(HZ_ENOMEM, "hz_session_stats_json: formatting failed");
    *out = hz_strdup(buf);
    return *out ? HZ_OK : HZ_ENOMEM;
}
