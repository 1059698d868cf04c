/* LRU: the least recently acquired resident expert of the layer is evicted first. A global tick
 * stamps every acquire; ties (experts never acquired since the initial placement) go to the lowest
 * expert id so runs are reproducible. */
#include <stdlib.h>

#include "cache/evict.h"
#include "core/core.h"

typedef struct lru_state {
    uint32_t experts;
    uint64_t tick;
    uint64_t *stamp; /* layers x experts */
} lru_state;

static int lru_create(uint32_t layers, uint32_t experts, void **out) {
    lru_state *s = calloc(1, sizeof *s);
    if (!s) return hz_error(HZ_ENOMEM, "LRU policy: out of memory");
    s->experts = experts;
    s->stamp = calloc((size_t)layers * experts, sizeof *s->stamp);
    if (!s->stamp) {
        free(s);
        return hz_error(HZ_ENOMEM, "LRU policy: out of memory for %u x %u stamps", layers, experts);
    }
    *out = s;
    return HZ_OK;
}

static void lru_destroy(void *state) {
    lru_state *s = state;
    if (!s) return;
    free(s->stamp);
    free(s);
}

static void lru_touch(void *state, uint32_t layer, const uint32_t *experts, uint32_t n) {
    lru_state *s = state;
    uint64_t t = ++s->tick;
    for (uint32_t i = 0; i < n; i++) s->stamp[(size_t)layer * s->experts + experts[i]] = t;
}

static uint32_t lru_victim(void *state, uint32_t layer, const uint8_t *candidate, uint32_t experts) {
    lru_state *s = state;
    uint32_t best = HZ_NO_EXPERT;
    uint64_t best_t = UINT64_MAX;
    const uint64_t *st = s->stamp + (size_t)layer * s->experts;
    for (uint32_t e = 0; e < experts; e++)
        if (candidate[e] && st[e] < best_t) {
            best_t = st[e];
            best = e;
        }
    return best;
}

const hz_evict_policy hz_evict_lru = {
    .name = "lru",
    .create = lru_create,
    .destroy = lru_destroy,
    .touch = lru_touch,
    .victim = lru_victim,
};
