/* The generation cache (resident-qpacked-cache-v1, DESIGN.md 4.4; doc/cache-contract.md).
 *
 * Locking: `mu` guards the rows, the generations' mutable fields (leases, consumer event, the old list)
 * and the counters; `txn_mu` serializes miss transactions and is always taken before `mu`. An all-hit
 * acquire takes `mu` only. A miss transaction drops `mu` while its copies run, so hits on the current
 * generation continue; it publishes by swapping `current` under `mu`. Generations are immutable once
 * published; a lease pins the generation it was taken on. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backing/backing.h"
#include "cache/cache_internal.h"
#include "core/json.h"

const char *hz_row_state_name(int state) {
    switch (state) {
    case HZ_ROW_FREE: return "free";
    case HZ_ROW_RESERVED: return "reserved";
    case HZ_ROW_IN_TRANSFER: return "in_transfer";
    case HZ_ROW_PUBLISHED: return "published";
    case HZ_ROW_VICTIM_PENDING: return "victim_pending";
    case HZ_ROW_REUSABLE: return "reusable";
    case HZ_ROW_PREFETCHED: return "prefetched";
    default: return "invalid";
    }
}

HZ_EXPORT void hz_cache_options_init_sized(hz_cache_options *opts, size_t size) {
    hz_cache_options d;
    memset(&d, 0, sizeof d);
    d.eviction = HZ_EVICT_LRU;
    d.transport = HZ_TRANSPORT_SERIAL;
    d.prefetch = HZ_PREFETCH_OFF;
    hz_options_fill(opts, size, &d, sizeof d);
}

/* The compatibility entry point for programs built before hz_cache_options_init became a macro
 * (horizon.h; the parentheses keep the macro from applying): fills sizeof as this library knows it,
 * which is the size in those programs' headers (0.1.0). Should the struct grow, this must keep filling
 * the 0.1.0 size (doc/abi.md; tests/unit/core/test_options.c pins it). */
HZ_EXPORT void (hz_cache_options_init)(hz_cache_options *opts) {
    hz_cache_options_init_sized(opts, sizeof *opts);
}

/* The message is written once, before the state flips, and never again: readers that see FAULTED
 * (acquire load) read a stable string. */
int hz_cache_fault_status(const hz_cache *c) {
    return hz_error(HZ_EFAULTED, "cache is FAULTED: %s", c->fault_msg);
}

/* Moves the cache to FAULTED (mu held). Returns HZ_EFAULTED with the reason as the message. Wakes every
 * waiter (rows, prefetch) so that each sees the state. */
int hz_cache_set_faulted(hz_cache *c, const char *fmt, ...) {
    if (!hz_cache_is_faulted(c)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->fault_msg, sizeof c->fault_msg, fmt, ap);
        va_end(ap);
        atomic_store_explicit(&c->state, HZ_CACHE_FAULTED, memory_order_release);
        hz_log(HZ_LOG_ERROR, "cache FAULTED: %s", c->fault_msg);
    }
    pthread_cond_broadcast(&c->rows_cv);
    if (c->pf.conds) pthread_cond_broadcast(&c->pf.idle_cv);
    return hz_cache_fault_status(c);
}

/* ---- generations ---------------------------------------------------------------------------- */

static void gen_free(hz_cache *c, hz_gen *g) {
    if (!g) return;
    if (g->consumer) c->be->ops->event_destroy(c->be, g->consumer);
    free(g->map);
    free(g->resident);
    free(g);
}

static int gen_alloc(hz_cache *c, hz_gen **out) {
    *out = NULL;
    hz_gen *g = calloc(1, sizeof *g);
    if (!g) return hz_error(HZ_ENOMEM, "out of memory for a generation");
    g->map = malloc((size_t)c->layers * c->experts * sizeof *g->map);
    g->resident = calloc(c->layers, sizeof *g->resident);
    if (!g->map || !g->resident) {
        gen_free(c, g);
        return hz_error(HZ_ENOMEM, "out of memory for a generation map of %u x %u", c->layers, c->experts);
    }
    int st = c->be->ops->event_create(c->be, &g->consumer);
    if (st) {
        g->consumer = NULL;
        gen_free(c, g);
        return hz_error_prefix(st, "creating a generation's consumer event");
    }
    *out = g;
    return HZ_OK;
}

/* Retires `g` (not current, no leases) when its consumer event has completed: drops its row
 * references; victims nobody maps any more become reusable. Returns 1 retired (g freed, caller
 * unlinks first), 0 still pending, -1 the event reported an error (cache now FAULTED). mu held. */
static int gen_try_retire(hz_cache *c, hz_gen *g) {
    if (g->consumer_recorded) {
        int q = c->be->ops->event_query(c->be, g->consumer);
        if (q == HZ_EBUSY) return 0;
        if (q != HZ_OK) {
            /* The consumer's work failed: whether it still reads the rows is unknown, so they can never
             * be handed out again with certainty. */
            hz_cache_set_faulted(c, "the consumer event of generation %llu reported an error (%s): %s",
                                 (unsigned long long)g->id, hz_status_name(q), hz_last_error_message());
            return -1;
        }
    }
    size_t total = (size_t)c->layers * c->experts;
    for (size_t i = 0; i < total; i++) {
        uint32_t r = g->map[i];
        if (r == HZ_NO_ROW) continue;
        hz_row *row = &c->rows[r];
        if (row->gen_refs > 0) row->gen_refs--;
        if (row->gen_refs == 0 && row->state == HZ_ROW_VICTIM_PENDING) {
            row->state = HZ_ROW_REUSABLE;
            c->retired_rows++;
        }
    }
    gen_free(c, g);
    return 1;
}

static void old_unlink(hz_cache *c, hz_gen *g) {
    for (hz_gen **pp = &c->old; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            g->next = NULL;
            return;
        }
}

/* Retires every old generation that can go. HZ_OK or HZ_EFAULTED. mu held. */
int hz_cache_scan_old(hz_cache *c) {
    hz_gen **pp = &c->old;
    while (*pp) {
        hz_gen *g = *pp;
        if (g->leases == 0) {
            *pp = g->next;
            int r = gen_try_retire(c, g);
            if (r == 1) continue;
            /* still pending (or faulted): put it back where it was */
            g->next = *pp;
            *pp = g;
            if (r < 0) return HZ_EFAULTED;
        }
        pp = &g->next;
    }
    return HZ_OK;
}

/* ---- leases --------------------------------------------------------------------------------- */

static void lease_attach(hz_cache *c, hz_gen *g, hz_generation *l, uint32_t layer) {
    l->cache = c;
    l->gen = g;
    l->layer = layer;
    l->owner = pthread_self();
    l->prev = NULL;
    l->next = g->lease_list;
    if (g->lease_list) g->lease_list->prev = l;
    g->lease_list = l;
    g->leases++;
    c->active_leases++;
}

static void lease_detach(hz_cache *c, hz_generation *l) {
    hz_gen *g = l->gen;
    if (l->prev) l->prev->next = l->next;
    else g->lease_list = l->next;
    if (l->next) l->next->prev = l->prev;
    l->prev = l->next = NULL;
    g->leases--;
    c->active_leases--;
}

/* ---- creation and destruction ----------------------------------------------------------------- */

static void cache_free(hz_cache *c) {
    if (!c) return;
    /* A failed hz_cache_create frees through here: its message must survive the teardown's calls. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", hz_last_error_message());
    /* First the prefetch thread: a request it is running may still publish a generation. */
    hz_prefetcher_fini(c);
    hz_backend *be = c->be;
    hz_gen *cur = atomic_load(&c->current);
    if (be) {
        /* The device may still read rows for consumers and write rows for transfers: let both finish
         * before the arena goes. Errors are ignored here: there is nobody left to report them to. */
        be->ops->queue_sync(be, HZ_QUEUE_COPY);
        if (cur && cur->consumer_recorded) be->ops->event_wait(be, cur->consumer);
        for (hz_gen *g = c->old; g; g = g->next)
            if (g->consumer_recorded) be->ops->event_wait(be, g->consumer);
    }
    hz_transactor_destroy(c->tx);
    while (c->old) {
        hz_gen *g = c->old;
        c->old = g->next;
        gen_free(c, g);
    }
    gen_free(c, cur);
    if (c->arena) be->ops->mem_free(be, c->arena);
    if (c->policy && c->policy_state) c->policy->destroy(c->policy_state);
    free(c->rows);
    free(c->scratch_mask);
    free(c->scratch_rows);
    free(c->scratch_victims);
    free(c->scratch_missing);
    free(c->scratch_items);
    free(c->miss_round_hist);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->txn_mu);
    pthread_mutex_destroy(&c->run_mu);
    pthread_cond_destroy(&c->rows_cv);
    free(c);
    if (msg[0]) hz_error(HZ_OK, "%s", msg);
    else hz_error_clear();
}

static int validate_placement(const hz_cache_options *o, uint32_t layers, uint32_t experts, uint32_t cap) {
    uint64_t want = (uint64_t)layers * cap;
    if (o->initial_placement_count != want)
        return hz_error(HZ_EINVAL, "initial placement has %u ids, expected layers x capacity = %u x %u = %llu",
                        o->initial_placement_count, layers, cap, (unsigned long long)want);
    uint8_t *seen = calloc(experts, 1);
    if (!seen) return hz_error(HZ_ENOMEM, "out of memory checking the initial placement");
    int st = HZ_OK;
    for (uint32_t l = 0; l < layers && !st; l++) {
        memset(seen, 0, experts);
        for (uint32_t i = 0; i < cap; i++) {
            uint32_t e = o->initial_placement[(size_t)l * cap + i];
            if (e >= experts) {
                st = hz_error(HZ_ERANGE, "initial placement: layer %u slot %u names expert %u of %u", l, i, e, experts);
                break;
            }
            if (seen[e]) {
                st = hz_error(HZ_EINVAL, "initial placement: expert %u appears twice in layer %u", e, l);
                break;
            }
            seen[e] = 1;
        }
    }
    free(seen);
    return st;
}

/* The cache for options `o`, already merged with the defaults (hz_cache_create), with a concrete
 * transport. */
static int cache_create(hz_host_backing *backing, hz_device *device, const hz_cache_options *merged,
                        hz_cache **out) {
    const hz_cache_options o = *merged;
    const hz_model_config *cfg = hz_backing_config(backing);
    const hz_expert_layout *layout = hz_backing_expert_layout(backing);
    if (!cfg || !layout) return hz_error(HZ_EINVAL, "hz_cache_create: backing has no model config or expert layout");
    uint32_t L = cfg->layers, E = cfg->experts, K = cfg->top_k;
    uint64_t row_bytes = layout->blob_bytes;
    if (L == 0 || E == 0 || row_bytes == 0)
        return hz_error(HZ_EINVAL, "hz_cache_create: backing has %u layers, %u experts, %llu-byte blobs", L, E,
                        (unsigned long long)row_bytes);
    uint32_t cap = o.capacity ? o.capacity : E;
    if (cap > E)
        return hz_error(HZ_ECAPACITY, "capacity %u is above the %u experts per layer", cap, E);
    uint32_t spare = o.spare_rows ? o.spare_rows : (K ? K : 1);
    if (spare < K)
        return hz_error(HZ_ECAPACITY, "spare rows %u are fewer than the model's top-k %u (a decode group must fit)",
                        spare, K);
    if (o.eviction != HZ_EVICT_LRU)
        return hz_error(HZ_EUNSUPPORTED, "eviction policy %d is not supported (only HZ_EVICT_LRU)", (int)o.eviction);
    if (o.transport != HZ_TRANSPORT_SERIAL && o.transport != HZ_TRANSPORT_THREADED &&
        o.transport != HZ_TRANSPORT_REGISTERED)
        return hz_error(HZ_EUNSUPPORTED,
                        "transport %d is not supported (HZ_TRANSPORT_SERIAL, HZ_TRANSPORT_THREADED or "
                        "HZ_TRANSPORT_REGISTERED)", (int)o.transport);
    if (o.prefetch != HZ_PREFETCH_OFF && o.prefetch != HZ_PREFETCH_NEXT_LAYER)
        return hz_error(HZ_EUNSUPPORTED, "prefetch %d is not supported (HZ_PREFETCH_OFF or HZ_PREFETCH_NEXT_LAYER)",
                        (int)o.prefetch);
    hz_txn_config tc = {.transport = o.transport};
    if (o.transport != HZ_TRANSPORT_REGISTERED) {
        /* The registered transport copies straight from the backing: it has no staging to size. */
        uint64_t staging = o.staging_bytes;
        /* By default one slot per blob a round can copy (spare rows), 2 to 8: with two slots the
         * threads filled one blob at a time and its H2D waited for the loading thread between blobs
         * (OLMoE-1B-7B shape, c30, H200 host, 2026-11-29: miss path 13.8 -> 16.2 GB/s with 8 slots,
         * 19.0 with the copy threads' polling as well; doc/benchmarks.md, ninth round). */
        const uint64_t dslots = spare < 2u ? 2u : spare > 8u ? 8u : spare;
        if (staging == 0 && !hz_mul_ok(row_bytes, dslots, &staging))
            return hz_error(HZ_ECAPACITY, "staging for %llu %llu-byte blobs overflows", (unsigned long long)dslots,
                            (unsigned long long)row_bytes);
        if (staging < row_bytes)
            return hz_error(HZ_ECAPACITY, "staging of %llu bytes is smaller than one expert blob (%llu bytes)",
                            (unsigned long long)staging, (unsigned long long)row_bytes);
        /* More staging than this many blobs buys nothing for a round (at most spare_rows copies) beyond a
         * faster initial fill. */
        uint64_t slots64 = staging / row_bytes;
        tc.slots = slots64 > 64 ? 64u : (uint32_t)slots64;
        /* Streaming stores for the staging copies (transact.c, copy_streaming: the H2D of a blob written
         * through the cache ran at 20 GB/s, after streaming stores at 50). HZ_TXN_STREAM=0: memcpy, for
         * comparisons. */
        uint32_t stream = 1;
        hz_env_u32("HZ_TXN_STREAM", 0, 1, &stream);
        tc.streaming = (int)stream;
    }
    if (o.transport == HZ_TRANSPORT_THREADED) {
        if (o.staging_threads > 256)
            return hz_error(HZ_EINVAL, "staging_threads %u is above 256", o.staging_threads);
        tc.threads = o.staging_threads;
        /* Piecewise H2D (transact.h) by default, HZ_TXN_PIECEWISE=0 for whole-blob H2D: with the
         * copy threads' lock-free hand-over, two waves beat whole blobs in four rounds of four (OLMoE
         * c30 on the H200 host, miss path 61.0-62.6% of pinned H2D against 58.3-59.2%, decode 933-945
         * tok/s against 882-938; doc/benchmarks.md, fifteenth round). Before streaming stores and
         * that hand-over it had measured slower (seventh and ninth rounds). */
        const char *pw = getenv("HZ_TXN_PIECEWISE");
        tc.piecewise = !(pw && strcmp(pw, "0") == 0);
        hz_env_u32("HZ_TXN_WAVES", 1, 64, &tc.waves); /* piecewise: runs per blob (default 2) */
        /* The copy threads poll for 3 ms after their last piece, and the loading thread for its fills,
         * before sleeping. Waking a sleeping thread costs tens of microseconds on the GPU host (a
         * virtual machine), and the rounds of a decode with misses come a step or two apart (~1 ms):
         * with 200 us the first piece of a one-blob round started 24 us after the hand-out, with 3 ms
         * 8 us (OLMoE-1B-7B shape, c30, 2026-11-30; doc/benchmarks.md, fourteenth round). The price is
         * CPU time: while misses keep coming, the copy threads stay busy polling. HZ_TXN_SPIN_US
         * overrides it (0 = sleep at once). */
        tc.spin_us = 3000;
        hz_env_u32("HZ_TXN_SPIN_US", 0, 100000, &tc.spin_us);
        if (tc.threads == 0) {
            /* Three quarters of the online CPUs, at most 12: the rest stay for the thread that runs the
             * model and the CUDA runtime's own. On the 16-core GPU host 16 polling threads took the
             * CPUs those need (miss path 7.6 GB/s against 20.9 with 12); the copies themselves ran at
             * 72-78 GB/s with 12-13 threads (2026-11-30). */
            tc.threads = hz_txn_default_threads();
        }
    }
    if (o.initial_placement) {
        int st = validate_placement(&o, L, E, cap);
        if (st) return st;
    } else if (o.initial_placement_count) {
        return hz_error(HZ_EINVAL, "initial_placement_count %u without an initial_placement", o.initial_placement_count);
    }
    uint64_t nrows64 = (uint64_t)L * cap + spare, arena_bytes;
    if (nrows64 >= HZ_NO_ROW || !hz_mul_ok(nrows64, row_bytes, &arena_bytes))
        return hz_error(HZ_ECAPACITY, "%llu rows of %llu bytes overflow", (unsigned long long)nrows64,
                        (unsigned long long)row_bytes);

    hz_cache *c = calloc(1, sizeof *c);
    if (!c) return hz_error(HZ_ENOMEM, "out of memory for a cache");
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->txn_mu, NULL);
    pthread_mutex_init(&c->run_mu, NULL);
    pthread_cond_init(&c->rows_cv, NULL);
    atomic_init(&c->current, NULL);
    atomic_init(&c->models, 0);
    atomic_init(&c->state, HZ_CACHE_OK);
    c->backing = backing;
    c->device = device;
    c->be = device->be;
    c->layers = L;
    c->experts = E;
    c->capacity = cap;
    c->spare_rows = spare;
    c->top_k = K;
    c->nrows = (uint32_t)nrows64;
    c->row_bytes = row_bytes;
    c->policy = &hz_evict_lru;

    int st = HZ_OK;
    c->rows = calloc(c->nrows, sizeof *c->rows);
    c->scratch_mask = calloc(E, 1);
    c->scratch_rows = calloc(spare, sizeof(uint32_t));
    c->scratch_victims = calloc(spare, sizeof(uint32_t));
    c->scratch_missing = calloc(cap, sizeof(uint32_t));
    c->scratch_items = calloc(spare, sizeof(hz_txn_item));
    c->miss_round_hist = calloc(spare, sizeof(uint64_t));
    if (!c->rows || !c->scratch_mask || !c->scratch_rows || !c->scratch_victims || !c->scratch_missing ||
        !c->scratch_items || !c->miss_round_hist)
        st = hz_error(HZ_ENOMEM, "out of memory for %u row descriptors", c->nrows);
    if (!st) st = c->policy->create(L, E, &c->policy_state);
    if (!st) {
        st = c->be->ops->mem_alloc(c->be, arena_bytes, (void **)&c->arena);
        if (st) hz_error_prefix(st, "allocating the row arena (%u rows of %llu bytes)", c->nrows,
                                (unsigned long long)row_bytes);
    }
    if (!st) st = hz_transactor_create(c->be, backing, row_bytes, &tc, &c->tx);
    /* Its thread only waits for requests, which cannot come before this call returns. */
    if (!st) st = hz_prefetcher_init(c, o.prefetch);
    hz_gen *g = NULL;
    if (!st) st = gen_alloc(c, &g);
    hz_txn_item *items = NULL;
    if (!st) {
        items = calloc((size_t)L * cap, sizeof *items);
        if (!items) st = hz_error(HZ_ENOMEM, "out of memory for the initial placement");
    }
    if (st) {
        gen_free(c, g);
        cache_free(c);
        return st;
    }

    /* Generation 1: rows l*cap .. l*cap+cap-1 hold layer l's initial experts; the rest are spares. */
    for (size_t i = 0; i < (size_t)L * E; i++) g->map[i] = HZ_NO_ROW;
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t i = 0; i < cap; i++) {
            uint32_t r = l * cap + i;
            uint32_t e = o.initial_placement ? o.initial_placement[(size_t)l * cap + i] : i;
            c->rows[r] = (hz_row){.state = HZ_ROW_IN_TRANSFER, .layer = l, .expert = e};
            items[r] = (hz_txn_item){.layer = l, .expert = e, .dst = c->arena + (uint64_t)r * row_bytes};
        }
    hz_txn_result res;
    st = hz_transactor_load(c->tx, items, L * cap, &res);
    free(items);
    if (st) {
        hz_error_prefix(st, "loading the initial placement");
        gen_free(c, g);
        cache_free(c);
        return st;
    }
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t i = 0; i < cap; i++) {
            uint32_t r = l * cap + i;
            c->rows[r].state = HZ_ROW_PUBLISHED;
            c->rows[r].gen_refs = 1;
            g->map[(size_t)l * E + c->rows[r].expert] = r;
        }
    for (uint32_t l = 0; l < L; l++) g->resident[l] = cap;
    g->id = 1;
    g->current = 1;
    c->next_gen_id = 2;
    c->publications = 1;
    c->initial_fill_bytes = (uint64_t)L * cap * row_bytes;
    atomic_store_explicit(&c->current, g, memory_order_release);

#ifdef HZ_INVARIANTS
    {
        char why[256];
        pthread_mutex_lock(&c->txn_mu);
        pthread_mutex_lock(&c->mu);
        st = hz_cache_check_invariants_locked(c, 1, NULL, 0, why, sizeof why);
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_unlock(&c->txn_mu);
        if (st) {
            cache_free(c);
            if (st == HZ_ENOMEM) return hz_error(HZ_ENOMEM, "checking the initial placement: out of memory");
            return hz_error(HZ_ESTATE, "invariant violated after the initial placement: %s", why);
        }
    }
#endif
    hz_backing_child_add(backing);
    hz_device_child_add(device);
    *out = c;
    return HZ_OK;
}

/* Merges the caller's options with the defaults, then creates the cache. HZ_TRANSPORT_AUTO: registered
 * where experts will miss, threaded at full residency, and threaded when the registered cache cannot be
 * made for a reason of the host's (a device error or out of memory: registration pins the whole routed
 * region). */
int hz_cache_create(hz_host_backing *backing, hz_device *device, const hz_cache_options *opts, hz_cache **out) {
    if (out) *out = NULL;
    if (!backing || !device || !out) return hz_error(HZ_EINVAL, "hz_cache_create: backing, device and out must not be NULL");
    hz_cache_options o;
    hz_cache_options_init(&o);
    int st = hz_options_merge(&o, sizeof o, opts, 0, "hz_cache_create");
    if (st) return st;
    if (o.transport != HZ_TRANSPORT_AUTO) return cache_create(backing, device, &o, out);
    const hz_model_config *cfg = hz_backing_config(backing);
    const uint32_t experts = cfg ? cfg->experts : 0;
    o.transport = o.capacity != 0 && o.capacity < experts ? HZ_TRANSPORT_REGISTERED : HZ_TRANSPORT_THREADED;
    st = cache_create(backing, device, &o, out);
    if ((st == HZ_EDEVICE || st == HZ_ENOMEM) && o.transport == HZ_TRANSPORT_REGISTERED) {
        hz_log(HZ_LOG_INFO, "cache: transport auto: the registered transport failed (%s: %s); threaded instead",
               hz_status_name(st), hz_last_error_message());
        o.transport = HZ_TRANSPORT_THREADED;
        st = cache_create(backing, device, &o, out);
    }
    if (st == HZ_OK) (*out)->transport_auto = 1;
    return st;
}

int hz_cache_destroy(hz_cache *cache) {
    if (!cache) return HZ_OK;
    pthread_mutex_lock(&cache->mu);
    uint32_t leases = cache->active_leases;
    int models = atomic_load(&cache->models);
    pthread_mutex_unlock(&cache->mu);
    if (leases > 0) return hz_error(HZ_EBUSY, "hz_cache_destroy: %u lease(s) outstanding", leases);
    if (models > 0) return hz_error(HZ_EBUSY, "hz_cache_destroy: %d model(s) still use the cache", models);
    hz_host_backing *b = cache->backing;
    hz_device *d = cache->device;
    cache_free(cache);
    hz_backing_child_remove(b);
    hz_device_child_remove(d);
    return HZ_OK;
}

/* ---- acquire ---------------------------------------------------------------------------------- */

uint32_t hz_cache_count_spares(const hz_cache *c) {
    uint32_t n = 0;
    for (uint32_t r = 0; r < c->nrows; r++)
        if (c->rows[r].state == HZ_ROW_FREE || c->rows[r].state == HZ_ROW_REUSABLE) n++;
    return n;
}

void hz_cache_wait_begin_locked(hz_cache *c, hz_txn_waiter *w, int miss) {
    w->thread = pthread_self();
    w->miss = miss;
    w->next = c->txn_waiters;
    c->txn_waiters = w;
    pthread_cond_broadcast(&c->rows_cv);
}

void hz_cache_wait_end_locked(hz_cache *c, hz_txn_waiter *w) {
    for (hz_txn_waiter **p = &c->txn_waiters; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            return;
        }
}

int hz_cache_miss_waiting_locked(const hz_cache *c) {
    for (const hz_txn_waiter *w = c->txn_waiters; w; w = w->next)
        if (w->miss) return 1;
    return 0;
}

/* Whether a lease held by `owner` can end while this transaction waits: not when the owner is the
 * calling thread, nor when it is itself waiting for this transaction to end. mu held. */
static int lease_stuck(const hz_cache *c, pthread_t owner, pthread_t self, int *by_waiter) {
    if (pthread_equal(owner, self)) return 1;
    for (const hz_txn_waiter *w = c->txn_waiters; w; w = w->next)
        if (pthread_equal(owner, w->thread)) {
            *by_waiter = 1;
            return 1;
        }
    return 0;
}

/* Whether `k` spare rows can ever become available: spares now, plus victims not pinned by a
 * generation on which a stuck lease (lease_stuck) is held. (Other leases end eventually; consumer
 * events complete on their own.) *out_by_waiter: a waiting thread's lease was among the stuck. mu held. */
static int progress_possible(hz_cache *c, uint32_t k, uint32_t *out_blocked, int *out_by_waiter) {
    *out_by_waiter = 0;
    uint8_t *blocked = calloc(c->nrows, 1);
    if (!blocked) return 1; /* cannot tell: keep waiting rather than fail spuriously */
    pthread_t self = pthread_self();
    size_t total = (size_t)c->layers * c->experts;
    for (hz_gen *g = c->old; g; g = g->next) {
        int mine = 0;
        for (hz_generation *l = g->lease_list; l && !mine; l = l->next)
            mine = lease_stuck(c, l->owner, self, out_by_waiter);
        if (!mine) continue;
        for (size_t i = 0; i < total; i++)
            if (g->map[i] != HZ_NO_ROW) blocked[g->map[i]] = 1;
    }
    uint32_t potential = 0, nblocked = 0;
    for (uint32_t r = 0; r < c->nrows; r++) {
        int s = c->rows[r].state;
        if (s == HZ_ROW_FREE || s == HZ_ROW_REUSABLE) potential++;
        else if (s == HZ_ROW_VICTIM_PENDING) {
            if (blocked[r]) nblocked++;
            else potential++;
        }
    }
    free(blocked);
    *out_blocked = nblocked;
    return potential >= k;
}

/* Reserves k spare rows into c->scratch_rows, waiting while older generations still pin them. Rows a
 * prefetch loaded and nobody adopted are given up first: a speculation never makes a miss wait. mu held
 * (released while waiting). */
static int reserve_rows(hz_cache *c, uint32_t k, uint32_t layer, const uint32_t *experts) {
    for (;;) {
        if (hz_cache_is_faulted(c)) return hz_cache_fault_status(c);
        if (hz_cache_scan_old(c) != HZ_OK) return hz_cache_fault_status(c);
        if (hz_cache_count_spares(c) >= k) break;
        if (c->pf.ready_n) {
            hz_prefetch_drop_ready_locked(c);
            continue;
        }
        uint32_t blocked = 0;
        int by_waiter = 0;
        if (!progress_possible(c, k, &blocked, &by_waiter))
            return hz_error(HZ_ECAPACITY,
                            "no spare row can become free for %u miss(es) of layer %u: %u evicted row(s) are "
                            "pinned by leases %s; release them before acquiring",
                            k, layer, blocked,
                            by_waiter ? "held by threads that wait for this transaction to end (they acquire "
                                        "with misses while holding them), or by this thread"
                                      : "this thread still holds");
        /* Leases ending signal rows_cv; consumer events have no callback, so poll them every ms. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c->rows_cv, &c->mu, &ts);
    }
    hz_cache_take_rows(c, k, layer, experts);
    return HZ_OK;
}

void hz_cache_take_rows(hz_cache *c, uint32_t k, uint32_t layer, const uint32_t *experts) {
    uint32_t got = 0;
    for (uint32_t r = 0; r < c->nrows && got < k; r++) {
        hz_row *row = &c->rows[r];
        if (row->state != HZ_ROW_FREE && row->state != HZ_ROW_REUSABLE) continue;
        row->state = HZ_ROW_RESERVED;
        row->layer = layer;
        row->expert = experts[got];
        c->scratch_rows[got++] = r;
    }
}

void hz_cache_mark_in_transfer(hz_cache *c, uint32_t k, uint32_t layer, const uint32_t *experts) {
    for (uint32_t i = 0; i < k; i++) {
        c->rows[c->scratch_rows[i]].state = HZ_ROW_IN_TRANSFER;
        c->scratch_items[i] = (hz_txn_item){.layer = layer, .expert = experts[i],
                                            .dst = c->arena + (uint64_t)c->scratch_rows[i] * c->row_bytes};
    }
}

/* Undoes a reservation whose transfers are known to be over (mu held). */
void hz_cache_unreserve_rows(hz_cache *c, uint32_t k) {
    for (uint32_t i = 0; i < k; i++) {
        hz_row *row = &c->rows[c->scratch_rows[i]];
        row->state = HZ_ROW_FREE;
        row->layer = row->expert = 0;
    }
}

/* Publishes a generation that adds experts[0..k) of `layer` (now in rows scratch_rows[0..k)) to the
 * current one, evicting LRU experts of the layer outside the group `group[0..n)` as capacity requires.
 * Before the pointer swap every failure rolls back; after it only FAULTED remains. mu held. */
int hz_cache_publish(hz_cache *c, uint32_t layer, const uint32_t *experts, uint32_t k, const uint32_t *group,
                     uint32_t n) {
    hz_gen *cur = atomic_load_explicit(&c->current, memory_order_relaxed);
    hz_gen *g = NULL;
    int st = gen_alloc(c, &g);
    if (st) return st;
    size_t total = (size_t)c->layers * c->experts;
    memcpy(g->map, cur->map, total * sizeof *g->map);
    memcpy(g->resident, cur->resident, c->layers * sizeof *g->resident);
    uint32_t *lmap = g->map + (size_t)layer * c->experts;

    /* Victims: resident experts of the layer outside the requested group, in policy order. */
    uint8_t *cand = c->scratch_mask;
    for (uint32_t e = 0; e < c->experts; e++) cand[e] = lmap[e] != HZ_NO_ROW;
    for (uint32_t i = 0; i < n; i++) cand[group[i]] = 0;
    uint32_t need = g->resident[layer] + k > c->capacity ? g->resident[layer] + k - c->capacity : 0;
    for (uint32_t v = 0; v < need; v++) {
        uint32_t e = c->policy->victim(c->policy_state, layer, cand, c->experts);
        if (e == HZ_NO_EXPERT || e >= c->experts || !cand[e]) {
            gen_free(c, g);
            return hz_error(HZ_ESTATE, "eviction policy found no victim in layer %u (%u needed)", layer, need);
        }
        cand[e] = 0;
        c->scratch_victims[v] = e;
    }
    /* Commit: nothing below can fail before the swap. */
    for (uint32_t v = 0; v < need; v++) {
        uint32_t e = c->scratch_victims[v];
        c->rows[lmap[e]].state = HZ_ROW_VICTIM_PENDING;
        lmap[e] = HZ_NO_ROW;
    }
    g->resident[layer] -= need;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t r = c->scratch_rows[i];
        lmap[experts[i]] = r;
        c->rows[r].state = HZ_ROW_PUBLISHED;
    }
    g->resident[layer] += k;
    for (size_t i = 0; i < total; i++)
        if (g->map[i] != HZ_NO_ROW) c->rows[g->map[i]].gen_refs++;
    g->id = c->next_gen_id++;
    g->current = 1;
    cur->current = 0;
    cur->next = c->old;
    c->old = cur;
    /* The publication: one store; every acquire after it (under mu) sees the new generation. */
    atomic_store_explicit(&c->current, g, memory_order_release);
    c->published_at_ns = hz_now_ns(); /* the miss path's clock stops here, before any debug check */
    c->publications++;
    c->evictions += need;

    if (cur->leases == 0) {
        old_unlink(c, cur);
        int r = gen_try_retire(c, cur);
        if (r == 0) {
            cur->next = c->old;
            c->old = cur;
        } else if (r < 0) {
            cur->next = c->old;
            c->old = cur;
            return HZ_EFAULTED;
        }
    }
#ifdef HZ_INVARIANTS
    {
        char why[256];
        const int ist = hz_cache_check_invariants_locked(c, 1, c->scratch_rows, k, why, sizeof why);
        /* The checker's own scratch not allocated says nothing about the cache: the publication stands
         * unchecked (a debug build would otherwise turn one transient allocation failure into FAULTED). */
        if (ist == HZ_ENOMEM)
            hz_log(HZ_LOG_WARN, "cache: the invariant check after publishing generation %llu was skipped: out of "
                                "memory", (unsigned long long)g->id);
        else if (ist != HZ_OK)
            return hz_cache_set_faulted(c, "invariant violated after publishing generation %llu: %s",
                                        (unsigned long long)g->id, why);
    }
#endif
    return HZ_OK;
}

/* Under HZ_INVARIANTS an acquire checks that every row it hands out is published and holds the
 * expected expert: a reader never sees a row that is reserved or in transfer. mu held. */
static int check_handout(hz_cache *c, const hz_gen *g, uint32_t layer, const uint32_t *experts, uint32_t n) {
#ifdef HZ_INVARIANTS
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = g->map[(size_t)layer * c->experts + experts[i]];
        const hz_row *row = r < c->nrows ? &c->rows[r] : NULL;
        if (!row || row->state != HZ_ROW_PUBLISHED || row->layer != layer || row->expert != experts[i])
            return hz_cache_set_faulted(c,
                                        "invariant violated: acquire of layer %u expert %u in generation %llu "
                                        "would hand out row %u in state %s",
                                        layer, experts[i], (unsigned long long)g->id, r,
                                        row ? hz_row_state_name(row->state) : "out of range");
    }
#else
    (void)c; (void)g; (void)layer; (void)experts; (void)n;
#endif
    return HZ_OK;
}

int hz_cache_validate_group(const hz_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n) {
    if (layer >= c->layers) return hz_error(HZ_ERANGE, "layer %u out of range (%u routed layers)", layer, c->layers);
    if (n == 0) return hz_error(HZ_EINVAL, "empty expert group");
    for (uint32_t i = 0; i < n; i++)
        if (experts[i] >= c->experts)
            return hz_error(HZ_ERANGE, "expert %u out of range (%u experts per layer)", experts[i], c->experts);
    if (n > c->capacity)
        return hz_error(HZ_ECAPACITY, "group of %u experts is above the capacity of %u per layer", n, c->capacity);
    /* n <= capacity <= experts: a quadratic scan is cheaper than a mask for top-k sized groups. */
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = 0; j < i; j++)
            if (experts[i] == experts[j])
                return hz_error(HZ_EINVAL, "expert %u appears twice in the group (positions %u and %u)", experts[i], j, i);
    return HZ_OK;
}

/* A lease handle, in the registry before anything counts or pins for it: registering is the one step
 * that can fail (the registry grows), and nobody else knows the address yet, so a failure has nothing
 * to undo. */
static int new_lease(hz_generation **out) {
    *out = NULL;
    hz_generation *lease = calloc(1, sizeof *lease); /* zeroed: nothing reads garbage through it */
    if (!lease) return hz_error(HZ_ENOMEM, "out of memory for a lease");
    int st = hz_lease_registry_add(lease);
    if (st) {
        free(lease);
        return st;
    }
    *out = lease;
    return HZ_OK;
}

/* A new_lease handle that was never attached (the acquire failed). */
static void discard_lease(hz_generation *lease) {
    hz_lease_registry_take(lease);
    free(lease);
}

/* Leases generation g for the group: LRU touch, counters, the lease. Every expert of the group is a hit
 * but the `missed` this call loaded (experts adopted from a prefetch are hits, and prefetch hits). mu
 * held. */
static void lease_group(hz_cache *c, hz_gen *g, hz_generation *lease, uint32_t layer, const uint32_t *experts,
                        uint32_t n, uint32_t missed) {
    c->policy->touch(c->policy_state, layer, experts, n);
    c->acquires++;
    c->hits += n - missed;
    c->misses += missed;
    lease_attach(c, g, lease, layer);
}

/* Missing experts of the group in generation g, into `missing`; returns their count. mu held. */
static uint32_t find_missing(const hz_cache *c, const hz_gen *g, uint32_t layer, const uint32_t *experts,
                             uint32_t n, uint32_t *missing) {
    const uint32_t *lmap = g->map + (size_t)layer * c->experts;
    uint32_t nmiss = 0;
    for (uint32_t i = 0; i < n; i++)
        if (lmap[experts[i]] == HZ_NO_ROW) {
            if (missing) missing[nmiss] = experts[i];
            nmiss++;
        }
    return nmiss;
}

/* The fast path: with every expert resident in the current generation, the lease is taken under mu
 * with no transaction. When the group misses, a prefetch request of this layer that predicts a missing
 * expert is waited for first, so that what it loads counts as hits instead of being loaded twice; a
 * running prefetch that serves none of the misses is told to start no further copy. Returns 1 when the
 * lease was taken (or *st is a failure), 0 when the group needs a miss transaction. mu not held. */
static int acquire_fast(hz_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n, hz_generation *lease,
                        hz_txn_waiter *w, int *st) {
    *st = HZ_OK;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (hz_cache_is_faulted(c)) {
            *st = hz_cache_fault_status(c);
            break;
        }
        hz_gen *g = atomic_load_explicit(&c->current, memory_order_relaxed);
        if (find_missing(c, g, layer, experts, n, NULL) == 0) {
            *st = check_handout(c, g, layer, experts, n);
            if (!*st) lease_group(c, g, lease, layer, experts, n, 0);
            break;
        }
        if (!hz_prefetch_serves_locked(c, layer, experts, n)) {
            /* In the same critical section as the cancel: a request the prefetch thread takes from here
             * until this thread has the transaction lock starts cancelled too, and the transaction that
             * runs meanwhile does not wait for this thread's leases (txn_waiters). */
            hz_prefetch_yield_locked(c);
            hz_cache_wait_begin_locked(c, w, 1);
            pthread_mutex_unlock(&c->mu);
            return 0;
        }
        hz_cache_wait_begin_locked(c, w, 0); /* the prefetch thread's load is a transaction too */
        pthread_cond_wait(&c->pf.idle_cv, &c->mu);
        hz_cache_wait_end_locked(c, w);
    }
    pthread_mutex_unlock(&c->mu);
    return 1;
}

void hz_cache_count_miss_round(hz_cache *c, uint32_t k, uint64_t ns) {
    if (k == 0) return;
    c->miss_xfer_bytes += (uint64_t)k * c->row_bytes;
    c->miss_xfer_ns += ns;
    c->miss_round_hist[(k < c->spare_rows ? k : c->spare_rows) - 1]++;
}

/* One round of a miss transaction (txn_mu held, mu held on entry and on return, dropped while the
 * copies run): reserves k = min(nmiss, spare_rows) rows for missing[0..k), loads them, publishes.
 * On success *out_k is k. On failure the cache is as before (rows free again) or FAULTED. */
static int miss_round(hz_cache *c, uint32_t layer, const uint32_t *missing, uint32_t nmiss, const uint32_t *group,
                      uint32_t n, uint32_t *out_k) {
    *out_k = 0;
    uint64_t gen_id = atomic_load_explicit(&c->current, memory_order_relaxed)->id;
    uint32_t k = nmiss < c->spare_rows ? nmiss : c->spare_rows;
    int st = reserve_rows(c, k, layer, missing);
    if (st) return st;
    hz_cache_mark_in_transfer(c, k, layer, missing);
    c->in_txn = 1;
    pthread_mutex_unlock(&c->mu);

    /* The miss path's clock (miss_transfer_seconds) runs from the round's first copy to its publication. */
    uint64_t t0 = hz_now_ns();
    hz_txn_result res;
    st = hz_transactor_load(c->tx, c->scratch_items, k, &res);

    pthread_mutex_lock(&c->mu);
    c->in_txn = 0;
    if (st) {
        c->failed_txns++;
        if (!res.drained) {
            /* A copy may still write rows we can no longer account for. */
            char msg[512];
            snprintf(msg, sizeof msg, "%s", hz_last_error_message());
            return hz_cache_set_faulted(c, "miss transaction for layer %u: %s", layer, msg);
        }
        /* Nothing was published and no copy is still running: the rows are spares again and the
         * current generation never stopped being authoritative. */
        hz_cache_unreserve_rows(c, k);
        int mapped = st == HZ_EDEVICE || st == HZ_EIO || st == HZ_ENOMEM || st == HZ_ERANGE ? st : HZ_EDEVICE;
        return hz_error_prefix(mapped, "miss transaction for layer %u (%u expert(s)) failed before publication; "
                                       "generation %llu stays current",
                               layer, k, (unsigned long long)gen_id);
    }
    st = hz_cache_publish(c, layer, missing, k, group, n);
    if (st == HZ_EFAULTED) return hz_cache_fault_status(c);
    if (st) {
        /* gen_alloc or the policy failed before the swap: the copies are complete, so roll back. */
        c->failed_txns++;
        hz_cache_unreserve_rows(c, k);
        return st;
    }
    hz_cache_count_miss_round(c, k, c->published_at_ns - t0);
    c->rounds++;
    *out_k = k;
    return HZ_OK;
}

int hz_generation_acquire(hz_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n, hz_generation **out) {
    if (out) *out = NULL;
    if (!c || !experts || !out) return hz_error(HZ_EINVAL, "hz_generation_acquire: NULL argument");
    if (hz_cache_is_faulted(c)) return hz_cache_fault_status(c);
    int st = hz_cache_validate_group(c, layer, experts, n);
    if (st) return st;
    hz_generation *lease = NULL;
    st = new_lease(&lease);
    if (st) return st;

    hz_txn_waiter w;
    if (acquire_fast(c, layer, experts, n, lease, &w, &st)) {
        if (st) {
            discard_lease(lease);
            return st;
        }
        *out = lease;
        return HZ_OK;
    }

    /* Miss transaction, serialized. Each round loads up to spare_rows missing experts and publishes
     * one generation; the group's experts are never chosen as victims, so rounds only add to it.
     * acquire_fast registered this thread as a miss waiting for it (w) until it has the lock. */
    pthread_mutex_lock(&c->txn_mu);
    double t0 = hz_now_seconds();
    uint32_t missed = 0;
    pthread_mutex_lock(&c->mu);
    hz_cache_wait_end_locked(c, &w);
    for (;;) {
        if (hz_cache_is_faulted(c)) {
            st = hz_cache_fault_status(c);
            break;
        }
        /* Experts a prefetch loaded for this group become resident first, as hits. */
        st = hz_prefetch_adopt_locked(c, layer, experts, n);
        if (st) break;
        hz_gen *g = atomic_load_explicit(&c->current, memory_order_relaxed);
        uint32_t *missing = c->scratch_missing;
        uint32_t nmiss = find_missing(c, g, layer, experts, n, missing);
        if (nmiss == 0) {
            st = check_handout(c, g, layer, experts, n);
            if (!st) lease_group(c, g, lease, layer, experts, n, missed);
            break;
        }
        uint32_t k = 0;
        st = miss_round(c, layer, missing, nmiss, experts, n, &k);
        if (st) break;
        missed += k;
    }
    if (missed > 0) {
        uint64_t us = (uint64_t)((hz_now_seconds() - t0) * 1e6 + 0.5);
        c->miss_txns++;
        c->lat_sum_us += us;
        if (us > c->lat_max_us) c->lat_max_us = us;
    }
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->txn_mu);
    if (st) {
        discard_lease(lease);
        return st;
    }
    *out = lease;
    return HZ_OK;
}

/* ---- release and getters ---------------------------------------------------------------------- */

int hz_generation_release(hz_generation *lease, hz_event *consumer_done) {
    if (!lease) return hz_error(HZ_EINVAL, "hz_generation_release: NULL lease");
    /* Nothing reads through `lease` until the registry vouches for it. The event's device is checked
     * before the lease is taken out, so that a refused release leaves it live without re-adding it (which
     * could need the registry to grow). A release racing this one on the same handle is the caller's
     * double release: the memory it could free is quarantined (hz_lease_memory_retire), and only one
     * of the two takes it below. */
    if (!hz_lease_registry_contains(lease))
        return hz_error(HZ_EINVAL, "hz_generation_release: %p is not a live lease (already released, or not "
                                   "returned by hz_generation_acquire)", (void *)lease);
    hz_cache *c = lease->cache;
    if (consumer_done && consumer_done->device != c->device)
        return hz_error(HZ_EINVAL, "hz_generation_release: the consumer event belongs to device %s, the cache "
                                   "to device %s", hz_device_name(consumer_done->device), hz_device_name(c->device));
    if (!hz_lease_registry_take(lease))
        return hz_error(HZ_EINVAL, "hz_generation_release: %p is not a live lease (already released, or not "
                                   "returned by hz_generation_acquire)", (void *)lease);
    int st = HZ_OK;
    pthread_mutex_lock(&c->mu);
    hz_gen *g = lease->gen;
    if (!hz_cache_is_faulted(c) && consumer_done) {
        /* The generation keeps one event, re-recorded on the compute queue after this consumer's: the
         * queue is in order, so its newest record completes after every consumer released so far. */
        st = c->be->ops->queue_wait_event(c->be, HZ_QUEUE_COMPUTE, consumer_done->ev);
        if (!st) st = c->be->ops->event_record(c->be, g->consumer, HZ_QUEUE_COMPUTE);
        if (st) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", hz_last_error_message());
            st = hz_cache_set_faulted(c, "cannot track the consumer of generation %llu: %s",
                                      (unsigned long long)g->id, msg);
        } else {
            g->consumer_recorded = 1;
        }
    }
    lease_detach(c, lease);
    if (!hz_cache_is_faulted(c) && !g->current && g->leases == 0) {
        old_unlink(c, g);
        int r = gen_try_retire(c, g);
        if (r <= 0) {
            g->next = c->old;
            c->old = g;
        }
        if (r < 0) st = HZ_EFAULTED;
        pthread_cond_broadcast(&c->rows_cv);
    }
    if (hz_cache_is_faulted(c)) st = hz_cache_fault_status(c);
    pthread_mutex_unlock(&c->mu);
    hz_lease_memory_retire(lease);
    return st;
}

uint64_t hz_generation_id(const hz_generation *lease) { return lease ? lease->gen->id : 0; }

uint32_t hz_generation_layer(const hz_generation *lease) { return lease ? lease->layer : 0; }

int hz_generation_row(const hz_generation *lease, uint32_t expert, uint32_t *out_row, const void **out_address) {
    if (out_row) *out_row = 0;
    if (out_address) *out_address = NULL;
    if (!lease) return hz_error(HZ_EINVAL, "hz_generation_row: NULL lease");
    const hz_cache *c = lease->cache;
    if (hz_cache_is_faulted(c)) return hz_cache_fault_status(c);
    if (expert >= c->experts)
        return hz_error(HZ_ERANGE, "expert %u out of range (%u experts per layer)", expert, c->experts);
    /* The map is immutable and the lease keeps the generation alive: no lock needed. */
    uint32_t r = lease->gen->map[(size_t)lease->layer * c->experts + expert];
    if (r == HZ_NO_ROW)
        return hz_error(HZ_ERANGE, "expert %u of layer %u is not resident in generation %llu", expert,
                        lease->layer, (unsigned long long)lease->gen->id);
    if (out_row) *out_row = r;
    if (out_address) *out_address = c->arena + (uint64_t)r * c->row_bytes;
    return HZ_OK;
}

int hz_cache_hold(hz_cache *c, hz_generation **out) {
    if (out) *out = NULL;
    if (!c || !out) return hz_error(HZ_EINVAL, "hz_cache_hold: NULL argument");
    hz_generation *lease = NULL;
    int st = new_lease(&lease);
    if (st) return st;
    pthread_mutex_lock(&c->mu);
    st = hz_cache_is_faulted(c) ? hz_cache_fault_status(c) : HZ_OK;
    /* No LRU touch and no counters: nothing was looked up. */
    if (!st) lease_attach(c, atomic_load_explicit(&c->current, memory_order_relaxed), lease, 0);
    pthread_mutex_unlock(&c->mu);
    if (st) {
        discard_lease(lease);
        return st;
    }
    *out = lease;
    return HZ_OK;
}

int hz_generation_layer_rows(const hz_generation *lease, uint32_t layer, const void **rows) {
    if (!lease || !rows) return hz_error(HZ_EINVAL, "hz_generation_layer_rows: NULL argument");
    const hz_cache *c = lease->cache;
    if (layer >= c->layers) return hz_error(HZ_ERANGE, "layer %u out of range (%u layers)", layer, c->layers);
    /* The map is immutable and the lease keeps the generation alive: no lock needed. */
    const uint32_t *map = lease->gen->map + (size_t)layer * c->experts;
    for (uint32_t e = 0; e < c->experts; e++) rows[e] = map[e] == HZ_NO_ROW ? NULL : c->arena + (uint64_t)map[e] * c->row_bytes;
    return HZ_OK;
}

/* ---- module calls ---------------------------------------------------------------------------- */

int hz_cache_check_model_use(const hz_cache *cache, const hz_host_backing *backing, const hz_device *device) {
    if (!cache) return hz_error(HZ_EINVAL, "NULL cache");
    if (cache->backing != backing) return hz_error(HZ_EINVAL, "the cache was created on another host backing");
    if (cache->device != device) {
        const char *mine = hz_device_name(cache->device), *given = device ? hz_device_name(device) : "(null)";
        if (strcmp(mine, given) == 0) /* two opens of one name are two devices */
            return hz_error(HZ_EINVAL, "the cache was created on another handle of device %s (each "
                                       "hz_device_open returns a device of its own)", mine);
        return hz_error(HZ_EINVAL, "the cache was created on device %s, not %s", mine, given);
    }
    if (hz_cache_is_faulted(cache)) return hz_cache_fault_status(cache);
    return HZ_OK;
}

int hz_cache_group_limit(const hz_cache *cache, uint32_t *out) {
    if (!cache || !out) return hz_error(HZ_EINVAL, "hz_cache_group_limit: NULL argument");
    *out = cache->capacity;
    return HZ_OK;
}

void hz_cache_run_lock(hz_cache *cache) { pthread_mutex_lock(&cache->run_mu); }

void hz_cache_run_unlock(hz_cache *cache) { pthread_mutex_unlock(&cache->run_mu); }

const void *hz_cache_first_row(const hz_cache *cache) { return cache ? (const void *)cache->arena : NULL; }

void hz_cache_model_add(hz_cache *cache) { atomic_fetch_add(&cache->models, 1); }

void hz_cache_model_remove(hz_cache *cache) { atomic_fetch_sub(&cache->models, 1); }

void hz_cache_row_counts(hz_cache *c, uint32_t counts[HZ_ROW_STATE_COUNT]) {
    for (int s = 0; s < HZ_ROW_STATE_COUNT; s++) counts[s] = 0;
    for (uint32_t r = 0; r < c->nrows; r++)
        if (c->rows[r].state < HZ_ROW_STATE_COUNT) counts[c->rows[r].state]++;
}

hz_transactor *hz_cache_transactor(hz_cache *c) { return c ? c->tx : NULL; }

/* ---- observations ----------------------------------------------------------------------------- */

/* The miss path's figures (doc/cache-contract.md, "Stats"). */
static void add_miss_path(cJSON *j, uint64_t bytes, uint64_t ns, int *ok) {
    hz_json_num(j, "miss_transfer_bytes", (double)bytes, ok);
    hz_json_num(j, "miss_transfer_seconds", (double)ns * 1e-9, ok);
    if (ns > 0) hz_json_num(j, "miss_transfer_gbps", (double)bytes / (double)ns, ok);
    else hz_json_null(j, "miss_transfer_gbps", ok);
}

/* miss_round_blobs: [[blobs, rounds], ...] for every round size seen, smallest first. */
static void add_round_sizes(cJSON *j, const uint64_t *hist, uint32_t n, int *ok) {
    cJSON *a = hz_json_arr(j, "miss_round_blobs", ok);
    for (uint32_t k = 0; a && k < n; k++) {
        if (!hist[k]) continue;
        cJSON *pair = hz_json_push(a, cJSON_CreateArray(), ok);
        hz_json_push(pair, cJSON_CreateNumber((double)k + 1), ok);
        hz_json_push(pair, cJSON_CreateNumber((double)hist[k]), ok);
    }
}

static void add_prefetch(cJSON *j, int mode, const hz_prefetch_counts *n, const hz_prefetch_gate *gate,
                         uint32_t ready, int pending, const char *last_error, uint64_t row_bytes,
                         int *ok) {
    hz_json_str(j, "prefetch", mode == HZ_PREFETCH_NEXT_LAYER ? "next_layer" : "off", ok);
    hz_json_num(j, "prefetch_requests", (double)n->requests, ok);
    hz_json_num(j, "prefetch_dropped", (double)n->dropped, ok);
    hz_json_num(j, "prefetch_skipped", (double)n->skipped, ok);
    hz_json_num(j, "prefetch_rounds", (double)n->rounds, ok);
    hz_json_num(j, "prefetch_experts", (double)n->experts, ok);
    hz_json_num(j, "prefetch_bytes", (double)(n->experts * row_bytes), ok);
    hz_json_num(j, "prefetch_hits", (double)n->hits, ok);
    hz_json_num(j, "prefetch_wasted_bytes", (double)(n->wasted_rows * row_bytes), ok);
    hz_json_num(j, "prefetch_ready", ready, ok);
    hz_json_num(j, "prefetch_publications", (double)n->publications, ok);
    hz_json_num(j, "prefetch_cancelled", (double)n->cancelled, ok);
    hz_json_num(j, "prefetch_failures", (double)n->failures, ok);
    hz_json_num(j, "prefetch_pending", pending, ok);
    hz_json_num(j, "prefetch_gated", (double)n->gated, ok);
    hz_json_num(j, "prefetch_gate_closed", (double)n->gate_closed, ok);
    hz_json_num(j, "prefetch_gate_pct", gate->pct, ok);
    hz_json_str(j, "prefetch_gate", gate->left ? "closed" : "open", ok);
    hz_json_num(j, "prefetch_gate_strikes", gate->strikes, ok);
    if (last_error[0]) hz_json_str(j, "prefetch_last_error", last_error, ok);
    else hz_json_null(j, "prefetch_last_error", ok);
}

int hz_cache_stats_json(hz_cache *c, char **out) {
    if (out) *out = NULL;
    if (!c || !out) return hz_error(HZ_EINVAL, "hz_cache_stats_json: NULL argument");
    hz_txn_stats ts;
    hz_transactor_stats(c->tx, &ts);
    uint32_t counts[HZ_ROW_STATE_COUNT];
    uint64_t *round_hist = malloc(c->spare_rows * sizeof *round_hist); /* spare_rows is fixed at creation */
    if (!round_hist) return hz_error(HZ_ENOMEM, "out of memory building cache stats");
    pthread_mutex_lock(&c->mu);
    memcpy(round_hist, c->miss_round_hist, c->spare_rows * sizeof *round_hist);
    hz_gen *g = atomic_load_explicit(&c->current, memory_order_relaxed);
    uint64_t gen_id = g->id;
    uint32_t live = 1;
    for (hz_gen *o = c->old; o; o = o->next) live++;
    hz_cache_row_counts(c, counts);
    uint64_t acquires = c->acquires, hits = c->hits, misses = c->misses, pubs = c->publications;
    uint64_t evictions = c->evictions, retired = c->retired_rows, rounds = c->rounds, failed = c->failed_txns;
    uint64_t miss_txns = c->miss_txns, lat_sum = c->lat_sum_us, lat_max = c->lat_max_us;
    uint32_t leases = c->active_leases;
    uint64_t xfer_bytes = c->miss_xfer_bytes, xfer_ns = c->miss_xfer_ns;
    hz_prefetch_counts pf = c->pf.n;
    hz_prefetch_gate pf_gate = c->pf.gate;
    uint32_t pf_ready = c->pf.ready_n;
    int pf_pending = c->pf.queued || c->pf.loading;
    char pf_error[sizeof c->pf.last_error];
    snprintf(pf_error, sizeof pf_error, "%s", c->pf.last_error);
    int faulted = hz_cache_is_faulted(c);
    char fault_msg[sizeof c->fault_msg];
    snprintf(fault_msg, sizeof fault_msg, "%s", c->fault_msg);
    pthread_mutex_unlock(&c->mu);

    hz_backend *be = c->be;
    int ok = 1;
    cJSON *j = cJSON_CreateObject(); /* NULL: every add below fails, hz_json_finish reports it */
    hz_json_str(j, "contract", "resident-qpacked-cache-v1", &ok);
    hz_json_str(j, "state", faulted ? "FAULTED" : "OK", &ok);
    if (faulted) hz_json_str(j, "fault", fault_msg, &ok);
    hz_json_num(j, "generation", (double)gen_id, &ok);
    hz_json_str(j, "device", be->name, &ok);
    hz_json_str(j, "eviction", c->policy->name, &ok);
    hz_json_str(j, "transport", hz_txn_transport_name(ts.transport), &ok);
    hz_json_str(j, "transport_requested", c->transport_auto ? "auto" : hz_txn_transport_name(ts.transport), &ok);
    hz_json_num(j, "layers", c->layers, &ok);
    hz_json_num(j, "experts", c->experts, &ok);
    hz_json_num(j, "capacity", c->capacity, &ok);
    hz_json_num(j, "spare_rows", c->spare_rows, &ok);
    hz_json_num(j, "row_bytes", (double)c->row_bytes, &ok);
    hz_json_num(j, "acquires", (double)acquires, &ok);
    hz_json_num(j, "hits", (double)hits, &ok);
    hz_json_num(j, "misses", (double)misses, &ok);
    hz_json_num(j, "h2d_bytes", (double)ts.h2d_bytes, &ok);
    hz_json_num(j, "h2d_copies", (double)ts.h2d_copies, &ok);
    hz_json_num(j, "initial_fill_bytes", (double)c->initial_fill_bytes, &ok);
    hz_json_num(j, "expert_d2h_bytes", (double)atomic_load(&be->bytes[HZ_D2H][HZ_PURPOSE_EXPERT]), &ok);
    hz_json_num(j, "verify_d2h_bytes", (double)atomic_load(&be->bytes[HZ_D2H][HZ_PURPOSE_VERIFY]), &ok);
    hz_json_num(j, "backing_writes", 0, &ok);
    hz_json_num(j, "request_source_reads", 0, &ok);
    hz_json_num(j, "request_hashing", 0, &ok);
    hz_json_num(j, "publications", (double)pubs, &ok);
    hz_json_num(j, "rounds", (double)rounds, &ok);
    hz_json_num(j, "failed_transactions", (double)failed, &ok);
    hz_json_num(j, "evictions", (double)evictions, &ok);
    hz_json_num(j, "retired_rows", (double)retired, &ok);
    hz_json_num(j, "staging_bytes", (double)ts.staging_bytes, &ok);
    hz_json_num(j, "staging_slots", ts.slots, &ok);
    hz_json_num(j, "staging_slots_busy", ts.slots_busy, &ok);
    hz_json_num(j, "staging_high_water", (double)ts.staging_high_water, &ok);
    hz_json_num(j, "staging_threads", ts.threads, &ok);
    hz_json_bool(j, "staging_piecewise", ts.piecewise, &ok);
    hz_json_bool(j, "staging_streaming", ts.streaming, &ok);
    hz_json_num(j, "staging_copies", (double)ts.staging_copies, &ok);
    hz_json_num(j, "staging_chunks", (double)ts.staging_chunks, &ok);
    hz_json_num(j, "staging_copy_bytes", (double)ts.staging_copy_bytes, &ok);
    hz_json_num(j, "staging_copy_seconds", (double)ts.staging_copy_ns * 1e-9, &ok);
    if (ts.staging_copy_ns > 0) {
        hz_json_num(j, "staging_gbps", (double)ts.staging_copy_bytes / (double)ts.staging_copy_ns, &ok);
        hz_json_num(j, "staging_gbps_per_thread",
                    ts.staging_thread_ns ? (double)ts.staging_copy_bytes / (double)ts.staging_thread_ns : 0.0,
                    &ok);
    } else {
        hz_json_null(j, "staging_gbps", &ok);
        hz_json_null(j, "staging_gbps_per_thread", &ok);
    }
    hz_json_num(j, "staging_fill_wait_seconds", (double)ts.fill_wait_ns * 1e-9, &ok);
    hz_json_num(j, "staging_fill_span_seconds", (double)ts.fill_span_ns * 1e-9, &ok);
    hz_json_num(j, "staging_fill_lag_seconds", (double)ts.fill_lag_ns * 1e-9, &ok);
    hz_json_num(j, "registered_bytes", (double)ts.registered_bytes, &ok);
    add_miss_path(j, xfer_bytes, xfer_ns, &ok);
    add_round_sizes(j, round_hist, c->spare_rows, &ok);
    free(round_hist);
    add_prefetch(j, c->pf.mode, &pf, &pf_gate, pf_ready, pf_pending, pf_error, c->row_bytes, &ok);
    cJSON *lat = hz_json_obj(j, "miss_latency_us", &ok);
    hz_json_num(lat, "count", (double)miss_txns, &ok);
    if (miss_txns) {
        hz_json_num(lat, "mean", (double)lat_sum / (double)miss_txns, &ok);
        hz_json_num(lat, "max", (double)lat_max, &ok);
    } else {
        hz_json_null(lat, "mean", &ok);
        hz_json_null(lat, "max", &ok);
    }
    hz_json_num(j, "leases_active", leases, &ok);
    hz_json_num(j, "generations_live", live, &ok);
    cJSON *rows = hz_json_obj(j, "rows", &ok);
    for (int s = 0; s < HZ_ROW_STATE_COUNT; s++) hz_json_num(rows, hz_row_state_name(s), counts[s], &ok);
#ifdef HZ_INVARIANTS
    hz_json_bool(j, "invariant_checker", 1, &ok);
#else
    hz_json_bool(j, "invariant_checker", 0, &ok);
#endif
    cJSON *notes = hz_json_obj(j, "notes", &ok);
    hz_json_str(notes, "backing_writes",
                "structural zero, not a counter: the backing's routed region is mprotect'ed read-only, "
                "so a write would fault instead of passing, and eviction never copies back", &ok);
    hz_json_str(notes, "request_source_reads",
                "structural zero: the cache copies experts only from the in-memory backing and holds "
                "no file handle", &ok);
    hz_json_str(notes, "request_hashing", "structural zero: the request path computes no hash", &ok);
    hz_json_str(notes, "expert_d2h_bytes",
                "observed: the device's D2H byte counter for purpose 'expert' (device-wide)", &ok);
    hz_json_str(notes, "verify_d2h_bytes",
                "invariant-checker row reads, counted under purpose 'verify', apart from expert D2H", &ok);
    hz_json_str(notes, "h2d_bytes", "this cache's expert H2D copies, including the initial fill", &ok);
    hz_json_str(notes, "hits_misses", "per expert of each successful acquire", &ok);
    hz_json_str(notes, "transport",
                ts.transport == HZ_TXN_REGISTERED
                    ? "registered: the backing's routed region is registered for direct DMA; H2D "
                      "copies read it, no staging copy is made (staging figures stay 0)"
                    : ts.transport == HZ_TXN_THREADED
                          ? (ts.piecewise ? "threaded, piecewise (the default): backing -> pinned "
                                            "staging copies run on staging_threads threads in waves of "
                                            "one piece per thread, and each blob goes to the device in "
                                            "order, a run of landed pieces at a time once the run holds "
                                            "a wave's share (HZ_TXN_WAVES, default 2)"
                                          : "threaded, whole blobs (HZ_TXN_PIECEWISE=0): backing -> "
                                            "pinned staging copies run on staging_threads threads, "
                                            "blobs split in staging_chunks pieces, one H2D per blob")
                          : "serial: the acquiring thread copies backing -> pinned staging", &ok);
    hz_json_str(notes, "staging_streaming",
                "the backing -> staging copies write with streaming (non-temporal) stores, which "
                "leave no dirty line in CPU caches for the H2D to fetch (x86-64; HZ_TXN_STREAM=0 "
                "turns them off); false: memcpy, or no staging", &ok);
    hz_json_str(notes, "staging_gbps",
                "staging_copy_bytes over staging_copy_seconds, the wall time during which at least "
                "one staging copy ran (per thread: over the copies' summed durations); null without "
                "a staging copy", &ok);
    hz_json_str(notes, "staging_fill",
                "threaded, summed over the blobs staged (staging_copies): staging_fill_wait_seconds from "
                "a blob's hand-out to the copy threads to its first piece's start, "
                "staging_fill_span_seconds from there to its last piece's end, "
                "staging_fill_lag_seconds from there to its H2D (piecewise: its last run) being "
                "enqueued; 0 for the other transports", &ok);
    hz_json_str(notes, "miss_transfer",
                "miss_transfer_bytes: bytes of every successful miss round (demand rounds and prefetch "
                "loads; not the initial fill, not failed rounds); miss_transfer_seconds: the sum over "
                "those rounds of the wall time from the round's first staging or DMA copy to its "
                "publication (the pointer swap, before any debug check; a prefetch load: to its "
                "copies' completion, its publication waits for the acquire); waiting for spare rows "
                "excluded; miss_transfer_gbps: their ratio, null without a round; miss_round_blobs: "
                "[[blobs, rounds], ...], how many of those rounds moved each number of blobs (at most "
                "spare_rows)", &ok);
    hz_json_str(notes, "prefetch",
                "prefetched experts are loaded into unpublished rows and published only when an "
                "acquire of their layer wants them: prefetch_hits counts those (also counted in hits), "
                "prefetch_wasted_bytes the rows given up unused (replaced by a newer prediction or "
                "needed by a miss), prefetch_ready the rows loaded and still waiting; "
                "prefetch_experts = prefetch_hits + wasted rows + prefetch_ready; the gate: once 64 "
                "prefetched experts are resolved (used or given up), it closes when fewer than "
                "prefetch_gate_pct of 100 were used (0: never) and declines the next predictions "
                "(prefetch_gated, also counted in prefetch_requests; prefetch_gate_closed: closures): 16 "
                "per layer after one failed window, twice as many after each further one in a row "
                "(prefetch_gate_strikes), at most 64 times as many; a window that passes resets it", &ok);
    hz_json_str(notes, "miss_latency_us",
                "per acquire that loaded experts: from taking the transaction lock to the last "
                "publication (includes waiting for spare rows)", &ok);
    /* a malloc'd string: callers free with hz_free (free) */
    *out = hz_json_finish(j, ok, 0);
    return *out ? HZ_OK : hz_error(HZ_ENOMEM, "hz_cache_stats_json: out of memory");
}
