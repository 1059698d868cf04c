/* Hugging Face config.json for the supported architectures, and the normalized model config. */
#ifndef HZ_HFCONFIG_H
#define HZ_HFCONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "format/safetensors.h"

typedef enum hz_arch { HZ_ARCH_OLMOE = 1, HZ_ARCH_QWEN2MOE = 2 } hz_arch;

typedef struct hz_model_config {
    hz_arch arch;
    uint32_t hidden;        /* hidden_size */
    uint32_t layers;        /* num_hidden_layers */
    uint32_t heads;         /* num_attention_heads */
    uint32_t kv_heads;      /* num_key_value_heads */
    uint32_t head_dim;      /* hidden / heads */
    uint32_t vocab;         /* vocab_size */
    uint32_t experts;       /* num_experts (OLMoE alias num_local_experts) */
    uint32_t top_k;         /* num_experts_per_tok */
    uint32_t expert_inter;  /* OLMoE intermediate_size; Qwen moe_intermediate_size */
    uint32_t shared_inter;  /* Qwen shared_expert_intermediate_size; 0 for OLMoE */
    uint32_t max_pos;       /* max_position_embeddings */
    float rope_theta;       /* rope_theta or rope_parameters.rope_theta */
    float rms_eps;          /* rms_norm_eps (OLMoE default 1e-5 when absent) */
    int norm_topk_prob;     /* 0 for both published models */
    int qkv_bias;           /* Qwen: 1 (qkv_bias default true); OLMoE: attention_bias */
    int qk_norm;            /* OLMoE: 1 */
    int tie_embeddings;     /* tie_word_embeddings */
    int32_t eos;            /* eos_token_id (first when a list), -1 none */
    int32_t bos;            /* -1 none */
    int32_t pad;            /* -1 none */
    hz_dtype torch_dtype;   /* declared checkpoint dtype */
} hz_model_config;

/* "olmoe" or "qwen2_moe". */
const char *hz_arch_name(hz_arch arch);

/* Parses config.json text. Accepts "rope_theta" and "rope_parameters": {"rope_theta"}; ignores unknown
 * keys; a missing required key or a value of the wrong type or range is HZ_EFORMAT naming the key; an
 * unknown model_type is HZ_EUNSUPPORTED naming it. Also validates the supported shapes (hidden
 * divisible by heads, top_k <= experts, Qwen decoder_sparse_step 1 with no mlp_only_layers). */
int hz_hfconfig_parse(const char *json, size_t len, hz_model_config *out);
/* Reads and parses a config.json file. */
int hz_hfconfig_load(const char *path, hz_model_config *out);
/* Writes `cfg` as a Hugging Face config.json text with the real field names of its architecture
 * (round-trips through hz_hfconfig_parse). Caller frees with free(). NULL on out of memory. */
char *hz_hfconfig_to_json(const hz_model_config *cfg);

/* Built-in shapes for hz-mkmodel: preset "tiny", "olmoe-1b-7b", "qwen1.5-moe-a2.7b".
 * Errors: HZ_EINVAL for an unknown preset or an architecture it does not fit. */
int hz_config_preset(hz_arch arch, const char *preset, hz_model_config *out);

#endif
