/* hz_model: the config, the non-routed FP16 weights and the executor choice; describe and info. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "backend/backend_fault.h"
#include "backing/backing.h"
#include "cache/cache.h"
#include "core/json.h"
#include "model.h"

/* Builds with CUDA run models on cuda devices through forward_cuda.c. */
#ifdef HZ_HAVE_CUDA
#define HZ_GPU_PATH 1
#else
#define HZ_GPU_PATH 0
#endif

HZ_EXPORT void hz_model_options_init_sized(hz_model_options *opts, size_t size) {
    hz_model_options d;
    memset(&d, 0, sizeof d);
    hz_options_fill(opts, size, &d, sizeof d);
}

/* The compatibility entry point for programs built before hz_model_options_init became a macro
 * (horizon.h; the parentheses keep the macro from applying): fills the size the struct had in those
 * programs' headers (0.1.0: up to `executor`), never more (doc/abi.md; tests/unit/core/test_options.c
 * pins it); hz_model_create gives the fields past it their defaults. */
HZ_EXPORT void (hz_model_options_init)(hz_model_options *opts) {
    hz_model_options_init_sized(opts, offsetof(hz_model_options, flags));
}

HZ_EXPORT void hz_model_info_init_sized(hz_model_info *info, size_t size) {
    hz_model_info d;
    memset(&d, 0, sizeof d);
    hz_options_fill(info, size, &d, sizeof d);
}

/* The compatibility entry point for programs built before hz_model_info_init became a macro (horizon.h;
 * the parentheses keep the macro from applying): fills sizeof as this library knows it, which is the
 * size in those programs' headers (0.1.0). Should the struct grow, this must keep filling the 0.1.0 size
 * (doc/abi.md; tests/unit/core/test_options.c pins it). */
HZ_EXPORT void (hz_model_info_init)(hz_model_info *info) {
    hz_model_info_init_sized(info, sizeof *info);
}

/* Binds a non-routed tensor by its Hugging Face name, checking its shape (d1 == 0: one dimension). */
static int bind(const hz_host_backing *b, const hz_f16 **out, uint64_t d0, uint64_t d1, const char *fmt,
                ...) HZ_PRINTF(5, 6);
static int bind(const hz_host_backing *b, const hz_f16 **out, uint64_t d0, uint64_t d1, const char *fmt,
                ...) {
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const hz_backing_tensor *t = hz_backing_find_tensor(b, name);
    if (!t) return hz_error(HZ_EFORMAT, "model: tensor '%s' is missing from the artifact", name);
    uint32_t want_ndim = d1 ? 2u : 1u;
    if (t->ndim != want_ndim || t->shape[0] != d0 || (d1 && t->shape[1] != d1)) {
        const uint64_t want[2] = {d0, d1};
        char have_text[128], want_text[64];
        hz_shape_text(have_text, sizeof have_text, t->ndim < 4 ? t->ndim : 4, t->shape);
        hz_shape_text(want_text, sizeof want_text, want_ndim, want);
        return hz_error(HZ_EFORMAT, "model: tensor '%s' has shape %s, the config needs %s", name, have_text,
                        want_text);
    }
    *out = t->data;
    return HZ_OK;
}

static int bind_weights(hz_model *m) {
    const hz_host_backing *b = m->backing;
    const hz_model_config *c = &m->cfg;
    const uint64_t H = c->hidden, V = c->vocab, QD = (uint64_t)c->heads * c->head_dim;
    const uint64_t KD = (uint64_t)c->kv_heads * c->head_dim, E = c->experts, S = c->shared_inter;
    hz_weights *w = &m->w;
    int st = HZ_OK;
    st = st ? st : bind(b, &w->embed, V, H, "model.embed_tokens.weight");
    st = st ? st : bind(b, &w->final_norm, H, 0, "model.norm.weight");
    if (c->tie_embeddings)
        w->lm_head = w->embed;
    else
        st = st ? st : bind(b, &w->lm_head, V, H, "lm_head.weight");
    for (uint32_t i = 0; i < c->layers && !st; i++) {
        hz_layer_weights *L = &w->layers[i];
        const char *p = "model.layers";
        st = st ? st : bind(b, &L->attn_norm, H, 0, "%s.%u.input_layernorm.weight", p, i);
        st = st ? st : bind(b, &L->wq, QD, H, "%s.%u.self_attn.q_proj.weight", p, i);
        st = st ? st : bind(b, &L->wk, KD, H, "%s.%u.self_attn.k_proj.weight", p, i);
        st = st ? st : bind(b, &L->wv, KD, H, "%s.%u.self_attn.v_proj.weight", p, i);
        st = st ? st : bind(b, &L->wo, H, QD, "%s.%u.self_attn.o_proj.weight", p, i);
        if (c->qkv_bias) {
            st = st ? st : bind(b, &L->bq, QD, 0, "%s.%u.self_attn.q_proj.bias", p, i);
            st = st ? st : bind(b, &L->bk, KD, 0, "%s.%u.self_attn.k_proj.bias", p, i);
            st = st ? st : bind(b, &L->bv, KD, 0, "%s.%u.self_attn.v_proj.bias", p, i);
            /* OLMoE's attention_bias covers o_proj as well; Qwen has none there */
            if (c->arch == HZ_ARCH_OLMOE)
                st = st ? st : bind(b, &L->bo, H, 0, "%s.%u.self_attn.o_proj.bias", p, i);
        }
        if (c->qk_norm) {
            st = st ? st : bind(b, &L->q_norm, QD, 0, "%s.%u.self_attn.q_norm.weight", p, i);
            st = st ? st : bind(b, &L->k_norm, KD, 0, "%s.%u.self_attn.k_norm.weight", p, i);
        }
        st = st ? st : bind(b, &L->ffn_norm, H, 0, "%s.%u.post_attention_layernorm.weight", p, i);
        st = st ? st : bind(b, &L->router, E, H, "%s.%u.mlp.gate.weight", p, i);
        if (c->arch == HZ_ARCH_QWEN2MOE) {
            st = st ? st : bind(b, &L->sh_gate, S, H, "%s.%u.mlp.shared_expert.gate_proj.weight", p, i);
            st = st ? st : bind(b, &L->sh_up, S, H, "%s.%u.mlp.shared_expert.up_proj.weight", p, i);
            st = st ? st : bind(b, &L->sh_down, H, S, "%s.%u.mlp.shared_expert.down_proj.weight", p, i);
            st = st ? st : bind(b, &L->sh_router, 1, H, "%s.%u.mlp.shared_expert_gate.weight", p, i);
        }
    }
    return st;
}

static int check_config(const hz_model_config *c) {
    if (c->arch != HZ_ARCH_OLMOE && c->arch != HZ_ARCH_QWEN2MOE)
        return hz_error(HZ_EUNSUPPORTED, "model: unsupported architecture %d", (int)c->arch);
    if (!c->hidden || !c->layers || !c->heads || !c->kv_heads || !c->head_dim || !c->vocab ||
        !c->experts || !c->top_k || !c->expert_inter || !c->max_pos)
        return hz_error(HZ_EFORMAT, "model: config has a zero dimension");
    if (c->heads % c->kv_heads || c->head_dim % 2u || c->top_k > c->experts)
        return hz_error(HZ_EFORMAT, "model: heads %u / kv heads %u / head_dim %u / top-k %u of %u not supported",
                        c->heads, c->kv_heads, c->head_dim, c->top_k, c->experts);
    if (c->arch == HZ_ARCH_QWEN2MOE && !c->shared_inter)
        return hz_error(HZ_EFORMAT, "model: qwen2_moe config without a shared expert width");
    if (c->vocab > (uint32_t)INT32_MAX)
        return hz_error(HZ_EFORMAT, "model: vocabulary of %u tokens does not fit int32 token ids", c->vocab);
    return HZ_OK;
}

/* The kind of backend the model computes on; the fault-injecting test wrapper counts as the backend it
 * wraps (so model tests can inject cache faults under a cpu device). */
static const char *compute_kind(hz_backend *be) {
    while (strcmp(be->ops->kind, "fault") == 0 && hz_backend_fault_inner(be)) be = hz_backend_fault_inner(be);
    return be->ops->kind;
}

HZ_EXPORT int hz_model_create(hz_host_backing *backing, hz_device *device, hz_cache *cache,
                    const hz_model_options *opts, hz_model **out) {
    if (out) *out = NULL;
    if (!backing || !device || !cache || !out)
        return hz_error(HZ_EINVAL, "hz_model_create: backing, device, cache and out must not be NULL");
    hz_model_options o;
    hz_model_options_init_sized(&o, sizeof o);
    int merged = hz_options_merge(&o, sizeof o, opts, 0, "hz_model_create");
    if (merged) return merged;
    const char *executor = o.executor ? o.executor : "auto";
    const char *kind = compute_kind(device->be);
    const int gpu = HZ_GPU_PATH && strcmp(kind, "cuda") == 0;
    if (strcmp(kind, "cpu") != 0 && !gpu)
        return hz_error(HZ_EUNSUPPORTED, "hz_model_create: no forward path for device '%s' (backend '%s')",
                        device->be->name, kind);
    int st = hz_cache_check_model_use(cache, backing, device);
    if (st) return st;

    hz_model *m = hz_calloc(1, sizeof *m);
    if (!m) return HZ_ENOMEM;
    m->cfg = *hz_backing_config(backing);
    m->backing = backing;
    m->device = device;
    m->cache = cache;
    m->layout = hz_backing_expert_layout(backing);
    m->lm_head_screen = !(o.flags & HZ_MODEL_NO_LM_HEAD_SCREEN);
    atomic_init(&m->sessions, 0);
    st = check_config(&m->cfg);
    if (!st) {
        m->w.layers = hz_calloc(m->cfg.layers, sizeof *m->w.layers);
        st = m->w.layers ? bind_weights(m) : HZ_ENOMEM;
    }
    if (!st) st = hz_executor_create(executor, kind, m->layout, &m->exec);
    if (!st) st = hz_cache_group_limit(cache, &m->group_limit);
#ifdef HZ_HAVE_CUDA
    /* On cuda the non-routed weights are copied to the device once, here. */
    if (!st && gpu) st = hz_gpu_model_create(m);
#endif
    if (st) {
#ifdef HZ_HAVE_CUDA
        hz_gpu_model_destroy(m);
#endif
        hz_executor_destroy(m->exec);
        free(m->w.layers);
        free(m);
        return st;
    }
    /* On the cpu backend device memory is host memory: the backing's FP16 tensors (immutable,
     * process-owned, outliving the model) are used in place rather than copied a second time. On cuda
     * the host bindings stay as the source of the device copy (and of anything that reads weights on
     * the host). */
    hz_backing_child_add(backing);
    hz_device_child_add(device);
    hz_cache_model_add(cache);
    *out = m;
    return HZ_OK;
}

HZ_EXPORT int hz_model_destroy(hz_model *m) {
    if (!m) return HZ_OK;
    int n = atomic_load(&m->sessions);
    if (n > 0) return hz_error(HZ_EBUSY, "hz_model_destroy: %d session(s) still live", n);
#ifdef HZ_HAVE_CUDA
    hz_gpu_model_destroy(m); /* releases its routing-table leases before the cache lets go of the model */
#endif
    hz_cache_model_remove(m->cache);
    hz_device_child_remove(m->device);
    hz_backing_child_remove(m->backing);
    hz_executor_destroy(m->exec);
    free(m->w.layers);
    free(m);
    return HZ_OK;
}

HZ_EXPORT int hz_model_get_info(const hz_model *m, hz_model_info *out) {
    if (!m || !out) return hz_error(HZ_EINVAL, "hz_model_get_info: NULL argument");
    if (out->struct_size < sizeof(uint32_t))
        return hz_error(HZ_EINVAL, "hz_model_get_info: set struct_size (hz_model_info_init)");
    hz_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = out->struct_size < sizeof info ? out->struct_size : (uint32_t)sizeof info;
    info.vocab_size = m->cfg.vocab;
    info.hidden_size = m->cfg.hidden;
    info.layers = m->cfg.layers;
    info.experts = m->cfg.experts;
    info.top_k = m->cfg.top_k;
    info.max_context = m->cfg.max_pos;
    info.eos_token = m->cfg.eos;
    info.bos_token = m->cfg.bos;
    memcpy(out, &info, info.struct_size);
    return HZ_OK;
}

/* A float as the shortest decimal that reads back to it (1e-05 rather than 9.99999974737875e-06). */
static double short_float(float f) {
    char buf[32];
    for (int digits = 6; digits < 10; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        if ((float)strtod(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

HZ_EXPORT int hz_model_describe_json(const hz_model *m, char **out) {
    if (out) *out = NULL;
    if (!m || !out) return hz_error(HZ_EINVAL, "hz_model_describe_json: NULL argument");
    const hz_model_config *c = &m->cfg;
    int ok = 1;
    cJSON *root = cJSON_CreateObject();
    cJSON *cfg = hz_json_obj(root, "config", &ok);
    cJSON *prec = hz_json_obj(root, "precision", &ok);
    cJSON *routed = hz_json_obj(prec, "routed", &ok);
    hz_json_str(root, "architecture", hz_arch_name(c->arch), &ok);
    hz_json_str(root, "identity", hz_host_backing_identity(m->backing), &ok);
    hz_json_str(root, "device", m->device->be->name, &ok);
    hz_json_str(root, "executor", m->exec->ops->name, &ok);
    hz_json_num(root, "lease_group_limit", m->group_limit, &ok);
    /* the lm_head screen (cuda): asked for (no HZ_MODEL_NO_LM_HEAD_SCREEN), and whether the device holds
     * it (null on the cpu, which never builds it) */
    cJSON *screen = hz_json_obj(root, "lm_head_screen", &ok);
    hz_json_bool(screen, "requested", m->lm_head_screen, &ok);
#ifdef HZ_HAVE_CUDA
    if (m->gpu)
        hz_json_bool(screen, "built", hz_gpu_model_has_lm_screen(m), &ok);
    else
#endif
        hz_json_null(screen, "built", &ok);

    hz_json_num(cfg, "hidden_size", c->hidden, &ok);
    hz_json_num(cfg, "layers", c->layers, &ok);
    hz_json_num(cfg, "heads", c->heads, &ok);
    hz_json_num(cfg, "kv_heads", c->kv_heads, &ok);
    hz_json_num(cfg, "head_dim", c->head_dim, &ok);
    hz_json_num(cfg, "vocab_size", c->vocab, &ok);
    hz_json_num(cfg, "experts", c->experts, &ok);
    hz_json_num(cfg, "top_k", c->top_k, &ok);
    hz_json_num(cfg, "expert_intermediate_size", c->expert_inter, &ok);
    hz_json_num(cfg, "shared_expert_intermediate_size", c->shared_inter, &ok);
    hz_json_num(cfg, "max_position_embeddings", c->max_pos, &ok);
    hz_json_num(cfg, "rope_theta", short_float(c->rope_theta), &ok);
    hz_json_num(cfg, "rms_norm_eps", short_float(c->rms_eps), &ok);
    hz_json_bool(cfg, "norm_topk_prob", c->norm_topk_prob, &ok);
    hz_json_bool(cfg, "qkv_bias", c->qkv_bias, &ok);
    hz_json_bool(cfg, "qk_norm", c->qk_norm, &ok);
    hz_json_bool(cfg, "tie_word_embeddings", c->tie_embeddings, &ok);

    hz_json_str(prec, "checkpoint", hz_backing_source_dtype(m->backing), &ok);
    hz_json_str(routed, "dtype", "int4", &ok);
    hz_json_num(routed, "block", HZ_QBLOCK, &ok);
    hz_json_str(routed, "scale_dtype", "f16", &ok);
    hz_json_str(prec, "activation", "f16", &ok);
    hz_json_str(prec, "non_routed", "f16", &ok);
    hz_json_str(prec, "kv_cache", "f16", &ok);
    hz_json_str(prec, "accumulation", m->exec->ops->accum_dtype, &ok);
    hz_json_str(prec, "logits", "f32", &ok);

    /* a malloc'd string: callers free with hz_free (free) */
    *out = hz_json_finish(root, ok, 0);
    return *out ? HZ_OK : hz_error(HZ_ENOMEM, "hz_model_describe_json: out of memory");
}

int hz_model_lease_group(hz_model *m, uint32_t layer, const uint32_t *ids, uint32_t n,
                         hz_generation **out, const uint8_t **rows) {
    hz_generation *lease = NULL;
    *out = NULL;
    int st = hz_generation_acquire(m->cache, layer, ids, n, &lease);
    if (st) return hz_error_prefix(st, "layer %u: acquiring %u routed experts", layer, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t row;
        const void *addr = NULL;
        st = hz_generation_row(lease, ids[i], &row, &addr);
        if (st) {
            hz_error_prefix(st, "layer %u expert %u", layer, ids[i]);
            /* nothing has read the rows yet: the lease ends as finished */
            (void)hz_generation_release(lease, NULL);
            return st;
        }
        rows[i] = addr;
    }
    *out = lease;
    return HZ_OK;
}

int hz_model_lease_end(hz_backend *be, uint32_t layer, hz_generation *lease, hz_event *done, int st) {
    int rst;
    if (!done) {
        rst = hz_generation_release(lease, NULL);
    } else if (!st && hz_event_record(done) == HZ_OK) {
        rst = hz_generation_release(lease, done);
    } else {
        int keep = st ? st : HZ_EDEVICE;
        (void)be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
        rst = hz_generation_release(lease, NULL);
        st = keep;
    }
    if (st) return st;
    if (rst) return hz_error_prefix(rst, "layer %u: releasing a lease", layer);
    return HZ_OK;
}
