/* libFuzzer target: arbitrary bytes as a config.json through the Hugging Face config reader. Every
 * input must end in HZ_OK or an error status with a message, never a crash or leak; a config the reader
 * accepts must describe a consistent shape and survive a round trip through hz_hfconfig_to_json. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "format/hfconfig.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hz_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int st = hz_hfconfig_parse((const char *)data, size, &cfg);
    if (st != HZ_OK) {
        if (hz_last_error_message()[0] == '\0') __builtin_trap();
        return 0;
    }
    /* accepted shapes are the ones the rest of the library relies on */
    if (cfg.hidden == 0 || cfg.heads == 0 || cfg.head_dim * cfg.heads != cfg.hidden) __builtin_trap();
    if (cfg.top_k == 0 || cfg.top_k > cfg.experts || cfg.layers == 0 || cfg.vocab == 0) __builtin_trap();
    char *json = hz_hfconfig_to_json(&cfg);
    if (json) {
        hz_model_config again;
        memset(&again, 0, sizeof again);
        if (hz_hfconfig_parse(json, strlen(json), &again) != HZ_OK) __builtin_trap();
        if (again.hidden != cfg.hidden || again.layers != cfg.layers || again.experts != cfg.experts ||
            again.top_k != cfg.top_k || again.expert_inter != cfg.expert_inter || again.vocab != cfg.vocab)
            __builtin_trap();
        free(json);
    }
    return 0;
}
