/* lib/cache: internal calls other modules make on a cache (the public ones are in horizon.h). */
#ifndef HZ_CACHE_H
#define HZ_CACHE_H

#include <stdint.h>

#include "core/core.h"

/* HZ_OK when `cache` was created on this backing and device, else HZ_EINVAL naming the mismatch. */
int hz_cache_check_model_use(const hz_cache *cache, const hz_host_backing *backing, const hz_device *device);
/* The most experts one hz_generation_acquire accepts: the capacity per layer. Groups with more misses
 * than spare rows are loaded in several serialized rounds inside that one call. */
int hz_cache_group_limit(const hz_cache *cache, uint32_t *out);
/* Models register themselves so hz_cache_destroy refuses with HZ_EBUSY while one lives. Thread-safe. */
void hz_cache_model_add(hz_cache *cache);
void hz_cache_model_remove(hz_cache *cache);

#endif
