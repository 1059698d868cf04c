/* The model shape of the cache tests and the cache benchmark: only the routed-expert dimensions
 * matter to a synthetic backing; the rest is a valid OLMoE-style config. No test framework needed, so
 * release builds of the benchmark (no invariant checker) can include it. */
#ifndef HZ_CACHE_TEST_CONFIG_H
#define HZ_CACHE_TEST_CONFIG_H

#include <stdint.h>
#include <string.h>

#include "format/hfconfig.h"

static inline hz_model_config tu_config(uint32_t layers, uint32_t experts, uint32_t top_k, uint32_t hidden,
                                        uint32_t inter) {
    hz_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.arch = HZ_ARCH_OLMOE;
    cfg.hidden = hidden;
    cfg.layers = layers;
    cfg.heads = 4;
    cfg.kv_heads = 4;
    cfg.head_dim = hidden / 4;
    cfg.vocab = 256;
    cfg.experts = experts;
    cfg.top_k = top_k;
    cfg.expert_inter = inter;
    cfg.max_pos = 128;
    cfg.rope_theta = 10000.0f;
    cfg.rms_eps = 1e-5f;
    cfg.qk_norm = 1;
    cfg.eos = -1;
    cfg.bos = -1;
    cfg.pad = -1;
    cfg.torch_dtype = HZ_DTYPE_BF16;
    return cfg;
}

/* xorshift64: the tests' reproducible stream of random numbers (state: any non-zero seed). */
static inline uint64_t tu_rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

#endif
