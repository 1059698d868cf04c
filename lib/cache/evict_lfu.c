/* LFU with decay: the resident expert of the layer acquired least often lately is evicted first. Each
 * acquire adds 1 to the count of every expert of its group, and every count of a layer halves over
 * `half_life` acquires of that layer, so the counts estimate how often each expert is used now and an
 * expert that was hot long ago fades. Where the routing favours some experts of a layer over others,
 * those stay resident through runs of rarely used ones, which LRU would let push them out; where it
 * favours none, the policy does about what LRU does. Ties (equal decayed counts, e.g. experts never
 * acquired since the initial placement) go to the least recently acquired, then to the lowest id, so
 * runs are reproducible.
 *
 * The decay is applied lazily: an expert keeps its count as of its last acquire and the layer's acquire
 * number then; count x 2^(-(now - then) / half_life) is its count now. */
#include <math.h>
#include <stdlib.h>

#include "cache/evict.h"
#include "core/core.h"

typedef struct lfu_slot {
    double count;  /* as of acquire `at` of its layer, that acquire included */
    uint64_t at;   /* the layer's acquire number at the last acquire of this expert; 0 = never */
} lfu_slot;

typedef struct lfu_state {
    uint32_t experts;
    double inv_half_life;
    uint64_t *acquires; /* per layer */
    lfu_slot *slot;     /* layers x experts */
} lfu_state;

static int lfu_create(uint32_t layers, uint32_t experts, void **out) {
    lfu_state *s = calloc(1, sizeof *s);
    if (!s) return hz_error(HZ_ENOMEM, "LFU policy: out of memory");
    s->experts = experts;
    uint32_t half_life = HZ_EVICT_LFU_HALF_LIFE;
    (void)hz_env_u32("HZ_LFU_HALF_LIFE", 1, 1u << 30, &half_life); /* a tuning knob; out of range: default */
    s->inv_half_life = 1.0 / half_life;
    s->acquires = calloc(layers, sizeof *s->acquires);
    s->slot = calloc((size_t)layers * experts, sizeof *s->slot);
    if (!s->acquires || !s->slot) {
        free(s->acquires);
        free(s->slot);
        free(s);
        return hz_error(HZ_ENOMEM, "LFU policy: out of memory for %u x %u counts", layers, experts);
    }
    *out = s;
    return HZ_OK;
}

static void lfu_destroy(void *state) {
    lfu_state *s = state;
    if (!s) return;
    free(s->acquires);
    free(s->slot);
    free(s);
}

/* The count of slot `x` at acquire `now` of its layer. exp2 of a large negative argument is 0, never
 * a trap, so an expert unused for a very long time simply counts 0. */
static double decayed(const lfu_state *s, const lfu_slot *x, uint64_t now) {
    return x->count == 0.0 ? 0.0 : x->count * exp2(-(double)(now - x->at) * s->inv_half_life);
}

static void lfu_touch(void *state, uint32_t layer, const uint32_t *experts, uint32_t n) {
    lfu_state *s = state;
    uint64_t now = ++s->acquires[layer];
    lfu_slot *row = s->slot + (size_t)layer * s->experts;
    for (uint32_t i = 0; i < n; i++) {
        lfu_slot *x = &row[experts[i]];
        x->count = decayed(s, x, now) + 1.0;
        x->at = now;
    }
}

static uint32_t lfu_victim(void *state, uint32_t layer, const uint8_t *candidate, uint32_t experts) {
    lfu_state *s = state;
    const uint64_t now = s->acquires[layer];
    const lfu_slot *row = s->slot + (size_t)layer * s->experts;
    uint32_t best = HZ_NO_EXPERT;
    double best_c = INFINITY;
    uint64_t best_at = UINT64_MAX;
    for (uint32_t e = 0; e < experts; e++) {
        if (!candidate[e]) continue;
        double c = decayed(s, &row[e], now);
        if (c < best_c || (c == best_c && row[e].at < best_at)) {
            best_c = c;
            best_at = row[e].at;
            best = e;
        }
    }
    return best;
}

const hz_evict_policy hz_evict_lfu = {
    .name = "lfu",
    .create = lfu_create,
    .destroy = lfu_destroy,
    .touch = lfu_touch,
    .victim = lfu_victim,
};
