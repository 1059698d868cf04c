/* lib/cache: eviction policies. A policy only ranks experts; the cache decides how many victims a
 * publication needs and never passes a policy the experts of the group being acquired. All calls are
 * made under the cache's lock. */
#ifndef HZ_EVICT_H
#define HZ_EVICT_H

#include <stdint.h>

#define HZ_NO_EXPERT UINT32_MAX

typedef struct hz_evict_policy {
    const char *name;
    int (*create)(uint32_t layers, uint32_t experts, void **out_state);
    void (*destroy)(void *state);
    /* The group `experts[0..n)` of `layer` was just acquired. */
    void (*touch)(void *state, uint32_t layer, const uint32_t *experts, uint32_t n);
    /* A victim among the experts e of `layer` with candidate[e] != 0; HZ_NO_EXPERT when none. */
    uint32_t (*victim)(void *state, uint32_t layer, const uint8_t *candidate, uint32_t experts);
} hz_evict_policy;

extern const hz_evict_policy hz_evict_lru;

#endif
