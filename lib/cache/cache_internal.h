/* lib/cache: the generation cache's internal structures, shared by cache.c, the invariant checker and
 * the tests. See doc/cache-contract.md for the row state machine and the rules these fields carry. */
#ifndef HZ_CACHE_INTERNAL_H
#define HZ_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

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
    HZ_ROW_PREFETCHED,     /* loaded by a prefetch (copies complete), mapped by no generation: published
                              when an acquire of its layer wants its expert, freed when dropped */
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

/* The speculative prefetch (prefetch.c; doc/cache-contract.md, "Prefetch"): one request slot, one
 * thread of the cache's own that loads requests into spare rows (never waiting for one), and one set of
 * loaded, unpublished rows ("ready") that the next acquire of their layer adopts where its group wants
 * them. Every field is guarded by the cache's mu. Once hz_prefetcher_init ran the condition variables
 * exist, whatever the mode. */
/* The prefetcher's counters (doc/cache-contract.md, "Stats"). */
typedef struct hz_prefetch_counts {
    uint64_t requests, dropped, skipped, rounds, experts, hits, wasted_rows, failures, publications;
    uint64_t cancelled; /* predicted experts a cancelled load never started */
    uint64_t gated;       /* predictions the gate declined (hz_cache_prefetch_admit returned 0) */
    uint64_t gate_closed; /* times the gate closed */
} hz_prefetch_counts;

/* The prefetcher's gate (prefetch.c, "the gate"): once `window` prefetched experts have been resolved
 * (used by an acquire, or given up), it closes when fewer than gate_pct of 100 were used, and then
 * declines the next predictions (`pause`, doubled for each further failed window in a row) before it
 * opens with a new window. */
typedef struct hz_prefetch_gate {
    uint32_t pct;               /* 0: never closes */
    uint32_t window, pause;     /* resolved experts per window; predictions declined by a first closure */
    uint32_t strikes;           /* windows below pct in a row: closure n declines pause << min(n - 1,
                                 * HZ_PREFETCH_GATE_MAX_SHIFT); a window at or above pct resets it */
    uint32_t win_hits, win_wasted;
    uint32_t left;              /* predictions still to decline (0: open) */
} hz_prefetch_gate;

/* The longest closure is pause << HZ_PREFETCH_GATE_MAX_SHIFT predictions. */
#define HZ_PREFETCH_GATE_MAX_SHIFT 6u

typedef struct hz_prefetcher {
    int mode;                /* hz_prefetch */
    int conds;               /* the condition variables are initialized (hz_prefetcher_init ran) */
    pthread_t thread;
    int started, stop;
    uint32_t sync;           /* HZ_PREFETCH_SYNC=1 (tests): hz_cache_prefetch returns once its request is done */
    pthread_cond_t work_cv;  /* the thread waits here for a request (or stop) */
    pthread_cond_t idle_cv;  /* broadcast when a request is done (and on FAULTED) */
    int queued;              /* a request waits: q_layer, q_ids[0..q_n) */
    uint32_t q_layer, q_n;
    uint32_t *q_ids;         /* [capacity] */
    int loading;             /* the thread runs a request of layer cur_layer (from taking it to done) */
    uint32_t cur_layer, cur_n;
    uint32_t *ids;           /* [capacity] the running request, the thread's own copy */
    _Atomic int cancel;      /* set by a miss that the running load does not serve: start no more items */
    uint32_t ready_layer, ready_n; /* rows loaded and not adopted: ready_rows[0..ready_n) hold */
    uint32_t *ready_rows;    /* [spare_rows] */
    uint32_t *ready_experts; /* [spare_rows] ready_experts[i] of ready_layer */
    hz_prefetch_counts n;
    hz_prefetch_gate gate;
    char last_error[576];    /* the last failure's message, "" when none */
} hz_prefetcher;

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
    int transport_auto; /* created with HZ_TRANSPORT_AUTO (stats: transport_requested) */

    pthread_mutex_t mu;      /* everything below, the rows and every generation's mutable fields */
    pthread_cond_t rows_cv;  /* signalled when a lease on an old generation ends */
    pthread_mutex_t txn_mu;  /* serializes miss transactions (every transport) */
    pthread_mutex_t run_mu;  /* hz_cache_run_lock: one partial-residency GPU forward at a time */
    hz_gen *_Atomic current; /* swapped in one store under mu: the publication */
    hz_gen *old;             /* older live generations, newest first */
    uint64_t next_gen_id;
    uint32_t active_leases;
    _Atomic int models;
    _Atomic int state;
    char fault_msg[512];
    int in_txn; /* a miss transaction is between reservation and publication */
    /* Threads waiting for the miss transaction that runs to end (blocked on txn_mu, or waiting for the
     * prefetch thread, which takes it): that transaction cannot count on their leases ending, since
     * they release nothing until it does (progress_possible). Nodes live on the waiters' stacks. */
    struct hz_txn_waiter *txn_waiters;

    /* counters (under mu) */
    uint64_t acquires, hits, misses, publications, evictions, retired_rows, rounds;
    uint64_t miss_txns, lat_sum_us, lat_max_us;
    uint64_t invariant_checks;
    uint64_t failed_txns;
    uint64_t initial_fill_bytes;
    /* the miss path: bytes of the rounds (demand and prefetch) that published, and their wall time
     * from the start of the round's copies to its publication */
    uint64_t miss_xfer_bytes, miss_xfer_ns;
    /* [spare_rows]: entry k - 1 counts those rounds that moved k blobs (a round moves at most
     * spare_rows), so that a report can weigh each round by the bound of its size */
    uint64_t *miss_round_hist;
    uint64_t published_at_ns; /* when the last publication swapped `current` (hz_now_ns) */
    hz_prefetcher pf;
    /* scratch of the (serialized) miss transaction */
    uint8_t *scratch_mask;      /* experts */
    uint32_t *scratch_rows;     /* spare_rows */
    uint32_t *scratch_victims;  /* spare_rows */
    uint32_t *scratch_missing;  /* capacity */
    hz_txn_item *scratch_items; /* spare_rows */
};

/* ---- cache.c calls the prefetcher makes (mu held unless said otherwise) ---- */

/* Monotonic nanoseconds (the miss path's clock). */
static inline uint64_t hz_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int hz_cache_is_faulted(const hz_cache *c) {
    return atomic_load_explicit(&c->state, memory_order_acquire) != HZ_CACHE_OK;
}
/* HZ_EFAULTED with the stored reason. */
int hz_cache_fault_status(const hz_cache *c);
/* Moves the cache to FAULTED (mu held). Returns HZ_EFAULTED with the reason as the message. */
int hz_cache_set_faulted(hz_cache *c, const char *fmt, ...) HZ_PRINTF(2, 3);
/* Retires every old generation that can go. HZ_OK or HZ_EFAULTED. */
int hz_cache_scan_old(hz_cache *c);
/* Free and reusable rows. */
uint32_t hz_cache_count_spares(const hz_cache *c);
/* Reserves k spare rows (there must be k) for experts[0..k) of `layer` into c->scratch_rows. */
void hz_cache_take_rows(hz_cache *c, uint32_t k, uint32_t layer, const uint32_t *experts);
/* The reserved scratch_rows[0..k) go IN_TRANSFER and scratch_items[0..k) name them as the transactor's
 * destinations for experts[0..k) of `layer`. */
void hz_cache_mark_in_transfer(hz_cache *c, uint32_t k, uint32_t layer, const uint32_t *experts);
/* Undoes a reservation of scratch_rows[0..k) whose transfers are known to be over. */
void hz_cache_unreserve_rows(hz_cache *c, uint32_t k);
/* Publishes a generation adding experts[0..k) of `layer` (in scratch_rows) and evicting LRU experts of
 * the layer outside group[0..n). HZ_OK, a failure before the swap (nothing changed), or HZ_EFAULTED. */
int hz_cache_publish(hz_cache *c, uint32_t layer, const uint32_t *experts, uint32_t k, const uint32_t *group,
                     uint32_t n);
/* HZ_OK, or HZ_ERANGE / HZ_EINVAL / HZ_ECAPACITY naming the bad input (no lock needed). */
int hz_cache_validate_group(const hz_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n);

/* ---- prefetch.c ---- */

/* Sets up the prefetcher (condition variables always; for a mode other than OFF also the request
 * buffers and the thread). Called once by hz_cache_create, before the cache is shared. */
int hz_prefetcher_init(hz_cache *c, int mode);
/* Stops the thread (a queued request is dropped, a running one finishes) and frees what init made.
 * Safe after a failed or partial init. No lock held by the caller. */
void hz_prefetcher_fini(hz_cache *c);
/* Whether the queued or running request of `layer` predicts an expert of group[0..n) that the current
 * generation lacks (then the acquire waits for it rather than loading the expert itself). mu held. */
int hz_prefetch_serves_locked(const hz_cache *c, uint32_t layer, const uint32_t *group, uint32_t n);
/* A miss the running load does not serve: the load starts no further item, so the miss waits only for
 * copies already started. mu held. */
void hz_prefetch_yield_locked(hz_cache *c);
/* An acquire of `layer` for group[0..n) in its miss transaction (txn_mu and mu held): publishes the
 * ready rows of that layer whose experts the group wants, as one generation (victims outside the
 * group), and counts them as prefetch hits; the others stay ready. A failed publication gives the
 * wanted rows up (HZ_EFAULTED or the failure). */
int hz_prefetch_adopt_locked(hz_cache *c, uint32_t layer, const uint32_t *group, uint32_t n);
/* Frees every ready row (counted as wasted): a newer prediction replaces them, or a miss needs the
 * rows. mu held. */
void hz_prefetch_drop_ready_locked(hz_cache *c);

/* A thread about to wait for the running miss transaction (see hz_cache.txn_waiters). mu held for both;
 * begin wakes a transaction waiting for rows, so that it looks at the waiter's leases again. */
typedef struct hz_txn_waiter {
    pthread_t thread;
    int miss; /* an acquire's miss, waiting for the transaction lock (the others: for the prefetch thread,
               * or an invariant check) */
    struct hz_txn_waiter *next;
} hz_txn_waiter;
void hz_cache_wait_begin_locked(hz_cache *c, hz_txn_waiter *w, int miss);
void hz_cache_wait_end_locked(hz_cache *c, hz_txn_waiter *w);
/* Whether a miss waits for the transaction lock: a prefetch request taken meanwhile starts cancelled,
 * so that the miss waits for no copy it would start. mu held. */
int hz_cache_miss_waiting_locked(const hz_cache *c);

/* Registry of live lease handles (registry.c). */
int hz_lease_registry_add(const void *lease);
int hz_lease_registry_take(const void *lease); /* 1 when it was live (and is now removed) */
int hz_lease_registry_contains(const void *lease);
void hz_lease_memory_retire(void *lease);

/* Counts a miss round (demand or prefetch) of k blobs that took ns from its first copy to its
 * publication (prefetch: to its rows being complete). mu held. */
void hz_cache_count_miss_round(hz_cache *c, uint32_t k, uint64_t ns);

/* Row counts by state (under the cache lock). */
void hz_cache_row_counts(hz_cache *c, uint32_t counts[HZ_ROW_STATE_COUNT]);

/* Test support: the cache's transactor (for hz_transactor_inject). */
hz_transactor *hz_cache_transactor(hz_cache *c);

#ifdef HZ_INVARIANTS
/* Checks the invariants of doc/cache-contract.md; when `check_content`, also compares every row mapped
 * by a live generation with the backing (through D2H reads counted under HZ_PURPOSE_VERIFY). Takes the
 * transaction lock and the cache lock. HZ_OK, HZ_ESTATE with the first violation in `why`, or HZ_ENOMEM
 * (its own scratch could not be allocated: nothing was checked). */
int hz_cache_check_invariants(hz_cache *c, int check_content, char *why, size_t why_len);
/* The same with both locks held by the caller; `rows_to_read` limits the content check to those rows
 * (NULL with check_content = all mapped rows). */
int hz_cache_check_invariants_locked(hz_cache *c, int check_content, const uint32_t *rows_to_read,
                                     uint32_t n_rows_to_read, char *why, size_t why_len);
#endif

#endif
