/* Speculative prefetch (HZ_PREFETCH_NEXT_LAYER) and the miss-path counters, on every transport: a
 * prefetch followed by the acquire of its layer gives prefetch hits, the same rows and the same
 * residency as without it; wrong predictions count wasted bytes and evict nothing; capacity and lease
 * rules hold while a prefetch is pending or ready; a cache can be destroyed with one pending; injected
 * faults in a prefetch's copies are recovered (or FAULT the cache when they cannot be); threads mixing
 * prefetches and acquires keep the invariants. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cache_test_util.h"

typedef struct fixture {
    hz_host_backing *b;
    hz_backend *fb; /* the fault wrapper */
    hz_backend *cpu; /* the cpu backend under it */
    hz_device *d;
    hz_cache *c;
    uint64_t hash0, row_bytes;
    int transport;
} fixture;

/* 3 layers, 16 experts, top-4; capacity 4, 4 spare rows, prefetch on, on a fault-injecting cpu device. */
static void open_cache(fixture *f, int transport, int prefetch) {
    f->transport = transport;
    f->b = tu_backing(3, 16, 4, 31);
    f->hash0 = tu_routed_hash(f->b);
    f->row_bytes = tu_row_bytes(f->b);
    f->d = tu_fault_device(&f->fb);
    f->cpu = hz_backend_fault_inner(f->fb);
    hz_cache_options o;
    tu_options(&o, transport);
    o.capacity = 4;
    o.prefetch = prefetch;
    o.staging_bytes = 2 * f->row_bytes; /* two slots: a cancelled load has items it never started */
    assert_int_equal(hz_cache_create(f->b, f->d, &o, &f->c), HZ_OK);
    tu_after_create(f->c);
}

static void close_cache(fixture *f) { tu_close(f->c, f->d, f->b, f->hash0); }

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    open_cache(f, *(const int *)*state, HZ_PREFETCH_NEXT_LAYER);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    close_cache(f);
    free(f);
    return 0;
}

/* The prefetch accounting closes: every prefetched expert is a hit, wasted, or still ready; every
 * publication is the initial one, a miss round's or an adoption of prefetched rows. Then the cache's
 * invariants hold. */
static void check_accounting(fixture *f) {
    hz_cache *c = f->c;
    double experts = tu_stat(c, "prefetch_experts"), hits = tu_stat(c, "prefetch_hits");
    double wasted = tu_stat(c, "prefetch_wasted_bytes") / (double)f->row_bytes, ready = tu_stat(c, "prefetch_ready");
    assert_true(experts == hits + wasted + ready);
    assert_true(tu_stat(c, "rows.prefetched") == ready);
    assert_true(tu_stat(c, "prefetch_bytes") == experts * (double)f->row_bytes);
    assert_true(tu_stat(c, "publications") == 1 + tu_stat(c, "rounds") + tu_stat(c, "prefetch_publications"));
    tu_check_invariants(c);
}

/* Polls until the prefetch thread has taken the request and its rows are in transfer (the tests slow
 * the copies down so that this state lasts). */
static void wait_loading(hz_cache *c) {
    for (int i = 0; i < 20000; i++) {
        pthread_mutex_lock(&c->mu);
        int running = c->pf.loading && !c->pf.queued && c->in_txn;
        pthread_mutex_unlock(&c->mu);
        if (running) return;
        usleep(100);
    }
    fail_msg("the prefetch thread never took the request");
}

static void test_prefetch_then_acquire_hits(void **state) {
    fixture *f = *state;
    const uint32_t p[4] = {8, 9, 10, 11};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    /* no wait here: the acquire of the layer waits for the pending prefetch by itself */
    assert_int_equal(tu_acquire_check_release(f->c, f->b, 1, p, 4), 2);
    assert_int_equal(tu_stat(f->c, "misses"), 0);
    assert_int_equal(tu_stat(f->c, "hits"), 4);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 4);
    assert_int_equal(tu_stat(f->c, "prefetch_requests"), 1);
    assert_int_equal(tu_stat(f->c, "prefetch_rounds"), 1);
    assert_int_equal(tu_stat(f->c, "prefetch_experts"), 4);
    assert_int_equal(tu_stat(f->c, "prefetch_bytes"), 4 * f->row_bytes);
    assert_int_equal(tu_stat(f->c, "prefetch_wasted_bytes"), 0);
    assert_int_equal(tu_stat(f->c, "prefetch_ready"), 0);
    assert_int_equal(tu_stat(f->c, "prefetch_pending"), 0);
    assert_int_equal(tu_stat(f->c, "prefetch_publications"), 1);
    assert_int_equal(tu_stat(f->c, "rounds"), 0);
    assert_int_equal(tu_stat(f->c, "h2d_copies"), 12 + 4);
    assert_int_equal(tu_stat(f->c, "miss_transfer_bytes"), 4 * f->row_bytes);
    assert_true(tu_stat(f->c, "miss_transfer_seconds") > 0);
    assert_int_equal(tu_stat(f->c, "expert_d2h_bytes"), 0);
    /* a second acquire is an ordinary hit: the prefetch hit was counted once */
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, p, 4, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "hits"), 8);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 4);
    check_accounting(f);
}

static void test_wrong_prediction_wasted(void **state) {
    fixture *f = *state;
    const uint32_t p[4] = {8, 9, 10, 11}, g[4] = {12, 13, 14, 15};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    /* loaded, complete, and published by nobody: generation 1 still maps layer 1's experts 0..3 */
    assert_int_equal(tu_stat(f->c, "prefetch_ready"), 4);
    assert_int_equal(tu_stat(f->c, "rows.prefetched"), 4);
    assert_int_equal(tu_stat(f->c, "generation"), 1);
    tu_check_invariants(f->c); /* reads the prefetched rows back too */
    /* the prediction was wrong: the real group misses, its round needs the rows, the prediction gives
     * them up; nothing it loaded ever became resident */
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, g, 4, &l), HZ_OK);
    tu_check_rows(f->b, l, g, 4);
    uint32_t row;
    const void *addr;
    for (int i = 0; i < 4; i++) assert_int_equal(hz_generation_row(l, p[i], &row, &addr), HZ_ERANGE);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "misses"), 4);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 0);
    assert_int_equal(tu_stat(f->c, "prefetch_wasted_bytes"), 4 * f->row_bytes);
    assert_int_equal(tu_stat(f->c, "prefetch_ready"), 0);
    assert_int_equal(tu_stat(f->c, "prefetch_publications"), 0);
    assert_int_equal(tu_stat(f->c, "generation"), 2);
    assert_int_equal(tu_stat(f->c, "evictions"), 4);
    assert_int_equal(tu_stat(f->c, "miss_transfer_bytes"), 8 * f->row_bytes);
    char sizes[64];
    tu_round_sizes(f->c, sizes, sizeof sizes); /* the prefetch load and the demand round, four blobs each */
    assert_string_equal(sizes, "4:2");
    check_accounting(f);
}

static void test_partial_prediction(void **state) {
    fixture *f = *state;
    const uint32_t p[4] = {4, 5, 6, 7}, g[4] = {4, 5, 12, 13};
    assert_int_equal(hz_cache_prefetch(f->c, 2, p, 4), HZ_OK);
    tu_acquire_check_release(f->c, f->b, 2, g, 4);
    /* 4 and 5 were predicted (adopted: prefetch hits), 12 and 13 missed; 6 and 7 stay ready (a later
     * group of the layer may want them) until a miss needs their rows */
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 2);
    assert_int_equal(tu_stat(f->c, "hits"), 2);
    assert_int_equal(tu_stat(f->c, "misses"), 2);
    assert_int_equal(tu_stat(f->c, "prefetch_ready") + tu_stat(f->c, "prefetch_wasted_bytes") / f->row_bytes, 2);
    /* a prediction whose experts are all resident or ready needs no work at all */
    const uint32_t resident[2] = {4, 12};
    assert_int_equal(hz_cache_prefetch(f->c, 2, resident, 2), HZ_OK);
    assert_int_equal(tu_stat(f->c, "prefetch_skipped"), 1);
    assert_int_equal(tu_stat(f->c, "prefetch_rounds"), 1);
    /* resident predicted experts cost nothing and stay; 14 is loaded and adopted by the acquire */
    const uint32_t mixed[4] = {4, 5, 12, 14};
    assert_int_equal(hz_cache_prefetch(f->c, 2, mixed, 4), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    assert_int_equal(tu_stat(f->c, "prefetch_rounds"), 2);
    tu_acquire_check_release(f->c, f->b, 2, mixed, 4);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 3);
    assert_int_equal(tu_stat(f->c, "misses"), 2);
    assert_int_equal(tu_stat(f->c, "hits"), 6);
    check_accounting(f);
}

static void random_group(uint64_t *rng, uint32_t *g, uint32_t n, uint32_t experts) {
    for (uint32_t k = 0; k < n;) {
        uint32_t e = (uint32_t)(tu_rng_next(rng) % experts);
        int dup = 0;
        for (uint32_t i = 0; i < k; i++) dup |= g[i] == e;
        if (!dup) g[k++] = e;
    }
}

/* The same acquires on a cache with prefetch (a random prediction, right or wrong, before each one)
 * and on one without: every lease hands out rows with the backing's bytes, each acquire's rows are
 * byte-identical between the two, and so is residency: an expert the prefetch loaded counts as a
 * prefetch hit where the other cache has a miss, and nothing else differs (same evictions). */
static void test_same_rows_as_without_prefetch(void **state) {
    fixture *f = *state;
    fixture off = {0};
    open_cache(&off, f->transport, HZ_PREFETCH_OFF);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 200), HZ_OK);
    uint64_t rng = 99;
    for (int it = 0; it < 60; it++) {
        uint32_t layer = (uint32_t)(tu_rng_next(&rng) % 3), g[4], p[4];
        random_group(&rng, g, 4, 16);
        random_group(&rng, p, 4, 16);
        assert_int_equal(hz_cache_prefetch(f->c, layer, p, 4), HZ_OK);
        if (it % 3 == 0) hz_cache_prefetch_wait(f->c);
        hz_generation *a = NULL, *b = NULL;
        assert_int_equal(hz_generation_acquire(f->c, layer, g, 4, &a), HZ_OK);
        assert_int_equal(hz_generation_acquire(off.c, layer, g, 4, &b), HZ_OK);
        for (int i = 0; i < 4; i++) {
            const void *ra = NULL, *rb = NULL;
            uint32_t row;
            assert_int_equal(hz_generation_row(a, g[i], &row, &ra), HZ_OK);
            assert_int_equal(hz_generation_row(b, g[i], &row, &rb), HZ_OK);
            assert_memory_equal(ra, rb, (size_t)f->row_bytes);
        }
        tu_check_rows(f->b, a, g, 4);
        assert_int_equal(hz_generation_release(a, NULL), HZ_OK);
        assert_int_equal(hz_generation_release(b, NULL), HZ_OK);
        /* the same experts of every layer are resident in both */
        for (uint32_t ly = 0; ly < 3; ly++)
            for (uint32_t e = 0; e < 16; e++) {
                int in_a = 0, in_b = 0;
                pthread_mutex_lock(&f->c->mu);
                in_a = atomic_load(&f->c->current)->map[ly * 16 + e] != HZ_NO_ROW;
                pthread_mutex_unlock(&f->c->mu);
                pthread_mutex_lock(&off.c->mu);
                in_b = atomic_load(&off.c->current)->map[ly * 16 + e] != HZ_NO_ROW;
                pthread_mutex_unlock(&off.c->mu);
                if (in_a != in_b) fail_msg("iteration %d: layer %u expert %u resident %d with prefetch, %d without", it,
                                           ly, e, in_a, in_b);
            }
    }
    hz_cache_prefetch_wait(f->c);
    assert_int_equal(tu_stat(f->c, "acquires"), tu_stat(off.c, "acquires"));
    assert_int_equal(tu_stat(f->c, "hits") + tu_stat(f->c, "misses"), 60 * 4);
    assert_int_equal(tu_stat(f->c, "misses") + tu_stat(f->c, "prefetch_hits"), tu_stat(off.c, "misses"));
    assert_int_equal(tu_stat(f->c, "evictions"), tu_stat(off.c, "evictions"));
    assert_true(tu_stat(f->c, "prefetch_hits") > 0);
    assert_true(tu_stat(f->c, "prefetch_wasted_bytes") > 0);
    /* without prefetch the counters stay observed zeros */
    assert_int_equal(tu_stat(off.c, "prefetch_requests"), 0);
    assert_int_equal(tu_stat(off.c, "prefetch_experts"), 0);
    char mode[32];
    tu_stat_str(off.c, "prefetch", mode, sizeof mode);
    assert_string_equal(mode, "off");
    tu_stat_str(f->c, "prefetch", mode, sizeof mode);
    assert_string_equal(mode, "next_layer");
    check_accounting(f);
    tu_check_invariants(off.c);
    close_cache(&off);
}

/* A lease pins the generation it was taken on while an acquire adopts prefetched rows over it; a
 * prefetch takes only spare rows free now (it never waits, so it cannot wait on the caller's own lease)
 * and residency never exceeds capacity. */
static void test_capacity_and_leases(void **state) {
    fixture *f = *state;
    const uint32_t old[4] = {0, 1, 2, 3}, p[4] = {8, 9, 10, 11}, q[4] = {12, 13, 14, 15};
    hz_generation *pin = NULL, *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, old, 4, &pin), HZ_OK);
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    assert_int_equal(tu_stat(f->c, "rows.prefetched"), 4);
    tu_check_invariants(f->c);
    /* the acquire adopts them: generation 2; the four victims stay pinned by our lease on generation 1 */
    assert_int_equal(hz_generation_acquire(f->c, 1, p, 4, &l), HZ_OK);
    assert_int_equal(hz_generation_id(l), 2);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "rows.victim_pending"), 4);
    assert_int_equal(tu_stat(f->c, "rows.free") + tu_stat(f->c, "rows.reusable"), 0);
    assert_int_equal(tu_stat(f->c, "rows.published"), 12);
    tu_check_rows(f->b, pin, old, 4);
    tu_check_invariants(f->c);
    /* no spare row is free: the next prediction is skipped at once, never waited for */
    assert_int_equal(hz_cache_prefetch(f->c, 1, q, 4), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    assert_int_equal(tu_stat(f->c, "prefetch_skipped"), 1);
    assert_int_equal(tu_stat(f->c, "generation"), 2);
    /* a demand miss now would wait on our own lease: refused as before */
    assert_int_equal(hz_generation_acquire(f->c, 1, q, 1, &l), HZ_ECAPACITY);
    tu_check_invariants(f->c);
    assert_int_equal(hz_generation_release(pin, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "rows.victim_pending"), 0);
    tu_acquire_check_release(f->c, f->b, 1, q, 4);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 4);
    assert_int_equal(tu_stat(f->c, "prefetch_wasted_bytes"), 0);
    check_accounting(f);
}

/* Ready rows never make a miss wait: a miss of another layer that needs every spare row gets them (the
 * prediction is given up, wasted), even while this thread holds a lease. */
static void test_ready_rows_yield_to_misses(void **state) {
    fixture *f = *state;
    const uint32_t p[4] = {8, 9, 10, 11}, g[4] = {12, 13, 14, 15}, old[4] = {0, 1, 2, 3};
    hz_generation *pin = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 2, old, 4, &pin), HZ_OK);
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    assert_int_equal(tu_stat(f->c, "rows.prefetched"), 4);
    assert_int_equal(tu_stat(f->c, "rows.free") + tu_stat(f->c, "rows.reusable"), 0);
    tu_acquire_check_release(f->c, f->b, 0, g, 4);
    assert_int_equal(tu_stat(f->c, "prefetch_wasted_bytes"), 4 * f->row_bytes);
    assert_int_equal(tu_stat(f->c, "rows.prefetched"), 0);
    assert_int_equal(hz_generation_release(pin, NULL), HZ_OK);
    check_accounting(f);
}

/* While a prefetch's copies run: its rows are in transfer and mapped by no generation, all-hit acquires
 * of any layer proceed without waiting for it, and the acquire of its layer waits, then adopts them. */
static void test_acquire_while_pending(void **state) {
    fixture *f = *state;
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 100000), HZ_OK); /* 4 copies: >= 400 ms */
    const uint32_t p[4] = {8, 9, 10, 11}, old[4] = {0, 1, 2, 3};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    wait_loading(f->c);
    assert_int_equal(tu_stat(f->c, "prefetch_pending"), 1);
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 0, old, 4, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(hz_generation_acquire(f->c, 1, old, 4, &l), HZ_OK); /* its layer, but all hits */
    assert_int_equal(hz_generation_id(l), 1);
    /* those acquires did not wait: the prefetch's rows are still in transfer, published by nobody */
    assert_int_equal(tu_stat(f->c, "rows.published"), 12);
    assert_int_equal(tu_stat(f->c, "rows.in_transfer"), 4);
    /* this one waits for the load (no miss of its own), then adopts; generation 1 stays leased across */
    hz_generation *l2 = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, p, 4, &l2), HZ_OK);
    assert_int_equal(hz_generation_id(l2), 2);
    tu_check_rows(f->b, l2, p, 4);
    tu_check_rows(f->b, l, old, 4);
    assert_int_equal(hz_generation_release(l2, NULL), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 4);
    assert_int_equal(tu_stat(f->c, "misses"), 0);
    /* the miss path's clock covers the round's copies */
    assert_true(tu_stat(f->c, "miss_transfer_seconds") >= 0.4);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 0), HZ_OK);
    tu_check_invariants(f->c);
}

/* A miss the running prefetch does not serve tells it to start no further copy: the load stops after
 * the blobs already started (serial: the one being staged; threaded: those handed out, one per staging
 * slot), their rows are spares again or ready, and the miss proceeds. The registered transport enqueues
 * every copy at once: nothing is left to cancel. */
/* Sets the copies fast again once the running load has been told to stop (the acquire then waits for
 * the copies already started, at 1 s each): until then every copy is slow, so that the load cannot
 * finish on its own before the miss arrives, however late the test's thread runs (a loaded CI machine
 * once let it: 4 loaded, 0 cancelled). */
typedef struct fast_after_cancel {
    fixture *f;
    pthread_t t;
} fast_after_cancel;

static void *fast_after_cancel_main(void *arg) {
    fast_after_cancel *a = arg;
    for (int i = 0; i < 300000 && !atomic_load(&a->f->c->pf.cancel); i++) usleep(100); /* at most ~30 s */
    hz_transactor_set_copy_delay(hz_cache_transactor(a->f->c), 0);
    hz_backend_cpu_set_copy_delay(a->f->cpu, 0);
    return NULL;
}

static void test_prefetch_cancelled_by_miss(void **state) {
    fixture *f = *state;
    const int reg = f->transport == HZ_TRANSPORT_REGISTERED;
    hz_transactor_set_copy_delay(hz_cache_transactor(f->c), reg ? 0 : 1000000);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, reg ? 50000 : 0), HZ_OK);
    const uint32_t p[4] = {8, 9, 10, 11}, g[4] = {12, 13, 14, 15};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    wait_loading(f->c);
    fast_after_cancel fa = {.f = f};
    if (reg) {
        assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 0), HZ_OK);
    } else {
        assert_int_equal(pthread_create(&fa.t, NULL, fast_after_cancel_main, &fa), 0);
    }
    tu_acquire_check_release(f->c, f->b, 1, g, 4);
    if (!reg) pthread_join(fa.t, NULL);
    hz_cache_prefetch_wait(f->c);
    double loaded = tu_stat(f->c, "prefetch_experts"), cancelled = tu_stat(f->c, "prefetch_cancelled");
    fprintf(stderr, "  %s: %.0f loaded, %.0f cancelled\n", tu_transport_name(f->transport), loaded, cancelled);
    assert_true(loaded + cancelled == 4);
    if (f->transport == HZ_TRANSPORT_REGISTERED) {
        /* its copies are enqueued one after another without waiting: usually all four before the miss
         * (then nothing is left to cancel), at least the first (the load was running) */
        assert_true(loaded >= 1);
    } else {
        assert_true(cancelled >= 2);
    }
    assert_int_equal(tu_stat(f->c, "misses"), 4);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 0);
    assert_int_equal(tu_stat(f->c, "rows.in_transfer") + tu_stat(f->c, "rows.reserved"), 0);
    check_accounting(f);
}

/* A miss that no prediction serves cancels the running load, then waits for the transaction lock; a
 * request queued behind that load must not run before the miss does. Before, the prefetch thread took
 * it as soon as the cancelled load ended, cleared the cancel and loaded all of it while the miss waited
 * (then the miss threw those rows away). Now a request taken while a miss waits starts cancelled; one
 * taken once the miss has the lock runs after it. Either way, when the miss returns the second request
 * has loaded nothing: every copy is slowed down (150 ms), so one that ran first would have finished. */
static void test_queued_request_waits_for_miss(void **state) {
    fixture *f = *state;
    const int reg = f->transport == HZ_TRANSPORT_REGISTERED;
    hz_transactor_set_copy_delay(hz_cache_transactor(f->c), reg ? 0 : 150000);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, reg ? 150000 : 0), HZ_OK);
    const uint32_t p1[4] = {8, 9, 10, 11}, p2[4] = {12, 13, 14, 15}, g[1] = {8};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p1, 4), HZ_OK);
    wait_loading(f->c);
    assert_int_equal(hz_cache_prefetch(f->c, 1, p2, 4), HZ_OK);
    pthread_mutex_lock(&f->c->mu);
    assert_true(f->c->pf.queued); /* behind the running load */
    pthread_mutex_unlock(&f->c->mu);
    tu_acquire_check_release(f->c, f->b, 2, g, 1); /* layer 2: predicted by neither */
    /* what the first load had started (registered: all of it; else at most its two slots), nothing more */
    const double at_return = tu_stat(f->c, "prefetch_experts");
    hz_transactor_set_copy_delay(hz_cache_transactor(f->c), 0);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 0), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    double loaded = tu_stat(f->c, "prefetch_experts"), cancelled = tu_stat(f->c, "prefetch_cancelled");
    fprintf(stderr, "  %s: %.0f loaded when the miss returned, %.0f in the end, %.0f cancelled\n",
            tu_transport_name(f->transport), at_return, loaded, cancelled);
    assert_true(at_return <= (reg ? 4 : 2));
    assert_true(loaded + cancelled == 8);
    assert_int_equal(tu_stat(f->c, "prefetch_dropped"), 0);
    check_accounting(f);
}

/* A request nobody started is replaced by a newer one (counted as dropped); the newer one runs, and its
 * rows replace the ready rows of the older prediction (wasted). A prediction of the same layer keeps the
 * ready rows it predicts again. */
static void test_request_replaced(void **state) {
    fixture *f = *state;
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 100000), HZ_OK);
    const uint32_t a[2] = {8, 9}, b[2] = {10, 11}, c2[2] = {12, 13};
    assert_int_equal(hz_cache_prefetch(f->c, 0, a, 2), HZ_OK);
    wait_loading(f->c);
    assert_int_equal(hz_cache_prefetch(f->c, 1, b, 2), HZ_OK);
    assert_int_equal(hz_cache_prefetch(f->c, 2, c2, 2), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 0), HZ_OK);
    assert_int_equal(tu_stat(f->c, "prefetch_requests"), 3);
    assert_int_equal(tu_stat(f->c, "prefetch_dropped"), 1);
    assert_int_equal(tu_stat(f->c, "prefetch_rounds"), 2);
    assert_int_equal(tu_stat(f->c, "prefetch_ready"), 2);
    assert_int_equal(tu_stat(f->c, "prefetch_wasted_bytes"), 2 * f->row_bytes);
    const uint32_t c3[3] = {12, 14, 15};
    assert_int_equal(hz_cache_prefetch(f->c, 2, c3, 3), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    assert_int_equal(tu_stat(f->c, "prefetch_experts"), 2 + 2 + 2);
    assert_int_equal(tu_stat(f->c, "prefetch_ready"), 3); /* 12 kept, 13 given up, 14 and 15 loaded */
    assert_int_equal(tu_stat(f->c, "prefetch_wasted_bytes"), 3 * f->row_bytes);
    tu_check_invariants(f->c);
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 2, c2, 2, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(hz_generation_acquire(f->c, 1, b, 2, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 1); /* 12 */
    assert_int_equal(tu_stat(f->c, "misses"), 1 + 2);   /* 13, then 10 and 11 */
    check_accounting(f);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 0), HZ_OK);
}

/* Destroy while a prefetch is being loaded and another one waits: the running one finishes, the queued
 * one is dropped, nothing leaks (ASan) and no copy writes freed rows. */
static void test_destroy_with_prefetch_pending(void **state) {
    fixture *f = *state;
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 10000), HZ_OK);
    const uint32_t a[4] = {8, 9, 10, 11}, b[4] = {12, 13, 14, 15};
    assert_int_equal(hz_cache_prefetch(f->c, 1, a, 4), HZ_OK);
    wait_loading(f->c);
    assert_int_equal(hz_cache_prefetch(f->c, 2, b, 4), HZ_OK);
    assert_int_equal(hz_cache_destroy(f->c), HZ_OK);
    f->c = NULL;
    /* and right after creation, before the thread even took the request */
    hz_cache_options o;
    tu_options(&o, f->transport);
    o.capacity = 4;
    o.prefetch = HZ_PREFETCH_NEXT_LAYER;
    assert_int_equal(hz_cache_create(f->b, f->d, &o, &f->c), HZ_OK);
    assert_int_equal(hz_cache_prefetch(f->c, 0, b, 4), HZ_OK);
    assert_int_equal(hz_cache_destroy(f->c), HZ_OK);
    f->c = NULL;
}

/* A prefetch's copy fails before publication: counted (not returned), the rows are spares again, the
 * current generation stays, and the acquire of the layer loads the experts on demand. */
static void expect_prefetch_recovered(fixture *f, const char *what) {
    hz_cache_prefetch_wait(f->c);
    tu_expect_rolled_back(f->c, 4);
    assert_int_equal(tu_stat(f->c, "prefetch_failures"), 1);
    char err[600];
    tu_stat_str(f->c, "prefetch_last_error", err, sizeof err);
    if (!strstr(err, what)) fprintf(stderr, "prefetch_last_error: %s\n", err);
    assert_non_null(strstr(err, what));
    assert_int_equal(tu_stat(f->c, "failed_transactions"), 0);
    assert_int_equal(tu_stat(f->c, "miss_transfer_bytes"), 0);
    tu_check_invariants(f->c);
    hz_backend_fault_reset(f->fb);
    const uint32_t p[4] = {8, 9, 10, 11};
    tu_acquire_check_release(f->c, f->b, 1, p, 4);
    assert_int_equal(tu_stat(f->c, "misses"), 4);
    assert_int_equal(tu_stat(f->c, "prefetch_hits"), 0);
    check_accounting(f);
}

static void test_prefetch_h2d_fails(void **state) {
    fixture *f = *state;
    hz_backend_fault_arm(f->fb, HZ_FAULT_COPY_H2D, 3, HZ_EDEVICE);
    const uint32_t p[4] = {8, 9, 10, 11};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    expect_prefetch_recovered(f, "copy_h2d");
}

static void test_prefetch_staging_copy_fails(void **state) {
    fixture *f = *state;
    hz_transactor_inject(hz_cache_transactor(f->c), HZ_TXN_FAULT_STAGING_COPY, 2, HZ_EIO);
    const uint32_t p[4] = {8, 9, 10, 11};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    expect_prefetch_recovered(f, "staging copy");
}

static void test_prefetch_transfer_reports_error(void **state) {
    fixture *f = *state;
    hz_backend_fault_arm_event_error(f->fb, 1, HZ_EDEVICE);
    const uint32_t p[4] = {8, 9, 10, 11};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    expect_prefetch_recovered(f, "injected error");
}

/* A prefetch copy fails and the copy queue cannot be drained: the rows may still be written, so the
 * cache is FAULTED, and the next acquire says why. */
static void test_prefetch_undrainable_faults(void **state) {
    fixture *f = *state;
    hz_backend_fault_arm(f->fb, HZ_FAULT_COPY_H2D, 2, HZ_EDEVICE);
    hz_backend_fault_arm(f->fb, HZ_FAULT_QUEUE_SYNC, 1, HZ_EDEVICE);
    const uint32_t p[4] = {8, 9, 10, 11};
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    hz_backend_fault_reset(f->fb);
    tu_expect_state(f->c, "FAULTED");
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, p, 4, &l), HZ_EFAULTED);
    assert_non_null(strstr(hz_last_error_message(), "prefetch for layer 1"));
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_EFAULTED);
}

static void test_prefetch_options_and_input(void **state) {
    (void)state;
    fixture f = {0};
    open_cache(&f, HZ_TRANSPORT_SERIAL, HZ_PREFETCH_OFF);
    const uint32_t p[2] = {8, 9};
    assert_int_equal(hz_cache_prefetch_mode(f.c), HZ_PREFETCH_OFF);
    assert_int_equal(hz_cache_prefetch(f.c, 1, p, 2), HZ_ESTATE);
    assert_non_null(strstr(hz_last_error_message(), "prefetch is off"));
    hz_cache_prefetch_wait(f.c); /* returns at once */
    assert_int_equal(hz_cache_destroy(f.c), HZ_OK);

    /* unknown modes are refused; an options struct from before the field existed means "off" */
    hz_cache_options o;
    const int32_t bad[] = {2, -1, 77};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hz_cache_options_init(&o);
        o.prefetch = bad[i];
        f.c = (hz_cache *)0x1;
        assert_int_equal(hz_cache_create(f.b, f.d, &o, &f.c), HZ_EUNSUPPORTED);
        assert_null(f.c);
        assert_non_null(strstr(hz_last_error_message(), "prefetch"));
    }
    hz_cache_options_init(&o);
    assert_int_equal(o.prefetch, HZ_PREFETCH_OFF);
    o.prefetch = 77; /* beyond the older struct_size: never read */
    o.struct_size = (uint32_t)offsetof(hz_cache_options, prefetch);
    assert_int_equal(hz_cache_create(f.b, f.d, &o, &f.c), HZ_OK);
    assert_int_equal(hz_cache_prefetch_mode(f.c), HZ_PREFETCH_OFF);
    assert_int_equal(hz_cache_destroy(f.c), HZ_OK);

    hz_cache_options_init(&o);
    o.capacity = 4;
    o.prefetch = HZ_PREFETCH_NEXT_LAYER;
    assert_int_equal(hz_cache_create(f.b, f.d, &o, &f.c), HZ_OK);
    assert_int_equal(hz_cache_prefetch_mode(f.c), HZ_PREFETCH_NEXT_LAYER);
    const uint32_t dup[2] = {5, 5}, far[1] = {16}, five[5] = {4, 5, 6, 7, 8};
    assert_int_equal(hz_cache_prefetch(f.c, 3, p, 2), HZ_ERANGE);
    assert_int_equal(hz_cache_prefetch(f.c, 0, far, 1), HZ_ERANGE);
    assert_int_equal(hz_cache_prefetch(f.c, 0, dup, 2), HZ_EINVAL);
    assert_int_equal(hz_cache_prefetch(f.c, 0, five, 5), HZ_ECAPACITY);
    assert_int_equal(hz_cache_prefetch(f.c, 0, p, 0), HZ_EINVAL);
    assert_int_equal(hz_cache_prefetch(f.c, 0, NULL, 2), HZ_EINVAL);
    assert_int_equal(hz_cache_prefetch(NULL, 0, p, 2), HZ_EINVAL);
    assert_int_equal(tu_stat(f.c, "prefetch_requests"), 0);
    assert_true(tu_stat(f.c, "miss_transfer_gbps") < 0); /* null: no round yet, no invented rate */
    assert_int_equal(tu_stat(f.c, "miss_transfer_bytes"), 0);
    tu_check_invariants(f.c);
    close_cache(&f);
}

/* The miss path's counters on demand misses: bytes of the rounds, their wall time from the first copy
 * to publication (the cpu backend's copies take >= 2 x delay each), a rate, the initial fill excluded. */
static void test_miss_transfer_counters(void **state) {
    fixture f = {0};
    open_cache(&f, *(const int *)*state, HZ_PREFETCH_OFF);
    assert_int_equal(tu_stat(f.c, "miss_transfer_bytes"), 0);
    assert_int_equal(tu_stat(f.c, "miss_transfer_seconds"), 0);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f.cpu, 5000), HZ_OK);
    const uint32_t g[4] = {8, 9, 10, 11};
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f.c, 2, g, 4, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(tu_stat(f.c, "miss_transfer_bytes"), 4 * f.row_bytes);
    double s = tu_stat(f.c, "miss_transfer_seconds");
    assert_true(s >= 4 * 0.005);
    assert_true(s * 1e6 <= tu_stat(f.c, "miss_latency_us.max") + 1);
    assert_true(tu_stat(f.c, "miss_transfer_gbps") > 0);
    /* a failed round adds nothing */
    hz_backend_fault_arm(f.fb, HZ_FAULT_COPY_H2D, 1, HZ_EDEVICE);
    const uint32_t g2[2] = {12, 13};
    assert_int_equal(hz_generation_acquire(f.c, 2, g2, 2, &l), HZ_EDEVICE);
    assert_int_equal(tu_stat(f.c, "miss_transfer_bytes"), 4 * f.row_bytes);
    assert_true(tu_stat(f.c, "miss_transfer_seconds") == s);
    assert_int_equal(hz_backend_cpu_set_copy_delay(f.cpu, 0), HZ_OK);
    tu_check_invariants(f.c);
    close_cache(&f);
}

/* ---- threads: acquires and prefetches of random layers mixed, late consumers, invariants ---- */

typedef struct mixer {
    fixture *f;
    int id;
    double deadline;
    pthread_t t;
    int failed;
    char msg[320];
} mixer;

static void *mixer_main(void *arg) {
    mixer *m = arg;
    hz_cache *c = m->f->c;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(m->id + 3);
    uint64_t it = 0;
    while (!m->failed && hz_now_seconds() < m->deadline) {
        uint32_t layer = (uint32_t)(tu_rng_next(&rng) % 3), g[4], p[4];
        random_group(&rng, g, 4, 16);
        random_group(&rng, p, 4, 16);
        int st = hz_cache_prefetch(c, (layer + 1) % 3, p, 4);
        hz_generation *l = NULL;
        if (!st) st = hz_generation_acquire(c, layer, g, 4, &l);
        if (st) {
            m->failed = 1;
            snprintf(m->msg, sizeof m->msg, "%s: %s", hz_status_name(st), hz_last_error_message());
            break;
        }
        for (int i = 0; i < 4; i++) {
            const void *addr = NULL;
            uint32_t row;
            if (hz_generation_row(l, g[i], &row, &addr) != HZ_OK ||
                memcmp(addr, hz_backing_expert_blob(m->f->b, layer, g[i]), (size_t)m->f->row_bytes) != 0) {
                m->failed = 1;
                snprintf(m->msg, sizeof m->msg, "layer %u expert %u does not hold its bytes", layer, g[i]);
            }
        }
        if (tu_rng_next(&rng) % 4 == 0) usleep(100);
        if (hz_generation_release(l, NULL) != HZ_OK) m->failed = 1;
        if (m->id == 0 && ++it % 8 == 0) {
            char why[256];
            if (hz_cache_check_invariants(c, 1, why, sizeof why) != HZ_OK) {
                m->failed = 1;
                snprintf(m->msg, sizeof m->msg, "invariants: %s", why);
            }
        }
    }
    return NULL;
}

static void test_threads_mix_prefetch_and_acquire(void **state) {
    fixture *f = *state;
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->cpu, 50), HZ_OK);
    mixer m[4];
    double deadline = hz_now_seconds() + 0.4;
    for (int i = 0; i < 4; i++) {
        m[i] = (mixer){.f = f, .id = i, .deadline = deadline};
        assert_int_equal(pthread_create(&m[i].t, NULL, mixer_main, &m[i]), 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(m[i].t, NULL);
    for (int i = 0; i < 4; i++)
        if (m[i].failed) fail_msg("thread %d: %s", i, m[i].msg);
    hz_cache_prefetch_wait(f->c);
    fprintf(stderr,
            "  %s: %.0f acquires, %.0f misses, %.0f prefetch rounds, %.0f prefetch hits, %.0f wasted rows, "
            "%.0f predicted experts cancelled\n",
            tu_transport_name(f->transport), tu_stat(f->c, "acquires"), tu_stat(f->c, "misses"),
            tu_stat(f->c, "prefetch_rounds"), tu_stat(f->c, "prefetch_hits"),
            tu_stat(f->c, "prefetch_wasted_bytes") / (double)f->row_bytes, tu_stat(f->c, "prefetch_cancelled"));
    /* The prefetch thread took part: it loaded, or it reserved rows and gave them back because a miss was
     * waiting (a request taken while a demand miss waits starts cancelled, so with four threads missing
     * all the time few rounds load anything). */
    assert_true(tu_stat(f->c, "prefetch_rounds") + tu_stat(f->c, "prefetch_cancelled") > 0);
    assert_int_equal(tu_stat(f->c, "leases_active"), 0);
    assert_int_equal(tu_stat(f->c, "prefetch_failures"), 0);
    assert_int_equal(tu_stat(f->c, "failed_transactions"), 0);
    assert_int_equal(tu_stat(f->c, "expert_d2h_bytes"), 0);
    check_accounting(f);
}

/* ---- the gate ---------------------------------------------------------------------------------- */

/* One admitted prediction of layer 1 that the acquire does not use: experts 8..11 are loaded, then
 * the group (alternately 12..15 and 0..3, never predicted, never resident when acquired) misses and
 * its round gives the four prefetched rows up. */
static void wasted_round(fixture *f, int i) {
    const uint32_t p[4] = {8, 9, 10, 11}, ga[4] = {12, 13, 14, 15}, gb[4] = {0, 1, 2, 3};
    assert_int_equal(hz_cache_prefetch_admit(f->c), 1);
    assert_int_equal(hz_cache_prefetch(f->c, 1, p, 4), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    tu_acquire_check_release(f->c, f->b, 1, i % 2 ? gb : ga, 4);
}

static void open_gated(fixture *f, const char *pct, const char *window) {
    if (pct) setenv("HZ_PREFETCH_GATE_PCT", pct, 1);
    else unsetenv("HZ_PREFETCH_GATE_PCT");
    if (window) setenv("HZ_PREFETCH_GATE_WINDOW", window, 1);
    else unsetenv("HZ_PREFETCH_GATE_WINDOW");
    open_cache(f, HZ_TRANSPORT_SERIAL, HZ_PREFETCH_NEXT_LAYER);
    unsetenv("HZ_PREFETCH_GATE_PCT"); /* read once, at creation */
    unsetenv("HZ_PREFETCH_GATE_WINDOW");
}

/* Defaults (25%, a window of 64 resolved experts, a pause of 16 predictions per layer): 16 wasted
 * rounds close the gate; it then declines exactly 3 x 16 predictions, counted, and opens again. */
static void test_gate_closes_on_wasted_predictions(void **state) {
    (void)state;
    fixture f = {0};
    open_gated(&f, NULL, NULL);
    char gate[16];
    assert_int_equal(tu_stat(f.c, "prefetch_gate_pct"), 25);
    for (int i = 0; i < 16; i++) {
        tu_stat_str(f.c, "prefetch_gate", gate, sizeof gate);
        assert_string_equal(gate, "open");
        wasted_round(&f, i);
    }
    assert_int_equal(tu_stat(f.c, "prefetch_wasted_bytes"), 64 * f.row_bytes);
    assert_int_equal(tu_stat(f.c, "prefetch_gate_closed"), 1);
    tu_stat_str(f.c, "prefetch_gate", gate, sizeof gate);
    assert_string_equal(gate, "closed");
    const double experts = tu_stat(f.c, "prefetch_experts");
    for (int j = 0; j < 3 * 16; j++) assert_int_equal(hz_cache_prefetch_admit(f.c), 0);
    assert_int_equal(tu_stat(f.c, "prefetch_gated"), 48);
    assert_int_equal(tu_stat(f.c, "prefetch_requests"), 16 + 48); /* declined ones are requests too */
    assert_true(tu_stat(f.c, "prefetch_experts") == experts);    /* nothing loaded meanwhile */
    tu_check_invariants(f.c);
    assert_int_equal(hz_cache_prefetch_admit(f.c), 1); /* open again: a new window */
    tu_stat_str(f.c, "prefetch_gate", gate, sizeof gate);
    assert_string_equal(gate, "open");
    assert_int_equal(tu_stat(f.c, "prefetch_gated"), 48);
    check_accounting(&f);
    close_cache(&f);
}

/* Two wasted rounds (8 resolved experts, window 8) close the gate; all the predictions it then declines
 * are admitted as 0, and the next is admitted. Returns how many were declined. */
static uint32_t close_and_count(fixture *f, int i0) {
    wasted_round(f, i0);
    wasted_round(f, i0 + 1);
    uint32_t declined = 0;
    while (hz_cache_prefetch_admit(f->c) == 0) {
        declined++;
        if (declined > 100000) fail_msg("the gate never opened again");
    }
    tu_check_invariants(f->c);
    return declined;
}

/* Failed windows in a row double the pause (3 layers x 16, then 96, 192, ... up to 64 x 48); a window
 * whose predictions were used resets it. */
static void test_gate_backs_off(void **state) {
    (void)state;
    fixture f = {0};
    open_gated(&f, NULL, "8");
    const uint32_t expect[8] = {48, 96, 192, 384, 768, 1536, 3072, 3072};
    for (int n = 0; n < 8; n++) {
        assert_int_equal(close_and_count(&f, 2 * n), expect[n]);
        assert_int_equal(tu_stat(f.c, "prefetch_gate_strikes"), n + 1);
    }
    assert_int_equal(tu_stat(f.c, "prefetch_gate_closed"), 8);
    /* The admit that reopened the gate above was a prediction: load it and let the acquire use it
     * (the resident group is 0..3 after the odd round), then one more used round: 8 used. */
    const uint32_t ga[4] = {8, 9, 10, 11}, gb[4] = {12, 13, 14, 15};
    for (int j = 0; j < 2; j++) {
        if (j) assert_int_equal(hz_cache_prefetch_admit(f.c), 1);
        const uint32_t *g = j ? gb : ga;
        assert_int_equal(hz_cache_prefetch(f.c, 1, g, 4), HZ_OK);
        hz_cache_prefetch_wait(f.c);
        tu_acquire_check_release(f.c, f.b, 1, g, 4);
    }
    assert_int_equal(tu_stat(f.c, "prefetch_gate_strikes"), 0);
    assert_int_equal(tu_stat(f.c, "prefetch_gate_closed"), 8);
    /* 12..15 resident now: the odd round first, so that both rounds miss */
    assert_int_equal(close_and_count(&f, 1), 48);
    assert_int_equal(tu_stat(f.c, "prefetch_gated"), 48 + 96 + 192 + 384 + 768 + 1536 + 3072 + 3072 + 48);
    check_accounting(&f);
    close_cache(&f);
}

/* Predictions that the acquires use keep the gate open however many are resolved. */
static void test_gate_stays_open_when_used(void **state) {
    (void)state;
    fixture f = {0};
    open_gated(&f, NULL, NULL);
    const uint32_t ga[4] = {8, 9, 10, 11}, gb[4] = {12, 13, 14, 15};
    for (int i = 0; i < 24; i++) {
        assert_int_equal(hz_cache_prefetch_admit(f.c), 1);
        const uint32_t *g = i % 2 ? gb : ga;
        assert_int_equal(hz_cache_prefetch(f.c, 1, g, 4), HZ_OK);
        hz_cache_prefetch_wait(f.c);
        tu_acquire_check_release(f.c, f.b, 1, g, 4);
    }
    assert_int_equal(tu_stat(f.c, "prefetch_hits"), 96);
    assert_int_equal(tu_stat(f.c, "misses"), 0);
    assert_int_equal(tu_stat(f.c, "prefetch_gate_closed"), 0);
    assert_int_equal(tu_stat(f.c, "prefetch_gated"), 0);
    check_accounting(&f);
    close_cache(&f);
}

/* The threshold is a share of the window: one used expert in four is 25%, not below it; with a
 * 30% threshold the same window closes the gate. Round 0 predicts 8..11 and acquires 8, 12, 13, 14;
 * round 1 predicts 4..7 and acquires 4, 0, 1, 2 (none of them resident before): one prefetched expert
 * used, three given up, each time. */
static void used_one_of_four(fixture *f, int i) {
    const uint32_t pa[4] = {8, 9, 10, 11}, ga[4] = {8, 12, 13, 14};
    const uint32_t pb[4] = {4, 5, 6, 7}, gb[4] = {4, 0, 1, 2};
    assert_int_equal(hz_cache_prefetch(f->c, 1, i % 2 ? pb : pa, 4), HZ_OK);
    hz_cache_prefetch_wait(f->c);
    tu_acquire_check_release(f->c, f->b, 1, i % 2 ? gb : ga, 4);
}

static void test_gate_threshold(void **state) {
    (void)state;
    const char *pcts[2] = {"25", "30"};
    for (int k = 0; k < 2; k++) {
        fixture f = {0};
        open_gated(&f, pcts[k], "8");
        assert_int_equal(tu_stat(f.c, "prefetch_gate_pct"), k ? 30 : 25);
        used_one_of_four(&f, 0);
        used_one_of_four(&f, 1); /* 8 resolved: 2 used, 6 wasted */
        assert_int_equal(tu_stat(f.c, "prefetch_hits"), 2);
        assert_int_equal(tu_stat(f.c, "prefetch_gate_closed"), k ? 1 : 0);
        assert_int_equal(hz_cache_prefetch_admit(f.c), k ? 0 : 1);
        check_accounting(&f);
        close_cache(&f);
    }
}

/* HZ_PREFETCH_GATE_PCT=0 turns the gate off; a value out of range or not a number keeps the default;
 * hz_cache_prefetch_admit on a cache without prefetch (or NULL) says no and counts nothing. */
static void test_gate_settings(void **state) {
    (void)state;
    fixture f = {0};
    open_gated(&f, "0", NULL);
    assert_int_equal(tu_stat(f.c, "prefetch_gate_pct"), 0);
    for (int i = 0; i < 20; i++) wasted_round(&f, i);
    assert_int_equal(tu_stat(f.c, "prefetch_gate_closed"), 0);
    assert_int_equal(hz_cache_prefetch_admit(f.c), 1);
    check_accounting(&f);
    close_cache(&f);
    const char *bad[3] = {"101", "abc", "-5"};
    for (int i = 0; i < 3; i++) {
        open_gated(&f, bad[i], NULL);
        assert_int_equal(tu_stat(f.c, "prefetch_gate_pct"), 25);
        close_cache(&f);
    }
    open_cache(&f, HZ_TRANSPORT_SERIAL, HZ_PREFETCH_OFF);
    assert_int_equal(hz_cache_prefetch_admit(f.c), 0);
    assert_int_equal(tu_stat(f.c, "prefetch_requests"), 0);
    assert_int_equal(tu_stat(f.c, "prefetch_gated"), 0);
    assert_int_equal(hz_cache_prefetch_admit(NULL), 0);
    close_cache(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TRANSPORT_TESTS(test_prefetch_then_acquire_hits, setup, teardown),
        TU_TRANSPORT_TESTS(test_wrong_prediction_wasted, setup, teardown),
        TU_TRANSPORT_TESTS(test_partial_prediction, setup, teardown),
        TU_TRANSPORT_TESTS(test_same_rows_as_without_prefetch, setup, teardown),
        TU_TRANSPORT_TESTS(test_capacity_and_leases, setup, teardown),
        TU_TRANSPORT_TESTS(test_ready_rows_yield_to_misses, setup, teardown),
        TU_TRANSPORT_TESTS(test_acquire_while_pending, setup, teardown),
        TU_TRANSPORT_TESTS(test_request_replaced, setup, teardown),
        TU_TRANSPORT_TESTS(test_prefetch_cancelled_by_miss, setup, teardown),
        TU_TRANSPORT_TESTS(test_queued_request_waits_for_miss, setup, teardown),
        TU_TRANSPORT_TESTS(test_destroy_with_prefetch_pending, setup, teardown),
        TU_TRANSPORT_TESTS(test_prefetch_h2d_fails, setup, teardown),
        TU_TRANSPORT_TEST_(test_prefetch_staging_copy_fails, setup, teardown, 0, "serial"),
        TU_TRANSPORT_TEST_(test_prefetch_staging_copy_fails, setup, teardown, 1, "threaded"),
        TU_TRANSPORT_TESTS(test_prefetch_transfer_reports_error, setup, teardown),
        TU_TRANSPORT_TESTS(test_prefetch_undrainable_faults, setup, teardown),
        TU_TRANSPORT_TESTS(test_miss_transfer_counters, NULL, NULL),
        TU_TRANSPORT_TESTS(test_threads_mix_prefetch_and_acquire, setup, teardown),
        cmocka_unit_test(test_prefetch_options_and_input),
        cmocka_unit_test(test_gate_closes_on_wasted_predictions),
        cmocka_unit_test(test_gate_stays_open_when_used),
        cmocka_unit_test(test_gate_backs_off),
        cmocka_unit_test(test_gate_threshold),
        cmocka_unit_test(test_gate_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
