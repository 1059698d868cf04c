/* lib/format/hfconfig: the published config.json files, both RoPE spellings, defaults and refusals,
 * presets, and the to_json round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/core.h"
#include "format/hfconfig.h"

static char *fixture_path(const char *name) {
    const char *root = getenv("HZ_SOURCE_ROOT");
    char *p = malloc(4096);
    assert_non_null(p);
    snprintf(p, 4096, "%s/tests/unit/format/fixtures/%s", root ? root : ".", name);
    return p;
}

static void assert_config_equal(const hz_model_config *a, const hz_model_config *b) {
    assert_int_equal(a->arch, b->arch);
    assert_int_equal(a->hidden, b->hidden);
    assert_int_equal(a->layers, b->layers);
    assert_int_equal(a->heads, b->heads);
    assert_int_equal(a->kv_heads, b->kv_heads);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->vocab, b->vocab);
    assert_int_equal(a->experts, b->experts);
    assert_int_equal(a->top_k, b->top_k);
    assert_int_equal(a->expert_inter, b->expert_inter);
    assert_int_equal(a->shared_inter, b->shared_inter);
    assert_int_equal(a->max_pos, b->max_pos);
    assert_true(a->rope_theta == b->rope_theta);
    assert_true(a->rms_eps == b->rms_eps);
    assert_int_equal(a->norm_topk_prob, b->norm_topk_prob);
    assert_int_equal(a->qkv_bias, b->qkv_bias);
    assert_int_equal(a->qk_norm, b->qk_norm);
    assert_int_equal(a->tie_embeddings, b->tie_embeddings);
    assert_int_equal(a->eos, b->eos);
    assert_int_equal(a->bos, b->bos);
    assert_int_equal(a->pad, b->pad);
    assert_int_equal(a->torch_dtype, b->torch_dtype);
}

static void test_olmoe_fixture(void **state) {
    (void)state;
    char *path = fixture_path("olmoe-1b-7b-0924.config.json");
    hz_model_config c;
    assert_int_equal(hz_hfconfig_load(path, &c), HZ_OK);
    assert_int_equal(c.arch, HZ_ARCH_OLMOE);
    assert_int_equal(c.hidden, 2048);
    assert_int_equal(c.layers, 16);
    assert_int_equal(c.heads, 16);
    assert_int_equal(c.kv_heads, 16);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(c.vocab, 50304);
    assert_int_equal(c.experts, 64);
    assert_int_equal(c.top_k, 8);
    assert_int_equal(c.expert_inter, 1024);
    assert_int_equal(c.shared_inter, 0);
    assert_int_equal(c.max_pos, 4096);
    assert_true(c.rope_theta == 10000.0f);
    assert_true(c.rms_eps == 1e-5f);
    assert_int_equal(c.norm_topk_prob, 0);
    assert_int_equal(c.qkv_bias, 0);
    assert_int_equal(c.qk_norm, 1);
    assert_int_equal(c.tie_embeddings, 0);
    assert_int_equal(c.eos, 50279);
    assert_int_equal(c.bos, -1);
    assert_int_equal(c.pad, 1);
    assert_int_equal(c.torch_dtype, HZ_DTYPE_BF16);
    hz_model_config p;
    assert_int_equal(hz_config_preset(HZ_ARCH_OLMOE, "olmoe-1b-7b", &p), HZ_OK);
    assert_config_equal(&c, &p);
    free(path);
}

static void test_qwen_fixture(void **state) {
    (void)state;
    char *path = fixture_path("qwen1.5-moe-a2.7b.config.json");
    hz_model_config c;
    assert_int_equal(hz_hfconfig_load(path, &c), HZ_OK);
    assert_int_equal(c.arch, HZ_ARCH_QWEN2MOE);
    assert_int_equal(c.hidden, 2048);
    assert_int_equal(c.layers, 24);
    assert_int_equal(c.heads, 16);
    assert_int_equal(c.kv_heads, 16);
    assert_int_equal(c.head_dim, 128);
    assert_int_equal(c.vocab, 151936);
    assert_int_equal(c.experts, 60);
    assert_int_equal(c.top_k, 4);
    assert_int_equal(c.expert_inter, 1408);
    assert_int_equal(c.shared_inter, 5632);
    assert_int_equal(c.max_pos, 8192);
    assert_true(c.rope_theta == 1000000.0f);
    assert_true(c.rms_eps == 1e-6f);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.qk_norm, 0);
    assert_int_equal(c.eos, 151643);
    assert_int_equal(c.bos, 151643);
    assert_int_equal(c.pad, -1);
    hz_model_config p;
    assert_int_equal(hz_config_preset(HZ_ARCH_QWEN2MOE, "qwen1.5-moe-a2.7b", &p), HZ_OK);
    assert_config_equal(&c, &p);
    free(path);
}

static void test_transformers5_fixture(void **state) {
    (void)state;
    char *path = fixture_path("qwen1.5-moe-a2.7b-chat.transformers5.config.json");
    hz_model_config c;
    assert_int_equal(hz_hfconfig_load(path, &c), HZ_OK);
    assert_int_equal(c.arch, HZ_ARCH_QWEN2MOE);
    assert_true(c.rope_theta == 1000000.0f);
    assert_int_equal(c.max_pos, 32768);
    assert_int_equal(c.eos, 151645); /* first of the list */
    assert_int_equal(c.bos, 151643);
    assert_int_equal(c.pad, -1);
    assert_int_equal(c.expert_inter, 1408);
    assert_int_equal(c.torch_dtype, HZ_DTYPE_BF16);
    free(path);
}

/* A minimal OLMoE config with `extra` spliced in (a leading comma is supplied). */
static int parse_olmoe_with(const char *extra, hz_model_config *c) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"model_type\":\"olmoe\",\"hidden_size\":256,\"intermediate_size\":128,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":512,"
             "\"num_experts_per_tok\":2%s%s}",
             extra[0] ? "," : "", extra);
    return hz_hfconfig_parse(text, strlen(text), c);
}

static int parse_qwen_with(const char *extra, hz_model_config *c) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"model_type\":\"qwen2_moe\",\"hidden_size\":256,\"moe_intermediate_size\":320,"
             "\"shared_expert_intermediate_size\":512,\"num_experts\":8,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":512,"
             "\"num_experts_per_tok\":4%s%s}",
             extra[0] ? "," : "", extra);
    return hz_hfconfig_parse(text, strlen(text), c);
}

static void test_rope_spellings(void **state) {
    (void)state;
    hz_model_config c;
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"rope_theta\":500000.0", &c), HZ_OK);
    assert_true(c.rope_theta == 500000.0f);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"rope_parameters\":{\"rope_theta\":250000.0,"
                                      "\"rope_type\":\"default\"}",
                                      &c),
                     HZ_OK);
    assert_true(c.rope_theta == 250000.0f);
    /* class default when neither is present */
    assert_int_equal(parse_olmoe_with("\"num_experts\":8", &c), HZ_OK);
    assert_true(c.rope_theta == 10000.0f);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"rope_parameters\":{\"rope_theta\":1e4,"
                                      "\"rope_type\":\"yarn\",\"factor\":4.0}",
                                      &c),
                     HZ_EUNSUPPORTED);
    assert_non_null(strstr(hz_last_error_message(), "yarn"));
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}", &c),
                     HZ_EUNSUPPORTED);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"rope_parameters\":{\"rope_type\":\"default\"}", &c),
                     HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "rope_theta"));
}

static void test_olmoe_defaults_and_aliases(void **state) {
    (void)state;
    hz_model_config c;
    assert_int_equal(parse_olmoe_with("\"num_local_experts\":8", &c), HZ_OK);
    assert_int_equal(c.experts, 8);
    assert_true(c.rms_eps == 1e-5f);
    assert_int_equal(c.kv_heads, 4);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.max_pos, 4096);
    assert_int_equal(c.qk_norm, 1);
    assert_int_equal(c.torch_dtype, HZ_DTYPE_BF16);
    assert_int_equal(c.pad, 1);
    assert_int_equal(parse_olmoe_with("\"num_local_experts\":8,\"num_experts\":16", &c), HZ_EFORMAT);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"dtype\":\"float32\"", &c), HZ_OK);
    assert_int_equal(c.torch_dtype, HZ_DTYPE_F32);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"torch_dtype\":\"float16\"", &c), HZ_OK);
    assert_int_equal(c.torch_dtype, HZ_DTYPE_F16);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"torch_dtype\":\"int8\"", &c), HZ_EUNSUPPORTED);
    /* eos_token_id as an int, null or a list */
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"eos_token_id\":7", &c), HZ_OK);
    assert_int_equal(c.eos, 7);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"eos_token_id\":null", &c), HZ_OK);
    assert_int_equal(c.eos, -1);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"eos_token_id\":[9,7]", &c), HZ_OK);
    assert_int_equal(c.eos, 9);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"eos_token_id\":[]", &c), HZ_OK);
    assert_int_equal(c.eos, -1);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"eos_token_id\":\"x\"", &c), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "eos_token_id"));
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"eos_token_id\":9999", &c), HZ_EFORMAT);
    /* features Horizon does not implement */
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"clip_qkv\":null", &c), HZ_OK);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"clip_qkv\":8.0", &c), HZ_EUNSUPPORTED);
    assert_non_null(strstr(hz_last_error_message(), "clip_qkv"));
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"hidden_act\":\"gelu\"", &c), HZ_EUNSUPPORTED);
    assert_non_null(strstr(hz_last_error_message(), "gelu"));
}

static void test_qwen_rules(void **state) {
    (void)state;
    hz_model_config c;
    assert_int_equal(parse_qwen_with("", &c), HZ_OK);
    assert_int_equal(c.qkv_bias, 1);
    assert_int_equal(c.qk_norm, 0);
    assert_true(c.rms_eps == 1e-6f);
    assert_int_equal(c.expert_inter, 320);
    assert_int_equal(c.shared_inter, 512);
    assert_int_equal(parse_qwen_with("\"qkv_bias\":false", &c), HZ_OK);
    assert_int_equal(c.qkv_bias, 0);
    assert_int_equal(parse_qwen_with("\"decoder_sparse_step\":1,\"mlp_only_layers\":[]", &c), HZ_OK);
    assert_int_equal(parse_qwen_with("\"decoder_sparse_step\":2", &c), HZ_EUNSUPPORTED);
    assert_non_null(strstr(hz_last_error_message(), "decoder_sparse_step"));
    assert_int_equal(parse_qwen_with("\"mlp_only_layers\":[1]", &c), HZ_EUNSUPPORTED);
    assert_non_null(strstr(hz_last_error_message(), "mlp_only_layers"));
    assert_int_equal(parse_qwen_with("\"use_sliding_window\":true", &c), HZ_EUNSUPPORTED);
    /* shape keys are required */
    const char *no_shared = "{\"model_type\":\"qwen2_moe\",\"hidden_size\":256,\"moe_intermediate_size\":320,"
                            "\"num_experts\":8,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                            "\"vocab_size\":512,\"num_experts_per_tok\":4}";
    assert_int_equal(hz_hfconfig_parse(no_shared, strlen(no_shared), &c), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "shared_expert_intermediate_size"));
}

static void test_unknown_model_type(void **state) {
    (void)state;
    const char *t = "{\"model_type\":\"mixtral\",\"hidden_size\":4096}";
    hz_model_config c;
    assert_int_equal(hz_hfconfig_parse(t, strlen(t), &c), HZ_EUNSUPPORTED);
    assert_non_null(strstr(hz_last_error_message(), "'mixtral'"));
    t = "{\"hidden_size\":4096}";
    assert_int_equal(hz_hfconfig_parse(t, strlen(t), &c), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "model_type"));
    t = "[1]";
    assert_int_equal(hz_hfconfig_parse(t, strlen(t), &c), HZ_EFORMAT);
    t = "{\"model_type\":";
    assert_int_equal(hz_hfconfig_parse(t, strlen(t), &c), HZ_EFORMAT);
}

static void test_missing_and_wrong_keys(void **state) {
    (void)state;
    const char *keys[] = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "vocab_size", "num_experts_per_tok", "num_experts"};
    const char *full = "{\"model_type\":\"olmoe\",\"hidden_size\":256,\"intermediate_size\":128,"
                       "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":512,"
                       "\"num_experts_per_tok\":2,\"num_experts\":8}";
    hz_model_config c;
    assert_int_equal(hz_hfconfig_parse(full, strlen(full), &c), HZ_OK);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        /* drop the key by renaming it */
        char text[1024];
        snprintf(text, sizeof text, "%s", full);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", keys[i]);
        char *at = strstr(text, quoted);
        assert_non_null(at);
        at[1] = 'X';
        assert_int_equal(hz_hfconfig_parse(text, strlen(text), &c), HZ_EFORMAT);
        if (!strstr(hz_last_error_message(), keys[i]))
            fail_msg("message \"%s\" does not name %s", hz_last_error_message(), keys[i]);
    }
    assert_int_equal(parse_olmoe_with("\"num_experts\":\"64\"", &c), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "num_experts"));
    assert_int_equal(parse_olmoe_with("\"num_experts\":8.5", &c), HZ_EFORMAT);
    assert_int_equal(parse_olmoe_with("\"num_experts\":-8", &c), HZ_EFORMAT);
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"norm_topk_prob\":1", &c), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "norm_topk_prob"));
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"rms_norm_eps\":-1", &c), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "rms_norm_eps"));
    /* shapes: heads must divide hidden, top-k within the experts */
    assert_int_equal(parse_olmoe_with("\"num_experts\":8,\"num_key_value_heads\":3", &c), HZ_EFORMAT);
    assert_int_equal(parse_olmoe_with("\"num_experts\":1", &c), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "num_experts_per_tok"));
    const char *odd = "{\"model_type\":\"olmoe\",\"hidden_size\":250,\"intermediate_size\":128,"
                      "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":512,"
                      "\"num_experts_per_tok\":2,\"num_experts\":8}";
    assert_int_equal(hz_hfconfig_parse(odd, strlen(odd), &c), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "hidden_size"));
    /* load names the file */
    assert_int_equal(hz_hfconfig_load("/nonexistent/config.json", &c), HZ_EIO);
    assert_non_null(strstr(hz_last_error_message(), "/nonexistent/config.json"));
}

/* Counts far beyond any model are refused by the parser, before any allocation sized by them. */
static void test_huge_counts(void **state) {
    (void)state;
    struct {
        const char *layers, *experts;
        int want;
    } cases[] = {{"4294967295", "8", HZ_EUNSUPPORTED},
                 {"4097", "8", HZ_EUNSUPPORTED},
                 {"2", "4097", HZ_EUNSUPPORTED},
                 {"4096", "4096", HZ_EUNSUPPORTED},
                 {"4096", "256", HZ_OK},
                 {"16", "64", HZ_OK}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"model_type\":\"olmoe\",\"hidden_size\":256,\"intermediate_size\":128,"
                 "\"num_hidden_layers\":%s,\"num_attention_heads\":4,\"vocab_size\":512,"
                 "\"num_experts_per_tok\":2,\"num_experts\":%s}",
                 cases[i].layers, cases[i].experts);
        hz_model_config c;
        int st = hz_hfconfig_parse(text, strlen(text), &c);
        if (st != cases[i].want)
            fail_msg("%s layers x %s experts: status %d, expected %d (%s)", cases[i].layers, cases[i].experts, st,
                     cases[i].want, hz_last_error_message());
        if (st) assert_non_null(strstr(hz_last_error_message(), "at most 4096 layers"));
    }
}

/* A FIFO or a directory named as config.json is refused at once (opening a FIFO would wait for a
 * writer). */
static void test_load_refuses_what_is_not_a_file(void **state) {
    (void)state;
    char dir[] = "/tmp/hz-hfconfig-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/config.json", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    hz_model_config c;
    assert_int_equal(hz_hfconfig_load(fifo, &c), HZ_EIO);
    assert_non_null(strstr(hz_last_error_message(), "not a regular file"));
    assert_int_equal(hz_hfconfig_load(dir, &c), HZ_EIO);
    assert_non_null(strstr(hz_last_error_message(), "not a regular file"));
    unlink(fifo);
    rmdir(dir);
}

static void test_presets(void **state) {
    (void)state;
    hz_model_config c;
    assert_int_equal(hz_config_preset(HZ_ARCH_QWEN2MOE, "tiny", &c), HZ_OK);
    assert_int_not_equal(c.expert_inter % 256, 0);
    assert_true(c.shared_inter > 0);
    assert_true(c.top_k <= c.experts);
    assert_int_equal(c.head_dim * c.heads, c.hidden);
    assert_int_equal(hz_config_preset(HZ_ARCH_OLMOE, "tiny", &c), HZ_OK);
    assert_int_equal(c.qk_norm, 1);
    assert_int_equal(c.head_dim * c.heads, c.hidden);
    assert_int_equal(hz_config_preset(HZ_ARCH_OLMOE, "qwen1.5-moe-a2.7b", &c), HZ_EINVAL);
    assert_int_equal(hz_config_preset(HZ_ARCH_QWEN2MOE, "huge", &c), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), "huge"));
    assert_string_equal(hz_arch_name(HZ_ARCH_OLMOE), "olmoe");
    assert_string_equal(hz_arch_name(HZ_ARCH_QWEN2MOE), "qwen2_moe");
}

static void test_to_json_roundtrip(void **state) {
    (void)state;
    const struct {
        hz_arch arch;
        const char *preset;
    } all[] = {{HZ_ARCH_OLMOE, "tiny"},
               {HZ_ARCH_OLMOE, "olmoe-1b-7b"},
               {HZ_ARCH_QWEN2MOE, "tiny"},
               {HZ_ARCH_QWEN2MOE, "qwen1.5-moe-a2.7b"}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        hz_model_config p, back;
        assert_int_equal(hz_config_preset(all[i].arch, all[i].preset, &p), HZ_OK);
        char *text = hz_hfconfig_to_json(&p);
        assert_non_null(text);
        assert_int_equal(hz_hfconfig_parse(text, strlen(text), &back), HZ_OK);
        assert_config_equal(&p, &back);

        cJSON *o = cJSON_Parse(text);
        assert_non_null(o);
        const cJSON *archs = cJSON_GetObjectItemCaseSensitive(o, "architectures");
        assert_string_equal(archs->child->valuestring,
                            p.arch == HZ_ARCH_OLMOE ? "OlmoeForCausalLM" : "Qwen2MoeForCausalLM");
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "model_type")->valuestring, hz_arch_name(p.arch));
        const char *common[] = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                "num_key_value_heads", "vocab_size", "num_experts", "num_experts_per_tok",
                                "norm_topk_prob", "max_position_embeddings", "rope_theta", "rms_norm_eps",
                                "tie_word_embeddings", "eos_token_id", "bos_token_id", "pad_token_id",
                                "torch_dtype", "output_router_logits", "router_aux_loss_coef"};
        for (size_t k = 0; k < sizeof common / sizeof common[0]; k++)
            if (!cJSON_HasObjectItem(o, common[k])) fail_msg("%s: no %s in\n%s", all[i].preset, common[k], text);
        if (p.arch == HZ_ARCH_OLMOE) {
            assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "intermediate_size")->valueint, (int)p.expert_inter);
            assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "attention_bias")));
            assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "clip_qkv")));
        } else {
            assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "moe_intermediate_size")->valueint,
                             (int)p.expert_inter);
            assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "shared_expert_intermediate_size")->valueint,
                             (int)p.shared_inter);
            assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "decoder_sparse_step")->valueint, 1);
            assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "mlp_only_layers")), 0);
            assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "qkv_bias")));
            assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "use_sliding_window")));
            assert_true(cJSON_HasObjectItem(o, "sliding_window"));
            assert_true(cJSON_HasObjectItem(o, "max_window_layers"));
        }
        /* floats are written as their shortest decimal, not the double expansion of the float */
        assert_true(strstr(text, "1e-05") || strstr(text, "1e-06"));
        cJSON_Delete(o);
        free(text);
    }
    /* a fixture parsed and written again parses to the same config */
    char *path = fixture_path("olmoe-1b-7b-0924.config.json");
    hz_model_config c, back;
    assert_int_equal(hz_hfconfig_load(path, &c), HZ_OK);
    char *text = hz_hfconfig_to_json(&c);
    assert_int_equal(hz_hfconfig_parse(text, strlen(text), &back), HZ_OK);
    assert_config_equal(&c, &back);
    free(text);
    free(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_olmoe_fixture),
        cmocka_unit_test(test_qwen_fixture),
        cmocka_unit_test(test_transformers5_fixture),
        cmocka_unit_test(test_rope_spellings),
        cmocka_unit_test(test_olmoe_defaults_and_aliases),
        cmocka_unit_test(test_qwen_rules),
        cmocka_unit_test(test_unknown_model_type),
        cmocka_unit_test(test_missing_and_wrong_keys),
        cmocka_unit_test(test_huge_counts),
        cmocka_unit_test(test_load_refuses_what_is_not_a_file),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_to_json_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
