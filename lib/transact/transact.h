/* lib/transact: the miss transactor (DESIGN.md 4.5) and its transports (doc/cache-contract.md).
 *
 * It moves expert blobs into reserved device rows and returns once every copy has completed; it knows
 * nothing of generations: the cache reserves the destination rows, calls hz_transactor_load, and
 * publishes afterwards. Three transports, chosen at creation:
 *  - serial: backing -> pinned staging (host memcpy on the calling thread) -> row (async H2D on the copy
 *    queue) through a ring of staging slots, each guarded by the completion event of the last copy that
 *    read it: a slot is refilled only after that event has completed.
 *  - threaded: the same ring, but the host copies run on a pool of threads owned by the transactor,
 *    each blob split into chunks copied in parallel; an item's H2D is enqueued by the calling thread as
 *    soon as all of its chunks are in staging (in completion order, not item order), or, piecewise
 *    (hz_txn_config.piecewise), in order, a run of landed chunks at a time once the run holds
 *    1 / waves of the blob. Threads poll for spin_us before sleeping on a condition variable
 *    (hz_txn_config.spin_us).
 *  Serial and threaded write staging with streaming stores where the CPU has them
 *  (hz_txn_config.streaming), so that the H2D does not read the blob back out of CPU caches.
 *  - registered: the backing's routed region is registered with the backend for direct DMA once, at
 *    creation; H2D copies read the backing itself. No staging slot exists. */
#ifndef HZ_TRANSACT_H
#define HZ_TRANSACT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/core.h"

typedef struct hz_transactor hz_transactor;

typedef struct hz_txn_item {
    uint32_t layer, expert;
    void *dst; /* the reserved device row, row_bytes long */
} hz_txn_item;

typedef struct hz_txn_result {
    /* 1 when, on return, no copy issued by this call can still be running (always on success; on
     * failure after the copy queue was drained). 0 means the destination rows are in an unknown state
     * and may still be written: the caller must not reuse them. */
    int drained;
    uint32_t copies_done; /* items whose H2D completed */
    /* On success: items [0, loaded) are in their rows. n, unless a cancellable load was cancelled: then
     * the items from `loaded` on were never started and their rows were never written. */
    uint32_t loaded;
} hz_txn_result;

/* Test-only fault points of the transactor itself (the backend's calls are faulted through the
 * fault-injecting backend). */
typedef enum hz_txn_fault {
    HZ_TXN_FAULT_STAGING_COPY = 0, /* one host copy backing -> staging (a whole blob in serial, one chunk
                                      in threaded); counted and failed on whichever thread runs it */
    HZ_TXN_FAULT_COUNT
} hz_txn_fault;

/* Values of hz_transport (include/horizon/horizon.h). */
enum { HZ_TXN_SERIAL = 0, HZ_TXN_THREADED = 1, HZ_TXN_REGISTERED = 2, HZ_TXN_TRANSPORT_COUNT = 3 };

typedef struct hz_txn_config {
    int transport;        /* HZ_TXN_* */
    uint32_t slots;       /* staging slots of row_bytes (serial, threaded; ignored by registered) */
    uint32_t threads;     /* threaded: copy threads (>= 1) */
    uint64_t chunk_bytes; /* threaded: smallest piece one thread copies; 0 = 256 KiB */
    /* threaded: 0 = an item's H2D is enqueued once all its pieces are in staging (one copy per blob);
     * 1 = piecewise: `waves` pieces per thread's share (at most 64 in all), and the run of landed pieces
     * from the first unsent one is enqueued once it holds 1 / waves of the blob or reaches its end
     * (several copies per blob, in order), so the H2D of the first wave overlaps the host copies of
     * the next. The slot's event follows the last run's copy; h2d_copies still counts blobs. */
    int piecewise;
    uint32_t waves; /* piecewise: 0 = 2 */
    /* threaded: microseconds a copy thread polls for more work after its last piece, and the loading
     * thread for finished fills, before sleeping on a condition variable (0 = sleep at once) */
    uint32_t spin_us;
    /* serial, threaded: backing -> staging copies use streaming (non-temporal) stores where the CPU has
     * them (x86-64), so that the H2D reading the slot next does not fetch it from CPU caches; 0 = memcpy */
    int streaming;
} hz_txn_config;

/* Serial and threaded: `slots` staging buffers of `row_bytes` each in one pinned allocation, one event
 * per slot; threaded also starts its threads (failure to start one fails creation). Registered:
 * host_register of the backing's routed region (read-only), one event. */
int hz_transactor_create(hz_backend *be, const hz_host_backing *backing, uint64_t row_bytes,
                         const hz_txn_config *cfg, hz_transactor **out);
/* Waits for copies in flight, stops the threads, unregisters, then frees. NULL allowed. */
void hz_transactor_destroy(hz_transactor *t);

/* Copies every item's blob into its row and returns once all copies have completed (HZ_OK) or one step
 * failed (its status; the message names the step and the expert). On failure no host copy of this call
 * is still running and (when res->drained) no H2D either. Serialized by the caller (the cache calls it
 * from miss transactions and from its prefetch thread, always under its transaction lock). */
int hz_transactor_load(hz_transactor *t, const hz_txn_item *items, uint32_t n, hz_txn_result *res);
/* The same, but once *cancel is non-zero no further item is started (serial: no further staging copy;
 * threaded: no further blob handed to the copy threads; registered: no further copy enqueued, which in
 * practice cuts short only a load cancelled before it starts, since its copies are enqueued at once).
 * Items already started complete; res->loaded says how many (a prefix). Used by the cache's prefetch
 * thread, whose speculative load gives way to a miss (a request it takes while a miss waits for the
 * transaction lock starts cancelled). */
int hz_transactor_load_cancellable(hz_transactor *t, const hz_txn_item *items, uint32_t n, const _Atomic int *cancel,
                                   hz_txn_result *res);

typedef struct hz_txn_stats {
    int transport;                /* HZ_TXN_* */
    uint32_t threads;             /* copy threads (threaded), 1 (serial: the caller), 0 (registered) */
    uint32_t slots;
    uint32_t slots_busy;          /* slots being filled or whose last copy has not been seen complete */
    uint64_t staging_bytes;       /* slots x row_bytes */
    uint64_t staging_high_water;  /* most bytes of staging in use at once */
    uint64_t h2d_bytes, h2d_copies;
    uint64_t staging_copies;      /* blobs copied backing -> staging */
    uint64_t staging_chunks;      /* host copies those took (1 per blob in serial) */
    uint64_t staging_copy_bytes;  /* bytes copied backing -> staging */
    uint64_t staging_copy_ns;     /* wall time during which at least one staging copy ran */
    uint64_t staging_thread_ns;   /* the copies' durations summed over threads */
    /* threaded, summed over finished fills (one per blob): from the hand-out to the first piece's start
     * (the threads' reaction), from it to the last piece's end (the copy), and from that to the blob's
     * (piecewise: last run's) H2D being enqueued (the loading thread's reaction); 0 for the others */
    uint64_t fill_wait_ns, fill_span_ns, fill_lag_ns;
    uint64_t registered_bytes;    /* bytes registered for direct DMA (registered), else 0 */
    uint32_t fills_pending;       /* threaded: blobs handed to the copy threads and not yet taken back by
                                     the loading thread (0 whenever no load runs) */
    int piecewise;                /* threaded: H2D per run of pieces (hz_txn_config.piecewise) */
    int streaming;                /* serial, threaded: the staging copies use streaming stores (hz_txn_config.streaming
                                     on a CPU that has them) */
} hz_txn_stats;

void hz_transactor_stats(hz_transactor *t, hz_txn_stats *out);

/* "serial", "threaded", "registered" ("unknown" otherwise). */
const char *hz_txn_transport_name(int transport);

/* The widest streaming store the staging copies use on this CPU: 64 (AVX-512F), 16 (x86-64), 0 (none:
 * they use memcpy). */
int hz_txn_streaming_width(void);
/* Copies n bytes with streaming stores where the CPU has them (the staging copies' routine), memcpy
 * elsewhere; dst and src need no alignment. width 0: the widest stores (hz_txn_streaming_width), 16:
 * 16-byte ones. Returns the store width used (64, 16), 0 for memcpy. Internal; exported to the tests
 * and hz-ceilings. */
int hz_txn_copy_streaming(void *dst, const void *src, size_t n, int width);
/* The threaded transport's default copy threads: three quarters of the online CPUs, 1 to 12. */
uint32_t hz_txn_default_threads(void);

/* Test support (threaded): split each blob into pieces of at least `bytes` (at most one per thread), so
 * that small test blobs are copied by several threads too. Call between loads. HZ_EINVAL (not threaded),
 * HZ_ESTATE (a load runs). */
int hz_transactor_set_piece_bytes(hz_transactor *t, uint64_t bytes);
/* Test support (threaded): turns piecewise H2D (hz_txn_config.piecewise) on or off and splits the blobs
 * again. Call between loads. HZ_EINVAL (not threaded), HZ_ESTATE (a load runs). */
int hz_transactor_set_piecewise(hz_transactor *t, int on);

/* Test support: every later staging copy (a blob in serial, a piece in threaded) sleeps `usec` before
 * copying, as a large blob would take, so that failures meet copies still in flight. 0 = no delay. */
void hz_transactor_set_copy_delay(hz_transactor *t, uint32_t usec);

/* The `nth` (1 = next) execution of `point` from now fails with `status`. nth = 0 disarms. */
void hz_transactor_inject(hz_transactor *t, hz_txn_fault point, uint64_t nth, int status);

#endif
