/* lib/transact: the miss transactor (DESIGN.md 4.5), transport "serial" (version 1).
 *
 * It moves expert blobs backing -> pinned staging (host memcpy) -> device row (async H2D on the copy
 * queue) through a ring of staging slots, each guarded by the completion event of the last copy that
 * read it: a slot is refilled only after that event has completed. It knows nothing of generations;
 * the cache reserves the destination rows, calls hz_transactor_load, and publishes afterwards. */
#ifndef HZ_TRANSACT_H
#define HZ_TRANSACT_H

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
} hz_txn_result;

/* Test-only fault points of the transactor itself (the backend's calls are faulted through the
 * fault-injecting backend). */
typedef enum hz_txn_fault {
    HZ_TXN_FAULT_STAGING_COPY = 0, /* the host copy backing -> staging */
    HZ_TXN_FAULT_COUNT
} hz_txn_fault;

/* `slots` staging buffers of `row_bytes` each, in pinned memory, plus one event per slot. */
int hz_transactor_create(hz_backend *be, const hz_host_backing *backing, uint64_t row_bytes, uint32_t slots,
                         hz_transactor **out);
/* Waits for copies in flight, then frees. NULL allowed. */
void hz_transactor_destroy(hz_transactor *t);

/* Copies every item's blob into its row and returns once all copies have completed (HZ_OK) or one step
 * failed (its status; the message names the step and the expert). Serialized by the caller. */
int hz_transactor_load(hz_transactor *t, const hz_txn_item *items, uint32_t n, hz_txn_result *res);

typedef struct hz_txn_stats {
    uint32_t slots;
    uint32_t slots_busy;          /* slots whose last copy has not been seen complete */
    uint64_t staging_bytes;       /* slots x row_bytes */
    uint64_t staging_high_water;  /* most bytes of staging in use at once */
    uint64_t h2d_bytes, h2d_copies;
    uint64_t staging_copies;      /* backing -> staging host copies */
} hz_txn_stats;

void hz_transactor_stats(hz_transactor *t, hz_txn_stats *out);

/* The `nth` (1 = next) execution of `point` from now fails with `status`. nth = 0 disarms. */
void hz_transactor_inject(hz_transactor *t, hz_txn_fault point, uint64_t nth, int status);

#endif
