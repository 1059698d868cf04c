/* lib/backing: internal accessors of the immutable host backing (public calls are in horizon.h). */
#ifndef HZ_BACKING_H
#define HZ_BACKING_H

#include <stdint.h>

#include "core/core.h"
#include "format/hfconfig.h"
#include "format/qpack.h"

/* A non-routed FP16 tensor held by the backing. */
typedef struct hz_backing_tensor {
    const char *name;
    uint32_t ndim;
    uint64_t shape[4];
    uint64_t numel;
    const hz_f16 *data;
} hz_backing_tensor;

const hz_model_config *hz_backing_config(const hz_host_backing *b);
const hz_expert_layout *hz_backing_expert_layout(const hz_host_backing *b);
/* The read-only blob of (layer, expert): hz_backing_expert_layout(b)->blob_bytes bytes. NULL when out
 * of range. */
const uint8_t *hz_backing_expert_blob(const hz_host_backing *b, uint32_t layer, uint32_t expert);
/* A non-routed tensor by its Hugging Face name; NULL when absent. */
const hz_backing_tensor *hz_backing_find_tensor(const hz_host_backing *b, const char *name);
/* The routed-expert region (read-only): start and length; used by tests and by the registered
 * transport. */
const uint8_t *hz_backing_routed_region(const hz_host_backing *b, uint64_t *out_bytes);
/* The source checkpoint dtype declared in the artifact ("bf16", "f16", "f32"). */
const char *hz_backing_source_dtype(const hz_host_backing *b);

/* Children (caches, models) register themselves so hz_host_backing_close can refuse with HZ_EBUSY.
 * Thread-safe. */
void hz_backing_child_add(hz_host_backing *b);
void hz_backing_child_remove(hz_host_backing *b);

/* Test support: a backing with `cfg`'s shape whose expert blobs are deterministic pseudo-random bytes
 * derived from `seed` (no non-routed tensors), made read-only like a real one. Lets the cache tests run
 * without an artifact file. */
int hz_backing_create_synthetic(const hz_model_config *cfg, uint64_t seed, hz_host_backing **out);

#endif
