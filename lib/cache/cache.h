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
/* The device address of the arena's first row: readable for as long as the cache lives (the GPU decode
 * step points the gate of its experts enqueued ahead there before any lease has given it rows). NULL for
 * NULL. Thread-safe (fixed at creation). */
const void *hz_cache_first_row(const hz_cache *cache);
/* Held by a GPU session for the whole of a forward at partial residency (decode steps and prefill), so
 * that such forwards of sessions sharing this cache run one at a time: a step that queues its experts
 * ahead of the routing makes the device wait for its host, and must never find that host waiting for
 * another session's work queued behind it. Such sessions also take it around their creation and
 * destruction (their device allocations and frees). Not held by anything else; never held while taking
 * it. */
void hz_cache_run_lock(hz_cache *cache);
void hz_cache_run_unlock(hz_cache *cache);
/* A lease on the current generation, whatever it maps (no group: no LRU touch, no counters). A GPU
 * session at partial residency holds one while its device resolves expert hits from a table of the
 * generation's rows (forward_cuda.c, "the hits on the device"): the rows it maps are then not reused
 * until it is released (hz_generation_release). Errors: HZ_EINVAL, HZ_ENOMEM, HZ_EFAULTED.
 * Thread-safe. */
int hz_cache_hold(hz_cache *cache, hz_generation **out);
/* The device address of each of the `layer`'s experts in the lease's generation, NULL for those it does
 * not map, into rows[0..experts). Errors: HZ_EINVAL (NULL), HZ_ERANGE (layer). */
int hz_generation_layer_rows(const hz_generation *lease, uint32_t layer, const void **rows);
/* Models register themselves so hz_cache_destroy refuses with HZ_EBUSY while one lives. Thread-safe. */
void hz_cache_model_add(hz_cache *cache);
void hz_cache_model_remove(hz_cache *cache);

/* ---- speculative prefetch (hz_cache_options.prefetch; doc/cache-contract.md, "Prefetch") ---- */

/* The cache's hz_prefetch mode; HZ_PREFETCH_OFF for NULL. Thread-safe (fixed at creation). */
int hz_cache_prefetch_mode(const hz_cache *cache);
/* Asks the cache to start loading the experts of experts[0..n) of `layer` that the current generation
 * does not map, and returns without waiting: the request goes to the cache's prefetch thread, which
 * loads them into spare rows free at that moment (it never waits for one and never evicts) and leaves
 * them ready, unpublished. The next acquire of `layer` publishes the ready experts its group wants (one
 * generation, victims outside the group, as a miss would) and counts them as prefetch hits; the others
 * are given up when a newer request replaces them or a miss needs their rows. A request not started
 * yet is replaced by a newer one. Advisory: failures of the load are counted (prefetch_failures), not
 * returned. An acquire whose group misses an expert the request predicts waits for it; a miss it does
 * not serve makes the running load start no further copy. Errors: HZ_EINVAL / HZ_ERANGE / HZ_ECAPACITY
 * (as hz_generation_acquire's group rules), HZ_ESTATE (prefetch off), HZ_EFAULTED. Thread-safe. */
int hz_cache_prefetch(hz_cache *cache, uint32_t layer, const uint32_t *experts, uint32_t n);
/* Asked by a model before it computes a prediction: 1 when the cache's gate is open (compute it and
 * hand it to hz_cache_prefetch), 0 while the gate is closed because too few of the recently prefetched
 * experts were used (doc/cache-contract.md, "The gate"): that prediction is then counted as requested
 * and declined (prefetch_gated) and the caller skips it. 0 also when prefetch is off or cache is NULL
 * (nothing counted). hz_cache_prefetch itself does not consult the gate. Thread-safe. */
int hz_cache_prefetch_admit(hz_cache *cache);
/* Blocks until no prefetch request is queued or running (tests and benchmarks that need settled
 * counters). Returns at once when prefetch is off. */
void hz_cache_prefetch_wait(hz_cache *cache);

#endif
