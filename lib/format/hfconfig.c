/* Hugging Face config.json for OLMoE ("olmoe") and Qwen1.5-MoE ("qwen2_moe").
 *
 * Keys that fix the shape of the weights (sizes, counts) are required: guessing them from a class
 * default would silently build a different model. Keys that only carry behaviour fall back to the
 * defaults of transformers' OlmoeConfig / Qwen2MoeConfig, because that is what transformers does with
 * a file that omits them. Features Horizon does not implement (clip_qkv, sliding windows, dense
 * layers between sparse ones, RoPE scaling, an activation other than SiLU) are refused with
 * HZ_EUNSUPPORTED rather than ignored. */
#include "format/hfconfig.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/core.h"
#include "core/json.h"

#define CFG_MAX_BYTES (16u * 1024u * 1024u)
#define HZ_CFG_MAX_LAYERS 4096u
#define HZ_CFG_MAX_EXPERTS 4096u
#define HZ_CFG_MAX_EXPERT_BLOBS (1u << 20)

const char *hz_arch_name(hz_arch arch) {
    switch (arch) {
    case HZ_ARCH_OLMOE: return "olmoe";
    case HZ_ARCH_QWEN2MOE: return "qwen2_moe";
    }
    return "unknown";
}

static const cJSON *item(const cJSON *obj, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* Absent and JSON null are the same to transformers' config classes. */
static int absent(const cJSON *v) { return v == NULL || cJSON_IsNull(v); }

static int as_u32(const cJSON *v, const char *key, uint32_t *out) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.0) || v->valuedouble > 4294967295.0 ||
        v->valuedouble != floor(v->valuedouble))
        return hz_error(HZ_EFORMAT, "config.json: key '%s' must be a non-negative integer", key);
    *out = (uint32_t)v->valuedouble;
    return HZ_OK;
}

static int req_u32(const cJSON *root, const char *key, uint32_t *out) {
    const cJSON *v = item(root, key);
    if (absent(v)) return hz_error(HZ_EFORMAT, "config.json: missing required key '%s'", key);
    return as_u32(v, key, out);
}

static int opt_u32(const cJSON *root, const char *key, uint32_t dflt, uint32_t *out) {
    const cJSON *v = item(root, key);
    if (absent(v)) {
        *out = dflt;
        return HZ_OK;
    }
    return as_u32(v, key, out);
}

static int opt_float(const cJSON *root, const char *key, float dflt, float *out) {
    const cJSON *v = item(root, key);
    if (absent(v)) {
        *out = dflt;
        return HZ_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || !((float)v->valuedouble > 0.0f) ||
        !isfinite((float)v->valuedouble))
        return hz_error(HZ_EFORMAT, "config.json: key '%s' must be a positive number", key);
    *out = (float)v->valuedouble;
    return HZ_OK;
}

static int opt_bool(const cJSON *root, const char *key, int dflt, int *out) {
    const cJSON *v = item(root, key);
    if (absent(v)) {
        *out = dflt;
        return HZ_OK;
    }
    if (!cJSON_IsBool(v)) return hz_error(HZ_EFORMAT, "config.json: key '%s' must be true or false", key);
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return HZ_OK;
}

/* Token ids: an integer, null (none), or a list whose first element is used (generation stops on
 * any of them; Horizon keeps one). An explicit id must lie inside the vocabulary (checked later). */
static int opt_token(const cJSON *root, const char *key, int32_t dflt, uint32_t vocab, int32_t *out) {
    const cJSON *v = item(root, key);
    if (v == NULL) {
        /* A class default outside a small test vocabulary could never be produced: treat it as none. */
        *out = dflt >= 0 && (uint32_t)dflt < vocab ? dflt : -1;
        return HZ_OK;
    }
    if (cJSON_IsNull(v)) {
        *out = -1;
        return HZ_OK;
    }
    if (cJSON_IsArray(v)) {
        for (const cJSON *e = v->child; e; e = e->next) {
            uint32_t id = 0;
            if (as_u32(e, key, &id) != HZ_OK || id > INT32_MAX)
                return hz_error(HZ_EFORMAT, "config.json: key '%s' must list non-negative token ids", key);
        }
        v = v->child;
        if (!v) {
            *out = -1;
            return HZ_OK;
        }
    }
    uint32_t id = 0;
    if (as_u32(v, key, &id) != HZ_OK || id > INT32_MAX)
        return hz_error(HZ_EFORMAT, "config.json: key '%s' must be a token id, a list of them, or null", key);
    *out = (int32_t)id;
    return HZ_OK;
}

static int parse_rope(const cJSON *root, hz_model_config *c) {
    const cJSON *params = item(root, "rope_parameters");
    const cJSON *scaling = item(root, "rope_scaling");
    if (!absent(params)) {
        /* transformers 5 moved rope_theta into rope_parameters together with the RoPE variant. */
        if (!cJSON_IsObject(params)) return hz_error(HZ_EFORMAT, "config.json: key 'rope_parameters' must be an object");
        const cJSON *type = item(params, "rope_type");
        if (!absent(type)) {
            if (!cJSON_IsString(type))
                return hz_error(HZ_EFORMAT, "config.json: key 'rope_parameters.rope_type' must be a string");
            if (strcmp(type->valuestring, "default") != 0)
                return hz_error(HZ_EUNSUPPORTED, "config.json: rope_parameters.rope_type '%s' is not supported",
                                type->valuestring);
        }
        const cJSON *theta = item(params, "rope_theta");
        if (absent(theta)) return hz_error(HZ_EFORMAT, "config.json: missing required key 'rope_parameters.rope_theta'");
        if (!cJSON_IsNumber(theta) || !(theta->valuedouble > 0.0) || !isfinite((float)theta->valuedouble))
            return hz_error(HZ_EFORMAT, "config.json: key 'rope_parameters.rope_theta' must be a positive number");
        c->rope_theta = (float)theta->valuedouble;
    } else {
        int st = opt_float(root, "rope_theta", 10000.0f, &c->rope_theta);
        if (st != HZ_OK) return st;
    }
    if (!absent(scaling)) {
        if (!cJSON_IsObject(scaling)) return hz_error(HZ_EFORMAT, "config.json: key 'rope_scaling' must be an object or null");
        const cJSON *type = item(scaling, "rope_type");
        if (absent(type)) type = item(scaling, "type");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "default") != 0)
            return hz_error(HZ_EUNSUPPORTED, "config.json: rope_scaling '%s' is not supported",
                            cJSON_IsString(type) ? type->valuestring : "?");
    }
    return HZ_OK;
}

static int parse_dtype(const cJSON *root, hz_dtype *out) {
    const char *key = "torch_dtype";
    const cJSON *v = item(root, key);
    if (absent(v)) {
        key = "dtype";
        v = item(root, key);
    }
    if (absent(v)) {
        *out = HZ_DTYPE_BF16;
        return HZ_OK;
    }
    if (!cJSON_IsString(v)) return hz_error(HZ_EFORMAT, "config.json: key '%s' must be a string", key);
    const char *s = v->valuestring;
    if (strncmp(s, "torch.", 6) == 0) s += 6;
    if (strcmp(s, "bfloat16") == 0)
        *out = HZ_DTYPE_BF16;
    else if (strcmp(s, "float16") == 0)
        *out = HZ_DTYPE_F16;
    else if (strcmp(s, "float32") == 0)
        *out = HZ_DTYPE_F32;
    else
        return hz_error(HZ_EUNSUPPORTED, "config.json: %s '%s' is not supported (bfloat16, float16, float32)", key,
                        v->valuestring);
    return HZ_OK;
}

#define TRY(expr)                                                                                   \
    do {                                                                                            \
        int st_ = (expr);                                                                           \
        if (st_ != HZ_OK) return st_;                                                               \
    } while (0)

static int parse_olmoe(const cJSON *root, hz_model_config *c) {
    TRY(req_u32(root, "intermediate_size", &c->expert_inter));
    const cJSON *ne = item(root, "num_experts"), *nle = item(root, "num_local_experts");
    if (!absent(ne) && !absent(nle)) {
        uint32_t a = 0, b = 0;
        TRY(as_u32(ne, "num_experts", &a));
        TRY(as_u32(nle, "num_local_experts", &b));
        if (a != b)
            return hz_error(HZ_EFORMAT, "config.json: 'num_experts' %u and 'num_local_experts' %u disagree", a, b);
        c->experts = a;
    } else if (!absent(nle)) {
        TRY(as_u32(nle, "num_local_experts", &c->experts));
    } else {
        TRY(req_u32(root, "num_experts", &c->experts));
    }
    TRY(opt_u32(root, "max_position_embeddings", 4096, &c->max_pos));
    TRY(opt_float(root, "rms_norm_eps", 1e-5f, &c->rms_eps));
    TRY(opt_bool(root, "attention_bias", 0, &c->qkv_bias));
    if (!absent(item(root, "clip_qkv")))
        return hz_error(HZ_EUNSUPPORTED, "config.json: clip_qkv must be null (QKV clipping is not supported)");
    c->qk_norm = 1;
    c->shared_inter = 0;
    TRY(opt_token(root, "eos_token_id", 50279, c->vocab, &c->eos));
    TRY(opt_token(root, "bos_token_id", -1, c->vocab, &c->bos));
    TRY(opt_token(root, "pad_token_id", 1, c->vocab, &c->pad));
    return HZ_OK;
}

static int parse_qwen2moe(const cJSON *root, hz_model_config *c) {
    TRY(req_u32(root, "moe_intermediate_size", &c->expert_inter));
    TRY(req_u32(root, "shared_expert_intermediate_size", &c->shared_inter));
    TRY(req_u32(root, "num_experts", &c->experts));
    TRY(opt_u32(root, "max_position_embeddings", 32768, &c->max_pos));
    TRY(opt_float(root, "rms_norm_eps", 1e-6f, &c->rms_eps));
    TRY(opt_bool(root, "qkv_bias", 1, &c->qkv_bias));
    c->qk_norm = 0;
    uint32_t step = 0;
    TRY(opt_u32(root, "decoder_sparse_step", 1, &step));
    if (step != 1)
        return hz_error(HZ_EUNSUPPORTED, "config.json: decoder_sparse_step %u is not supported (every layer must be sparse: 1)",
                        step);
    const cJSON *mlp_only = item(root, "mlp_only_layers");
    if (!absent(mlp_only)) {
        if (!cJSON_IsArray(mlp_only)) return hz_error(HZ_EFORMAT, "config.json: key 'mlp_only_layers' must be a list");
        if (cJSON_GetArraySize(mlp_only) != 0)
            return hz_error(HZ_EUNSUPPORTED, "config.json: mlp_only_layers must be empty (dense layers are not supported)");
    }
    int sliding = 0;
    TRY(opt_bool(root, "use_sliding_window", 0, &sliding));
    if (sliding) return hz_error(HZ_EUNSUPPORTED, "config.json: use_sliding_window true is not supported");
    TRY(opt_token(root, "eos_token_id", -1, c->vocab, &c->eos));
    TRY(opt_token(root, "bos_token_id", -1, c->vocab, &c->bos));
    TRY(opt_token(root, "pad_token_id", -1, c->vocab, &c->pad));
    return HZ_OK;
}

static int validate(const hz_model_config *c) {
    struct {
        const char *key;
        uint32_t v;
    } positive[] = {{"hidden_size", c->hidden},
                    {"num_hidden_layers", c->layers},
                    {"num_attention_heads", c->heads},
                    {"num_key_value_heads", c->kv_heads},
                    {"vocab_size", c->vocab},
                    {"num_experts", c->experts},
                    {"num_experts_per_tok", c->top_k},
                    {c->arch == HZ_ARCH_OLMOE ? "intermediate_size" : "moe_intermediate_size", c->expert_inter},
                    {"max_position_embeddings", c->max_pos}};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (positive[i].v == 0) return hz_error(HZ_EFORMAT, "config.json: key '%s' must be positive", positive[i].key);
    if (c->arch == HZ_ARCH_QWEN2MOE && c->shared_inter == 0)
        return hz_error(HZ_EFORMAT, "config.json: key 'shared_expert_intermediate_size' must be positive");
    /* Bounds far above any model of these architectures, so that a corrupt or hostile count is refused
     * here and not discovered as an allocation of tens of gigabytes for the tensor inventory. */
    if (c->layers > HZ_CFG_MAX_LAYERS || c->experts > HZ_CFG_MAX_EXPERTS ||
        (uint64_t)c->layers * c->experts > HZ_CFG_MAX_EXPERT_BLOBS)
        return hz_error(HZ_EUNSUPPORTED,
                        "config.json: %u layers x %u experts: at most %u layers, %u experts and %u experts in all",
                        c->layers, c->experts, HZ_CFG_MAX_LAYERS, HZ_CFG_MAX_EXPERTS, HZ_CFG_MAX_EXPERT_BLOBS);
    if (c->hidden % c->heads != 0)
        return hz_error(HZ_EFORMAT, "config.json: hidden_size %u is not divisible by num_attention_heads %u",
                        c->hidden, c->heads);
    if (c->head_dim % 2 != 0)
        return hz_error(HZ_EFORMAT, "config.json: head_dim %u (hidden_size / num_attention_heads) must be even for RoPE",
                        c->head_dim);
    if (c->heads % c->kv_heads != 0)
        return hz_error(HZ_EFORMAT, "config.json: num_attention_heads %u is not a multiple of num_key_value_heads %u",
                        c->heads, c->kv_heads);
    if (c->top_k > c->experts)
        return hz_error(HZ_EFORMAT, "config.json: num_experts_per_tok %u exceeds num_experts %u", c->top_k, c->experts);
    const struct {
        const char *key;
        int32_t v;
    } tokens[] = {{"eos_token_id", c->eos}, {"bos_token_id", c->bos}, {"pad_token_id", c->pad}};
    for (size_t i = 0; i < 3; i++)
        if (tokens[i].v >= 0 && (uint32_t)tokens[i].v >= c->vocab)
            return hz_error(HZ_EFORMAT, "config.json: key '%s' %d is outside the vocabulary (%u)", tokens[i].key,
                            (int)tokens[i].v, c->vocab);
    return HZ_OK;
}

static int parse_root(const cJSON *root, hz_model_config *c) {
    if (!cJSON_IsObject(root)) return hz_error(HZ_EFORMAT, "config.json: not a JSON object");
    const cJSON *mt = item(root, "model_type");
    if (absent(mt)) return hz_error(HZ_EFORMAT, "config.json: missing required key 'model_type'");
    if (!cJSON_IsString(mt)) return hz_error(HZ_EFORMAT, "config.json: key 'model_type' must be a string");
    if (strcmp(mt->valuestring, "olmoe") == 0)
        c->arch = HZ_ARCH_OLMOE;
    else if (strcmp(mt->valuestring, "qwen2_moe") == 0)
        c->arch = HZ_ARCH_QWEN2MOE;
    else
        return hz_error(HZ_EUNSUPPORTED, "config.json: model_type '%s' is not supported (olmoe, qwen2_moe)",
                        mt->valuestring);

    const cJSON *act = item(root, "hidden_act");
    if (!absent(act) && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return hz_error(HZ_EUNSUPPORTED, "config.json: hidden_act '%s' is not supported (silu only)",
                        cJSON_IsString(act) ? act->valuestring : "?");

    TRY(req_u32(root, "hidden_size", &c->hidden));
    TRY(req_u32(root, "num_hidden_layers", &c->layers));
    TRY(req_u32(root, "num_attention_heads", &c->heads));
    TRY(opt_u32(root, "num_key_value_heads", c->heads, &c->kv_heads));
    TRY(req_u32(root, "vocab_size", &c->vocab));
    TRY(req_u32(root, "num_experts_per_tok", &c->top_k));
    TRY(opt_bool(root, "norm_topk_prob", 0, &c->norm_topk_prob));
    TRY(opt_bool(root, "tie_word_embeddings", 0, &c->tie_embeddings));
    TRY(parse_rope(root, c));
    TRY(parse_dtype(root, &c->torch_dtype));
    if (c->arch == HZ_ARCH_OLMOE)
        TRY(parse_olmoe(root, c));
    else
        TRY(parse_qwen2moe(root, c));
    c->head_dim = c->heads ? c->hidden / c->heads : 0;
    return validate(c);
}

int hz_hfconfig_parse(const char *json, size_t len, hz_model_config *out) {
    if (!json || !out) return hz_error(HZ_EINVAL, "hz_hfconfig_parse: NULL argument");
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return hz_error(HZ_EFORMAT, "config.json: not valid JSON");
    hz_model_config c;
    memset(&c, 0, sizeof c);
    int st = parse_root(root, &c);
    cJSON_Delete(root);
    if (st == HZ_OK) *out = c;
    return st;
}

int hz_hfconfig_load(const char *path, hz_model_config *out) {
    if (!path || !out) return hz_error(HZ_EINVAL, "hz_hfconfig_load: NULL argument");
    memset(out, 0, sizeof *out);
    char eb[128];
    int fd;
    uint64_t size;
    int st0 = hz_file_open_regular(path, &fd, &size);
    if (st0) return st0;
    if (size > CFG_MAX_BYTES) {
        close(fd);
        return hz_error(HZ_EFORMAT, "%s: %llu bytes, larger than the %u-byte limit", path, (unsigned long long)size,
                        CFG_MAX_BYTES);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        return hz_error(HZ_EIO, "%s: cannot open: %s", path, strerror_r(err, eb, sizeof eb));
    }
    char *buf = hz_malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return HZ_ENOMEM;
    }
    size_t n = fread(buf, 1, (size_t)size, f);
    int err = ferror(f);
    fclose(f);
    int st;
    if (err || n != (size_t)size) {
        st = hz_error(HZ_EIO, "%s: read failed", path);
    } else {
        st = hz_hfconfig_parse(buf, n, out);
        if (st != HZ_OK) hz_error_prefix(st, "%s", path);
    }
    free(buf);
    return st;
}

/* ------------------------------------------------------------------------------------------------ */
/* Writing                                                                                           */

/* The shortest decimal that reads back as the same float, so 1e-5f is written "1e-05" and not the
 * double expansion of the float; whole values keep a ".0" so Python reads them as floats. */
static cJSON *float_number(float v) {
    char buf[48];
    if (v == floorf(v) && fabsf(v) < 1e15f) {
        snprintf(buf, sizeof buf, "%.1f", (double)v);
    } else {
        for (int prec = 6; prec <= 9; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
            if (strtof(buf, NULL) == v) break;
        }
    }
    return cJSON_CreateRaw(buf);
}

static const char *torch_dtype_name(hz_dtype d) {
    switch (d) {
    case HZ_DTYPE_F32: return "float32";
    case HZ_DTYPE_F16: return "float16";
    case HZ_DTYPE_BF16: return "bfloat16";
    }
    return "bfloat16";
}

static cJSON *token_value(int32_t id) { return id < 0 ? cJSON_CreateNull() : cJSON_CreateNumber(id); }

char *hz_hfconfig_to_json(const hz_model_config *cfg) {
    if (!cfg || (cfg->arch != HZ_ARCH_OLMOE && cfg->arch != HZ_ARCH_QWEN2MOE)) return NULL;
    int olmoe = cfg->arch == HZ_ARCH_OLMOE;
    int ok = 1;
    cJSON *o = cJSON_CreateObject(); /* NULL: every add below fails, hz_json_finish reports it */
    const char *arch_class = olmoe ? "OlmoeForCausalLM" : "Qwen2MoeForCausalLM";
    hz_json_add(o, "architectures", cJSON_CreateStringArray(&arch_class, 1), &ok);
    hz_json_str(o, "model_type", hz_arch_name(cfg->arch), &ok);
    hz_json_num(o, "hidden_size", cfg->hidden, &ok);
    if (olmoe) {
        hz_json_num(o, "intermediate_size", cfg->expert_inter, &ok);
    } else {
        /* Unused when every layer is sparse; written as the published files do. */
        hz_json_num(o, "intermediate_size", cfg->shared_inter, &ok);
        hz_json_num(o, "moe_intermediate_size", cfg->expert_inter, &ok);
        hz_json_num(o, "shared_expert_intermediate_size", cfg->shared_inter, &ok);
        hz_json_num(o, "decoder_sparse_step", 1, &ok);
        hz_json_add(o, "mlp_only_layers", cJSON_CreateArray(), &ok);
        hz_json_bool(o, "qkv_bias", cfg->qkv_bias, &ok);
        hz_json_bool(o, "use_sliding_window", 0, &ok);
        hz_json_num(o, "sliding_window", cfg->max_pos, &ok);
        hz_json_num(o, "max_window_layers", cfg->layers, &ok);
    }
    hz_json_num(o, "num_hidden_layers", cfg->layers, &ok);
    hz_json_num(o, "num_attention_heads", cfg->heads, &ok);
    hz_json_num(o, "num_key_value_heads", cfg->kv_heads, &ok);
    hz_json_num(o, "vocab_size", cfg->vocab, &ok);
    hz_json_num(o, "num_experts", cfg->experts, &ok);
    hz_json_num(o, "num_experts_per_tok", cfg->top_k, &ok);
    hz_json_bool(o, "norm_topk_prob", cfg->norm_topk_prob, &ok);
    hz_json_num(o, "max_position_embeddings", cfg->max_pos, &ok);
    hz_json_add(o, "rope_theta", float_number(cfg->rope_theta), &ok);
    hz_json_null(o, "rope_scaling", &ok);
    hz_json_add(o, "rms_norm_eps", float_number(cfg->rms_eps), &ok);
    hz_json_bool(o, "tie_word_embeddings", cfg->tie_embeddings, &ok);
    hz_json_add(o, "eos_token_id", token_value(cfg->eos), &ok);
    hz_json_add(o, "bos_token_id", token_value(cfg->bos), &ok);
    hz_json_add(o, "pad_token_id", token_value(cfg->pad), &ok);
    hz_json_str(o, "torch_dtype", torch_dtype_name(cfg->torch_dtype), &ok);
    hz_json_str(o, "hidden_act", "silu", &ok);
    hz_json_add(o, "attention_dropout", float_number(0.0f), &ok);
    hz_json_add(o, "initializer_range", float_number(0.02f), &ok);
    hz_json_bool(o, "use_cache", 1, &ok);
    hz_json_bool(o, "output_router_logits", 0, &ok);
    hz_json_add(o, "router_aux_loss_coef", float_number(olmoe ? 0.01f : 0.001f), &ok);
    if (olmoe) {
        hz_json_bool(o, "attention_bias", cfg->qkv_bias, &ok);
        hz_json_null(o, "clip_qkv", &ok);
    }
    char *text = hz_json_finish(o, ok, 1); /* malloc'd: the caller frees with free() */
    /* the round trip: what is written reads back */
    if (text) {
        hz_model_config back;
        if (hz_hfconfig_parse(text, strlen(text), &back) != HZ_OK) {
            free(text);
            return NULL;
        }
    }
    return text;
}

/* ------------------------------------------------------------------------------------------------ */
/* Presets                                                                                           */

/* The tiny presets keep a whole BF16 checkpoint at a few MB (unit tests, CI goldens) while keeping
 * what makes each architecture distinct:
 *   olmoe     tiny: hidden 256, 2 layers, 4 heads x 64 (4 KV heads), vocab 512, 8 experts top-2,
 *                   expert width 256, max_pos 256, q/k norm, eos 511 pad 1 (about 4 M params, 8 MB).
 *   qwen2_moe tiny: hidden 256, 2 layers, 4 heads x 64, vocab 512, 8 experts top-4, expert width 320
 *                   (not a multiple of 256: down_proj K pads to 512), shared expert width 512, q/k/v
 *                   bias, max_pos 256, bos 510 eos 511 (about 5.5 M params, 11 MB).
 * The full presets carry the published values of allenai/OLMoE-1B-7B-0924 and Qwen/Qwen1.5-MoE-A2.7B. */
int hz_config_preset(hz_arch arch, const char *preset, hz_model_config *out) {
    if (!preset || !out) return hz_error(HZ_EINVAL, "hz_config_preset: NULL argument");
    hz_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.torch_dtype = HZ_DTYPE_BF16;
    c.norm_topk_prob = 0;
    c.tie_embeddings = 0;
    if (arch == HZ_ARCH_OLMOE && strcmp(preset, "olmoe-1b-7b") == 0) {
        c.hidden = 2048, c.layers = 16, c.heads = 16, c.kv_heads = 16, c.vocab = 50304;
        c.experts = 64, c.top_k = 8, c.expert_inter = 1024, c.shared_inter = 0, c.max_pos = 4096;
        c.rope_theta = 10000.0f, c.rms_eps = 1e-5f, c.qkv_bias = 0, c.qk_norm = 1;
        c.eos = 50279, c.bos = -1, c.pad = 1;
    } else if (arch == HZ_ARCH_QWEN2MOE && strcmp(preset, "qwen1.5-moe-a2.7b") == 0) {
        c.hidden = 2048, c.layers = 24, c.heads = 16, c.kv_heads = 16, c.vocab = 151936;
        c.experts = 60, c.top_k = 4, c.expert_inter = 1408, c.shared_inter = 5632, c.max_pos = 8192;
        c.rope_theta = 1000000.0f, c.rms_eps = 1e-6f, c.qkv_bias = 1, c.qk_norm = 0;
        c.eos = 151643, c.bos = 151643, c.pad = -1;
    } else if (arch == HZ_ARCH_OLMOE && strcmp(preset, "tiny") == 0) {
        c.hidden = 256, c.layers = 2, c.heads = 4, c.kv_heads = 4, c.vocab = 512;
        c.experts = 8, c.top_k = 2, c.expert_inter = 256, c.shared_inter = 0, c.max_pos = 256;
        c.rope_theta = 10000.0f, c.rms_eps = 1e-5f, c.qkv_bias = 0, c.qk_norm = 1;
        c.eos = 511, c.bos = -1, c.pad = 1;
    } else if (arch == HZ_ARCH_QWEN2MOE && strcmp(preset, "tiny") == 0) {
        c.hidden = 256, c.layers = 2, c.heads = 4, c.kv_heads = 4, c.vocab = 512;
        c.experts = 8, c.top_k = 4, c.expert_inter = 320, c.shared_inter = 512, c.max_pos = 256;
        c.rope_theta = 1000000.0f, c.rms_eps = 1e-6f, c.qkv_bias = 1, c.qk_norm = 0;
        c.eos = 511, c.bos = 510, c.pad = -1;
    } else {
        return hz_error(HZ_EINVAL, "no preset '%s' for architecture %s", preset, hz_arch_name(arch));
    }
    c.head_dim = c.hidden / c.heads;
    *out = c;
    return HZ_OK;
}
