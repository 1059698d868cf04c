/* lib/cache: the generation cache's internal structures, shared by cache.c, the invariant checker and
 * the tests. See doc/cache-contract.md for the row state machine and the rules these fields carry. */
#ifndef HZ_CACHE_INTERNAL_H
#define HZ_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "cache/cache.h"
#include "cache/evict.h"
#include "core/core.h"
#include "transact/transact.h"

#define HZ_NO_ROW UINT32_MAX

/* Row states (doc/cache-contract.md). FREE and REUSABLE rows are both spares; REUSABLE marks a row that
 * was published once, evicted, and has been released by every generation that mapped it. */
typedef enum hz_row_state {
    HZ_ROW_FREE = 0,       /* spare, never published since creation (or rolled back) */
    HZ_ROW_RESERVED,       /* taken by the running miss transaction, not yet written */
    HZ_ROW_IN_TRANSFER,    /* its H2D copy may be running; mapped by no generation */
    HZ_ROW_PUBLISHED,      /* mapped by the current generation */
    HZ_ROW_VICTIM_PENDING, /* unmapped by the current generation, still mapped by a live older one */
    HZ_ROW_REUSABLE,       /* every generation mapping it has retired; a spare again */
    HZ_ROW_STATE_COUNT
} hz_row_state;

const char *hz_row_state_name(int state);

typedef struct hz_row {
    uint8_t state;     /* hz_row_state */
    uint32_t layer;    /* what it holds (or is being loaded with); meaningful unless FREE */
    uint32_t expert;
    uint32_t gen_refs; /* live generations (current or not yet retired) that map this row */
} hz_row;

/* An immutable snapshot: map never changes after publication. A generation is live while it is current,
 * or while it has leases, or while the consumer event of its last released lease has not completed;
 * then it retires, dropping its gen_refs. */
typedef struct hz_gen {
    uint64_t id;
    uint32_t *map;      /* layers x experts -> row, HZ_NO_ROW when not resident */
    uint32_t *resident; /* per layer: experts mapped */
    uint32_t leases;
    hz_bevent *consumer;   /* re-recorded (compute queue) at every release that carries an event */
    int consumer_recorded;
    int current;
    struct hz_generation *lease_list; /* its live leases, for the self-deadlock check */
    struct hz_gen *next;   /* the list of older live generations */
} hz_gen;

/* The public hz_generation is a lease. */
struct hz_generation {
    hz_cache *cache;
    hz_gen *gen;
    uint32_t layer;
    pthread_t owner; /* the acquiring thread */
    struct hz_generation *prev, *next;
};

enum { HZ_CACHE_OK = 0, HZ_CACHE_FAULTED = 1 };

struct hz_cache {
    hz_host_backing *backing;
    hz_device *device;
    hz_backend *be;
    uint32_t layers, experts, capacity, spare_rows, top_k, nrows;
    uint64_t row_bytes;
    uint8_t *arena; /* nrows x row_bytes of device memory */
    hz_row *rows;
    hz_transactor *tx;
    const hz_evict_policy *policy;
    void *policy_state;

    pthread_mutex_t mu;      /* everything below, the rows and every generation's mutable fields */
    pthread_cond_t rows_cv;  /* signalled when a lease on an old generation ends */
    pthread_mutex_t txn_mu;  /* serializes miss transactions (every transport) */
    hz_gen *_Atomic current; /* swapped in one store under mu: the publication */
    hz_gen *old;             /* older live generations, newest first */
    uint64_t next_gen_id;
    uint32_t active_leases;
    _Atomic int models;
    _Atomic int state;
    char fault_msg[512];
    int in_txn; /* a miss transaction is between reservation and publication */

    /* counters (under mu) */
    uint64_t acquires, hits, misses, publications, evictions, retired_rows, rounds;
    uint64_t miss_txns, lat_sum_us, lat_max_us;
    uint64_t invariant_checks;
    uint64_t failed_txns;
    uint64_t initial_fill_bytes;
    /* scratch of the (serialized) miss transaction */
    uint8_t *scratch_mask;      /* experts */
    uint32_t *scratch_rows;     /* spare_rows */
    uint32_t *scratch_victims;  /* spare_rows */
    uint32_t *scratch_missing;  /* capacity */
    hz_txn_item *scratch_items; /* spare_rows */
};

/* Registry of live lease handles (registry.c). */
int hz_lease_registry_add(const void *lease);
int hz_lease_registry_take(const void *lease); /* 1 when it was live (and is now removed) */
int hz_lease_registry_contains(const void *lease);
void hz_lease_memory_retire(void *lease);

/* Row counts by state (under the cache lock). */
void hz_cache_row_counts(hz_cache *c, uint32_t counts[HZ_ROW_STATE_COUNT]);

/* Test support: the cache's transactor (for hz_transactor_inject). */
hz_transactor *hz_cache_transactor(hz_cache *c);

#ifdef HZ_INVARIANTS
/* Checks the invariants of doc/cache-contract.md; when `check_content`, also compares every row mapped
 * by a live generation with the backing (through D2H reads counted under HZ_PURPOSE_VERIFY). Takes the
 * transaction lock and the cache lock. HZ_OK, or HZ_ESTATE with the first violation in `why`. */
int hz_cache_check_invariants(hz_cache *c, int check_content, char *why, size_t why_len);
/* The same with both locks held by the caller; `rows_to_read` limits the content check to those rows
 * (NULL with check_content = all mapped rows). */
int hz_cache_check_invariants_locked(hz_cache *c, int check_content, const uint32_t *rows_to_read,
                                     uint32_t n_rows_to_read, char *why, size_t why_len);
#endif

#endif
