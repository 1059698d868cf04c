/* An ordered parallel map for hz-pack.
 *
 * Items 0 .. n_items - 1 are computed by a pool of worker threads and handed to a consumer on the
 * calling thread strictly in index order, so the consumer can stream results into a sequential writer
 * (the artifact) while the expensive part (reading, converting, quantizing) runs on every core. Item i
 * is computed into result slot i % window; a worker may start item i only once the consumer has
 * finished item i - window, which bounds the memory held in flight to `window` slots plus one scratch
 * area per worker, whatever the model size.
 *
 * Errors: the first failing item in index order decides the result (a compute error of item i is
 * reported when the consumer reaches i, after items 0 .. i - 1 were consumed), so a failure reads the
 * same for every thread count. On a failure no new item starts; items already running finish, every
 * worker is joined, and the compute error's message is re-raised on the calling thread (hz_error's
 * detail is thread-local). */
#ifndef HZ_PACK_PIPELINE_H
#define HZ_PACK_PIPELINE_H

#include <stdint.h>

/* Computes item `index` into `slot` with the worker's own `scratch`. Runs on a worker thread,
 * concurrently with other items and with the consumer: it may only read shared state. Returns an HZ
 * status with hz_error detail. */
typedef int (*pack_compute_fn)(void *ctx, uint64_t index, void *slot, void *scratch);
/* Consumes item `index` (computed successfully) from `slot`. Runs on the calling thread, in index
 * order. A non-zero status stops the pipeline. */
typedef int (*pack_consume_fn)(void *ctx, uint64_t index, void *slot);

typedef struct pack_pipeline_cfg {
    uint64_t n_items;
    unsigned threads;     /* worker threads, >= 1 */
    unsigned window;      /* result slots, >= 1 */
    void *const *slots;   /* window slot pointers, passed to compute and consume */
    void *const *scratch; /* threads per-worker pointers, passed to compute */
    pack_compute_fn compute;
    pack_consume_fn consume;
    void *ctx;
} pack_pipeline_cfg;

/* Runs every item; returns HZ_OK or the first failure in index order (HZ_EINVAL for a bad cfg,
 * HZ_ENOMEM when a thread cannot start). Returns only after every worker has exited. */
int pack_pipeline_run(const pack_pipeline_cfg *cfg);

#endif
