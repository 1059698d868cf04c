/* The cache contract without threads: creation, bad input, lifetimes, row contents, rounds, LRU, and the
 * device / cpu backend underneath. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cache_test_util.h"

typedef struct fixture {
    hz_host_backing *b;
    hz_device *d;
    hz_cache *c;
    uint64_t hash0;
    int transport;
} fixture;

/* 3 layers, 16 experts, top-4; capacity 4, default spares (4) and staging (2 blobs); the transport
 * comes from the test's initial state (TU_TRANSPORT_TESTS). */
static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    f->transport = *(const int *)*state;
    f->b = tu_backing(3, 16, 4, 11);
    f->hash0 = tu_routed_hash(f->b);
    assert_int_equal(hz_device_open("cpu", &f->d), HZ_OK);
    hz_cache_options o;
    tu_options(&o, f->transport);
    o.capacity = 4;
    assert_int_equal(hz_cache_create(f->b, f->d, &o, &f->c), HZ_OK);
    tu_after_create(f->c);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    tu_close(f->c, f->d, f->b, f->hash0);
    free(f);
    return 0;
}

static void test_initial_placement_canonical(void **state) {
    fixture *f = *state;
    assert_int_equal(tu_stat(f->c, "generation"), 1);
    assert_int_equal(tu_stat(f->c, "rows.published"), 12);
    assert_int_equal(tu_stat(f->c, "rows.free"), 4);
    assert_int_equal(tu_stat(f->c, "h2d_bytes"), 12 * tu_row_bytes(f->b));
    for (uint32_t l = 0; l < 3; l++) {
        uint32_t g[4] = {0, 1, 2, 3};
        hz_generation *lease = NULL;
        assert_int_equal(hz_generation_acquire(f->c, l, g, 4, &lease), HZ_OK);
        assert_int_equal(hz_generation_id(lease), 1);
        assert_int_equal(hz_generation_layer(lease), l);
        tu_check_rows(f->b, lease, g, 4);
        uint32_t row;
        const void *addr;
        assert_int_equal(hz_generation_row(lease, 4, &row, &addr), HZ_ERANGE);
        assert_null(addr);
        assert_int_equal(hz_generation_release(lease, NULL), HZ_OK);
    }
    assert_int_equal(tu_stat(f->c, "hits"), 12);
    assert_int_equal(tu_stat(f->c, "misses"), 0);
    assert_int_equal(tu_stat(f->c, "generation"), 1);
    tu_check_invariants(f->c);
}

static void test_miss_publishes_new_generation(void **state) {
    fixture *f = *state;
    assert_int_equal(hz_backend_cpu_set_copy_delay(f->d->be, 2000), HZ_OK);
    uint32_t g[3] = {9, 2, 14};
    hz_generation *lease = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, g, 3, &lease), HZ_OK);
    assert_int_equal(hz_generation_id(lease), 2);
    tu_check_rows(f->b, lease, g, 3);
    assert_int_equal(tu_stat(f->c, "misses"), 2);
    assert_int_equal(tu_stat(f->c, "hits"), 1);
    assert_int_equal(tu_stat(f->c, "evictions"), 2);
    assert_int_equal(tu_stat(f->c, "publications"), 2);
    assert_int_equal(tu_stat(f->c, "h2d_copies"), 12 + 2);
    assert_int_equal(tu_stat(f->c, "expert_d2h_bytes"), 0);
    /* residency stays at capacity: experts 0 and 1 (LRU, never touched, lowest ids) went */
    hz_generation *l2 = NULL;
    uint32_t keep[2] = {3, 14};
    assert_int_equal(hz_generation_acquire(f->c, 1, keep, 2, &l2), HZ_OK);
    assert_int_equal(hz_generation_id(l2), 2);
    uint32_t row;
    const void *addr;
    assert_int_equal(hz_generation_row(l2, 0, &row, &addr), HZ_ERANGE);
    assert_int_equal(hz_generation_row(l2, 1, &row, &addr), HZ_ERANGE);
    assert_int_equal(hz_generation_row(l2, 9, &row, &addr), HZ_OK);
    assert_int_equal(hz_generation_release(l2, NULL), HZ_OK);
    /* the old generation (no lease) retired immediately: the two victims are spares again */
    assert_int_equal(tu_stat(f->c, "rows.reusable"), 2);
    assert_int_equal(tu_stat(f->c, "retired_rows"), 2);
    assert_int_equal(hz_generation_release(lease, NULL), HZ_OK);
    tu_check_invariants(f->c);
}

static void test_lease_pins_old_generation(void **state) {
    fixture *f = *state;
    uint32_t old[4] = {0, 1, 2, 3};
    hz_generation *pin = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 0, old, 4, &pin), HZ_OK);
    hz_generation *l = NULL;
    uint32_t g[2] = {10, 11};
    /* another thread's lease would pin too; here the pin is ours, which is fine while spares remain */
    assert_int_equal(hz_generation_acquire(f->c, 0, g, 2, &l), HZ_OK);
    assert_int_equal(tu_stat(f->c, "rows.victim_pending"), 2);
    assert_int_equal(tu_stat(f->c, "generations_live"), 2);
    /* the pinned generation still maps its rows, with their original bytes */
    tu_check_rows(f->b, pin, old, 4);
    tu_check_invariants(f->c);
    assert_int_equal(hz_generation_release(pin, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "rows.victim_pending"), 0);
    assert_int_equal(tu_stat(f->c, "rows.reusable"), 2);
    assert_int_equal(tu_stat(f->c, "generations_live"), 1);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    tu_check_invariants(f->c);
}

/* hz_cache_hold: a lease on the current generation without a group: no lookup counted, every layer's
 * rows readable through it (hz_generation_layer_rows agrees with hz_generation_row and gives NULL for
 * the experts it does not map), and the rows it maps stay put (victims pending) until it ends. */
static void test_hold_current_generation(void **state) {
    fixture *f = *state;
    hz_generation *hold = NULL;
    assert_int_equal(hz_cache_hold(f->c, &hold), HZ_OK);
    assert_int_equal(hz_generation_id(hold), 1);
    assert_int_equal(tu_stat(f->c, "acquires"), 0);
    assert_int_equal(tu_stat(f->c, "hits"), 0);
    /* canonical placement: experts 0..3 of every layer; hz_generation_row answers for the lease's
     * layer, 0 for a hold */
    const void *rows[16];
    for (uint32_t l = 0; l < 3; l++) {
        assert_int_equal(hz_generation_layer_rows(hold, l, rows), HZ_OK);
        for (uint32_t e = 0; e < 16; e++) {
            if (e >= 4) {
                assert_null(rows[e]);
                continue;
            }
            assert_non_null(rows[e]);
            uint32_t row;
            const void *addr = NULL;
            if (l == 0) {
                assert_int_equal(hz_generation_row(hold, e, &row, &addr), HZ_OK);
                assert_ptr_equal(addr, rows[e]);
            }
        }
    }
    assert_int_equal(hz_generation_layer_rows(hold, 3, rows), HZ_ERANGE);
    assert_int_equal(hz_generation_layer_rows(NULL, 0, rows), HZ_EINVAL);
    hz_generation *none = NULL;
    assert_int_equal(hz_cache_hold(NULL, &none), HZ_EINVAL);
    assert_null(none);
    /* a miss in layer 1 publishes generation 2; the held generation still maps its two victims */
    uint32_t g[2] = {10, 11};
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 1, g, 2, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "rows.victim_pending"), 2);
    assert_int_equal(hz_generation_layer_rows(hold, 1, rows), HZ_OK);
    assert_non_null(rows[0]);
    assert_null(rows[10]);
    hz_generation *view = NULL;
    assert_int_equal(hz_cache_hold(f->c, &view), HZ_OK);
    assert_int_equal(hz_generation_id(view), 2);
    assert_int_equal(hz_generation_release(view, NULL), HZ_OK);
    tu_check_invariants(f->c);
    assert_int_equal(hz_generation_release(hold, NULL), HZ_OK);
    assert_int_equal(tu_stat(f->c, "rows.victim_pending"), 0);
    assert_int_equal(tu_stat(f->c, "rows.reusable"), 2);
    tu_check_invariants(f->c);
}

static void test_self_pinned_spares_report_capacity(void **state) {
    fixture *f = *state;
    uint32_t old[4] = {0, 1, 2, 3};
    hz_generation *pin = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 2, old, 4, &pin), HZ_OK);
    hz_generation *l = NULL;
    uint32_t g[4] = {4, 5, 6, 7};
    assert_int_equal(hz_generation_acquire(f->c, 2, g, 4, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    /* all four spares are victims pinned by our own lease: waiting would never end */
    uint32_t g2[1] = {8};
    hz_generation *l2 = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 2, g2, 1, &l2), HZ_ECAPACITY);
    assert_non_null(strstr(hz_last_error_message(), "this thread still holds"));
    assert_null(l2);
    tu_check_invariants(f->c);
    assert_int_equal(hz_generation_release(pin, NULL), HZ_OK);
    tu_acquire_check_release(f->c, f->b, 2, g2, 1);
}

typedef struct holder {
    hz_cache *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int holding;
    unsigned hold_us;
} holder;

/* Another thread pins generation 1 of layer 2 for a while, then lets go. */
static void *holder_thread(void *arg) {
    holder *h = arg;
    uint32_t old[4] = {0, 1, 2, 3};
    hz_generation *pin = NULL;
    assert_int_equal(hz_generation_acquire(h->c, 2, old, 4, &pin), HZ_OK);
    pthread_mutex_lock(&h->mu);
    h->holding = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    usleep(h->hold_us);
    assert_int_equal(hz_generation_release(pin, NULL), HZ_OK);
    return NULL;
}

static void test_waits_for_other_thread_lease(void **state) {
    fixture *f = *state;
    holder h = {f->c, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 60000};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, holder_thread, &h), 0);
    pthread_mutex_lock(&h.mu);
    while (!h.holding) pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    double t0 = hz_now_seconds();
    hz_generation *l = NULL;
    uint32_t g[4] = {4, 5, 6, 7};
    assert_int_equal(hz_generation_acquire(f->c, 2, g, 4, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    /* every spare is now a victim pinned by the other thread's lease: this acquire waits for it */
    uint32_t g2[2] = {8, 9};
    assert_int_equal(hz_generation_acquire(f->c, 2, g2, 2, &l), HZ_OK);
    assert_true(hz_now_seconds() - t0 >= 0.04);
    pthread_join(t, NULL);
    tu_check_rows(f->b, l, g2, 2);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    tu_check_invariants(f->c);
}

/* Thread B of test_crossed_leases: a miss whose spare rows only the main thread's lease pins. */
typedef struct crossed {
    hz_cache *c;
    _Atomic int stage; /* 1: B released its first lease and goes on to the blocked acquire */
    int status;
    char msg[512];
} crossed;

static void *crossed_thread(void *arg) {
    crossed *x = arg;
    hz_generation *l = NULL;
    uint32_t g[4] = {4, 5, 6, 7};
    assert_int_equal(hz_generation_acquire(x->c, 2, g, 4, &l), HZ_OK); /* 0..3 become victims */
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    atomic_store(&x->stage, 1);
    uint32_t g2[1] = {8};
    x->status = hz_generation_acquire(x->c, 2, g2, 1, &l);
    snprintf(x->msg, sizeof x->msg, "%s", hz_last_error_message());
    if (x->status == HZ_OK) assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    return NULL;
}

/* The main thread holds a lease that pins the only spare rows; thread B's miss waits for it inside its
 * transaction; the main thread then acquires a miss itself, which waits for B's transaction. Before, the
 * two waited for each other forever. Now B's transaction sees that the lease's owner waits for it and
 * fails with HZ_ECAPACITY, and the main thread's own miss (its rows pinned by its own lease) does too. */
static void test_crossed_leases(void **state) {
    fixture *f = *state;
    uint32_t old[4] = {0, 1, 2, 3};
    hz_generation *pin = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 2, old, 4, &pin), HZ_OK);
    crossed x = {.c = f->c};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, crossed_thread, &x), 0);
    while (!atomic_load(&x.stage)) usleep(100);
    /* B's second acquire holds the transaction lock from here on: it cannot end while the pin lasts */
    for (;;) {
        if (pthread_mutex_trylock(&f->c->txn_mu) != 0) break;
        pthread_mutex_unlock(&f->c->txn_mu);
        usleep(100);
    }
    usleep(2000); /* past its first look at the rows, into the wait (not needed for correctness) */
    hz_generation *l = NULL;
    uint32_t g3[1] = {9};
    assert_int_equal(hz_generation_acquire(f->c, 2, g3, 1, &l), HZ_ECAPACITY);
    assert_non_null(strstr(hz_last_error_message(), "this thread still holds"));
    pthread_join(t, NULL);
    if (x.status != HZ_ECAPACITY) fprintf(stderr, "B: %s: %s\n", hz_status_name(x.status), x.msg);
    assert_int_equal(x.status, HZ_ECAPACITY);
    assert_non_null(strstr(x.msg, "wait for this transaction to end"));
    tu_check_invariants(f->c);
    assert_int_equal(hz_generation_release(pin, NULL), HZ_OK);
    tu_acquire_check_release(f->c, f->b, 2, g3, 1); /* both work once the pin is gone */
    uint32_t g2[1] = {8};
    tu_acquire_check_release(f->c, f->b, 2, g2, 1);
    tu_check_invariants(f->c);
}

static void test_multi_round_group(void **state) {
    int transport = *(const int *)*state;
    hz_host_backing *b = tu_backing(2, 24, 2, 5);
    hz_device *d = NULL;
    assert_int_equal(hz_device_open("cpu", &d), HZ_OK);
    hz_cache_options o;
    tu_options(&o, transport);
    o.capacity = 8; /* spare rows default to top-k = 2 */
    hz_cache *c = NULL;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    tu_after_create(c);
    assert_int_equal(tu_stat(c, "spare_rows"), 2);
    uint32_t limit = 0;
    assert_int_equal(hz_cache_group_limit(c, &limit), HZ_OK);
    assert_int_equal(limit, 8);
    /* 7 misses and a hit: 4 rounds of at most 2 rows, none evicting the group */
    uint32_t g[8] = {23, 8, 9, 10, 0, 11, 12, 13};
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(c, 1, g, 8, &l), HZ_OK);
    assert_int_equal(hz_generation_id(l), 5);
    assert_int_equal(tu_stat(c, "rounds"), 4);
    assert_int_equal(tu_stat(c, "misses"), 7);
    char sizes[64];
    tu_round_sizes(c, sizes, sizeof sizes); /* three rounds of two blobs, one of one */
    assert_string_equal(sizes, "1:1 2:3");
    assert_int_equal(tu_stat(c, "miss_transfer_bytes"), 7 * tu_row_bytes(b));
    assert_int_equal(tu_stat(c, "hits"), 1);
    assert_int_equal(tu_stat(c, "miss_latency_us.count"), 1);
    tu_check_rows(b, l, g, 8);
    tu_check_invariants(c);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

static void test_lru_order(void **state) {
    fixture *f = *state;
    hz_generation *l = NULL;
    /* touch 0, then 2, then 3; 1 stays least recently used, then 0 */
    uint32_t seq[3] = {0, 2, 3};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(hz_generation_acquire(f->c, 0, &seq[i], 1, &l), HZ_OK);
        assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    }
    uint32_t m = 12;
    assert_int_equal(hz_generation_acquire(f->c, 0, &m, 1, &l), HZ_OK);
    uint32_t row;
    const void *addr;
    assert_int_equal(hz_generation_row(l, 1, &row, &addr), HZ_ERANGE);
    assert_int_equal(hz_generation_row(l, 0, &row, &addr), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    m = 13;
    assert_int_equal(hz_generation_acquire(f->c, 0, &m, 1, &l), HZ_OK);
    assert_int_equal(hz_generation_row(l, 0, &row, &addr), HZ_ERANGE);
    assert_int_equal(hz_generation_row(l, 2, &row, &addr), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    /* a group member is never its own victim even when least recently used: 2 is LRU now */
    uint32_t g[4] = {2, 14, 15, 12};
    tu_acquire_check_release(f->c, f->b, 0, g, 4);
    tu_check_invariants(f->c);
}

static void test_bad_input(void **state) {
    fixture *f = *state;
    char *s = NULL;
    assert_int_equal(hz_cache_stats_json(f->c, &s), HZ_OK);
    cJSON *jb = cJSON_Parse(s); /* parsed whole: the report has no fixed length */
    hz_free(s);
    assert_non_null(jb);

    hz_generation *l = (hz_generation *)0x1;
    uint32_t ok[2] = {0, 1};
    assert_int_equal(hz_generation_acquire(f->c, 3, ok, 2, &l), HZ_ERANGE);
    assert_null(l);
    assert_non_null(strstr(hz_last_error_message(), "layer 3"));
    uint32_t far[2] = {0, 16};
    assert_int_equal(hz_generation_acquire(f->c, 0, far, 2, &l), HZ_ERANGE);
    assert_non_null(strstr(hz_last_error_message(), "expert 16"));
    uint32_t dup[3] = {5, 6, 5};
    assert_int_equal(hz_generation_acquire(f->c, 0, dup, 3, &l), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), "twice"));
    uint32_t big[5] = {0, 1, 2, 3, 4};
    assert_int_equal(hz_generation_acquire(f->c, 0, big, 5, &l), HZ_ECAPACITY);
    assert_non_null(strstr(hz_last_error_message(), "capacity"));
    assert_int_equal(hz_generation_acquire(f->c, 0, ok, 0, &l), HZ_EINVAL);
    assert_int_equal(hz_generation_acquire(f->c, 0, NULL, 2, &l), HZ_EINVAL);
    assert_int_equal(hz_generation_acquire(NULL, 0, ok, 2, &l), HZ_EINVAL);
    assert_int_equal(hz_generation_acquire(f->c, 0, ok, 2, NULL), HZ_EINVAL);

    /* foreign handles: never dereferenced, rejected with EINVAL */
    assert_int_equal(hz_generation_release(NULL, NULL), HZ_EINVAL);
    int local = 0;
    assert_int_equal(hz_generation_release((hz_generation *)&local, NULL), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), "not a live lease"));
    assert_int_equal(hz_generation_release((hz_generation *)(uintptr_t)0xdeadbeef0ull, NULL), HZ_EINVAL);
    /* double release */
    assert_int_equal(hz_generation_acquire(f->c, 0, ok, 2, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    assert_int_equal(hz_generation_release(l, NULL), HZ_EINVAL);
    /* an event from another device: refused, the lease stays live */
    hz_device *d2 = NULL;
    hz_event *ev2 = NULL;
    assert_int_equal(hz_device_open("cpu", &d2), HZ_OK);
    assert_int_equal(hz_event_create(d2, &ev2), HZ_OK);
    assert_int_equal(hz_generation_acquire(f->c, 0, ok, 2, &l), HZ_OK);
    assert_int_equal(hz_generation_release(l, ev2), HZ_EINVAL);
    assert_int_equal(tu_stat(f->c, "leases_active"), 1);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    hz_event_destroy(ev2);
    assert_int_equal(hz_device_close(d2), HZ_OK);

    assert_int_equal(hz_cache_stats_json(f->c, &s), HZ_OK);
    cJSON *ja = cJSON_Parse(s);
    hz_free(s);
    assert_non_null(ja);
    /* only the two good acquires changed anything: same generation, no transactions */
    const char *same[] = {"generation", "misses", "publications", "evictions", "failed_transactions", "leases_active"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        assert_true(cJSON_GetObjectItem(jb, same[i])->valuedouble == cJSON_GetObjectItem(ja, same[i])->valuedouble);
    assert_int_equal(cJSON_GetObjectItem(ja, "hits")->valuedouble, cJSON_GetObjectItem(jb, "hits")->valuedouble + 4);
    cJSON_Delete(jb);
    cJSON_Delete(ja);
    tu_check_invariants(f->c);
}

static void test_destroy_busy(void **state) {
    fixture *f = *state;
    uint32_t g[1] = {0};
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(f->c, 0, g, 1, &l), HZ_OK);
    assert_int_equal(hz_cache_destroy(f->c), HZ_EBUSY);
    assert_non_null(strstr(hz_last_error_message(), "lease"));
    assert_int_equal(hz_device_close(f->d), HZ_EBUSY);
    assert_int_equal(hz_host_backing_close(f->b), HZ_EBUSY);
    /* still fully usable */
    tu_check_rows(f->b, l, g, 1);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    hz_cache_model_add(f->c);
    assert_int_equal(hz_cache_destroy(f->c), HZ_EBUSY);
    hz_cache_model_remove(f->c);
}

static void test_create_errors(void **state) {
    (void)state;
    hz_host_backing *b = tu_backing(2, 8, 4, 3);
    hz_device *d = NULL;
    assert_int_equal(hz_device_open("cpu", &d), HZ_OK);
    hz_cache *c = (hz_cache *)0x1;
    hz_cache_options o;

    hz_cache_options_init(&o);
    o.capacity = 9;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_ECAPACITY);
    assert_null(c);
    assert_non_null(strstr(hz_last_error_message(), "capacity 9"));

    hz_cache_options_init(&o);
    o.spare_rows = 3;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_ECAPACITY);
    assert_non_null(strstr(hz_last_error_message(), "spare rows 3"));

    hz_cache_options_init(&o);
    o.staging_bytes = tu_row_bytes(b) - 1;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_ECAPACITY);
    assert_non_null(strstr(hz_last_error_message(), "staging"));

    uint32_t place[4] = {0, 1, 2, 3};
    hz_cache_options_init(&o);
    o.capacity = 2;
    o.initial_placement = place;
    o.initial_placement_count = 3;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_EINVAL);
    o.initial_placement_count = 4;
    place[3] = 8;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_ERANGE);
    place[3] = 2;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), "twice"));

    hz_cache_options_init(&o);
    o.eviction = 7;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_EUNSUPPORTED);

    /* transports: unknown values are refused, as before the new ones existed */
    const int32_t bad_transports[] = {4, -1, 1000};
    for (size_t i = 0; i < sizeof bad_transports / sizeof *bad_transports; i++) {
        hz_cache_options_init(&o);
        o.transport = bad_transports[i];
        assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_EUNSUPPORTED);
        assert_null(c);
        assert_non_null(strstr(hz_last_error_message(), "transport"));
    }
    hz_cache_options_init(&o);
    o.transport = HZ_TRANSPORT_THREADED;
    o.staging_threads = 257;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), "staging_threads"));
    /* the registered transport has no staging, so a staging size below one blob does not matter */
    hz_cache_options_init(&o);
    o.transport = HZ_TRANSPORT_REGISTERED;
    o.staging_bytes = 1;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    c = (hz_cache *)0x1;
    assert_int_equal(hz_cache_create(NULL, d, NULL, &c), HZ_EINVAL);
    assert_int_equal(hz_cache_create(b, NULL, NULL, &c), HZ_EINVAL);

    /* nothing leaked a child registration */
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

static void test_caller_placement_and_defaults(void **state) {
    int transport = *(const int *)*state;
    hz_host_backing *b = tu_backing(2, 8, 2, 4);
    hz_device *d = NULL;
    assert_int_equal(hz_device_open("auto", &d), HZ_OK); /* no CUDA here: falls back to cpu */
    assert_string_equal(hz_device_name(d), "cpu");
    uint32_t place[6] = {7, 5, 3, 0, 1, 6};
    hz_cache_options o;
    tu_options(&o, transport);
    o.capacity = 3;
    o.initial_placement = place;
    o.initial_placement_count = 6;
    hz_cache *c = NULL;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    assert_int_equal(tu_acquire_check_release(c, b, 0, place, 3), 1);
    assert_int_equal(tu_acquire_check_release(c, b, 1, place + 3, 3), 1);
    /* by default one slot per spare row (top-2 here), at least two; registered: no staging at all */
    assert_int_equal(tu_stat(c, "staging_bytes"), transport == HZ_TRANSPORT_REGISTERED ? 0 : 2 * tu_row_bytes(b));
    /* staging copies use streaming stores by default where the CPU has them */
#if defined(__x86_64__)
    assert_int_equal(tu_stat_bool(c, "staging_streaming"), transport != HZ_TRANSPORT_REGISTERED);
#else
    assert_int_equal(tu_stat_bool(c, "staging_streaming"), 0);
#endif
    assert_int_equal(hz_cache_destroy(c), HZ_OK);

    /* HZ_TXN_STREAM=0: memcpy into staging; misses are served and checked all the same */
    setenv("HZ_TXN_STREAM", "0", 1);
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    unsetenv("HZ_TXN_STREAM");
    assert_int_equal(tu_stat_bool(c, "staging_streaming"), 0);
    const uint32_t other[3] = {2, 4, 5}; /* layer 0 holds 7, 5, 3: two misses, one round */
    assert_int_equal(tu_acquire_check_release(c, b, 0, other, 3), 2);
    assert_int_equal(tu_stat(c, "misses"), 2);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);

    /* 12 spare rows: the default staging stops at 8 slots. With HZ_TXN_SPIN_US=0 the threads sleep at
     * once (no polling); misses are served all the same. */
    tu_options(&o, transport);
    o.capacity = 3;
    o.spare_rows = 5;
    setenv("HZ_TXN_SPIN_US", "0", 1);
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    unsetenv("HZ_TXN_SPIN_US");
    assert_int_equal(tu_stat(c, "staging_slots"), transport == HZ_TRANSPORT_REGISTERED ? 0 : 5);
    const uint32_t grp[3] = {0, 5, 6}; /* canonical placement 0, 1, 2: two misses */
    assert_int_equal(tu_acquire_check_release(c, b, 0, grp, 3), 2); /* published by the miss round */
    assert_int_equal(tu_stat(c, "misses"), 2);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    o.spare_rows = 12;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    assert_int_equal(tu_stat(c, "staging_slots"), transport == HZ_TRANSPORT_REGISTERED ? 0 : 8);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);

    /* capacity 0 = every expert resident; nothing ever misses */
    tu_options(&o, transport);
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    assert_int_equal(tu_stat(c, "capacity"), 8);
    uint32_t all[8] = {7, 6, 5, 4, 3, 2, 1, 0};
    tu_acquire_check_release(c, b, 1, all, 8);
    assert_int_equal(tu_stat(c, "misses"), 0);
    tu_check_invariants(c);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

static void test_stats_json_fields(void **state) {
    fixture *f = *state;
    char *s = NULL;
    assert_int_equal(hz_cache_stats_json(f->c, &s), HZ_OK);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    const char *keys[] = {"hits", "misses", "h2d_bytes", "h2d_copies", "expert_d2h_bytes", "backing_writes",
                          "request_source_reads", "request_hashing", "publications", "evictions", "retired_rows",
                          "staging_high_water", "generation", "capacity", "spare_rows"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        cJSON *k = cJSON_GetObjectItem(j, keys[i]);
        if (!k) fprintf(stderr, "missing %s\n", keys[i]);
        assert_true(k && cJSON_IsNumber(k));
    }
    assert_string_equal(cJSON_GetObjectItem(j, "state")->valuestring, "OK");
    cJSON *lat = cJSON_GetObjectItem(j, "miss_latency_us");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(lat, "mean"))); /* no sample yet: not an invented 0 */
    cJSON *notes = cJSON_GetObjectItem(j, "notes");
    assert_non_null(strstr(cJSON_GetObjectItem(notes, "backing_writes")->valuestring, "mprotect"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "invariant_checker")));
    cJSON_Delete(j);
    hz_free(s);
    /* the initial fill kept every staging slot in use (by default one per spare row: top-4 here);
     * registered has none */
    assert_int_equal(tu_stat(f->c, "staging_high_water"),
                     f->transport == HZ_TRANSPORT_REGISTERED ? 0 : 4 * tu_row_bytes(f->b));
    char name[32];
    tu_stat_str(f->c, "transport", name, sizeof name);
    assert_string_equal(name, tu_transport_name(f->transport));
    cJSON *js = NULL;
    {
        char *s2 = NULL;
        assert_int_equal(hz_cache_stats_json(f->c, &s2), HZ_OK);
        js = cJSON_Parse(s2);
        hz_free(s2);
    }
    const cJSON *pw = cJSON_GetObjectItem(js, "staging_piecewise");
    assert_true(cJSON_IsBool(pw));
    assert_int_equal(cJSON_IsTrue(pw), (f->transport & TU_PIECEWISE) != 0);
    cJSON_Delete(js);
    if (f->transport == HZ_TRANSPORT_REGISTERED) {
        assert_int_equal(tu_stat(f->c, "staging_copy_bytes"), 0);
        assert_true(tu_stat(f->c, "staging_gbps") < 0); /* null: nothing was copied, no invented rate */
    } else {
        assert_int_equal(tu_stat(f->c, "staging_copy_bytes"), 12 * tu_row_bytes(f->b));
        assert_true(tu_stat(f->c, "staging_gbps") > 0);
    }

    assert_int_equal(hz_device_describe_json(f->d, &s), HZ_OK);
    j = cJSON_Parse(s);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "backend")->valuestring, "cpu");
    cJSON *h2d = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "transfers"), "h2d"), "expert");
    assert_int_equal(cJSON_GetObjectItem(h2d, "bytes")->valuedouble, 12 * tu_row_bytes(f->b));
    cJSON_Delete(j);
    hz_free(s);
}

/* Log lines of one test, for the auto transport's fallback note. */
static char g_log[1024];
static void keep_log(void *user, int level, const char *message) {
    (void)user;
    (void)level;
    snprintf(g_log, sizeof g_log, "%s", message);
}

/* HZ_TRANSPORT_AUTO: registered below full residency, threaded at it, threaded when the registration
 * fails (a fault on host_register), with a log line saying so; the stats name the transport chosen
 * and "auto" as the one requested; explicit transports name themselves in both fields. */
static void test_transport_auto(void **state) {
    (void)state;
    hz_host_backing *b = tu_backing(3, 16, 4, 11);
    const uint64_t hash0 = tu_routed_hash(b);
    hz_device *d = NULL;
    assert_int_equal(hz_device_open("cpu", &d), HZ_OK);
    const struct {
        uint32_t capacity;
        const char *chosen;
    } cases[] = {{4, "registered"}, {15, "registered"}, {0, "threaded"}, {16, "threaded"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        hz_cache_options o;
        hz_cache_options_init(&o);
        o.capacity = cases[i].capacity;
        o.transport = HZ_TRANSPORT_AUTO;
        hz_cache *c = NULL;
        assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
        char name[32];
        tu_stat_str(c, "transport", name, sizeof name);
        assert_string_equal(name, cases[i].chosen);
        tu_stat_str(c, "transport_requested", name, sizeof name);
        assert_string_equal(name, "auto");
        uint32_t g[4] = {12, 13, 14, 15}; /* misses below full residency */
        tu_acquire_check_release(c, b, 1, g, 4);
        tu_check_invariants(c);
        assert_int_equal(hz_cache_destroy(c), HZ_OK);
    }
    /* an explicit transport is its own request */
    hz_cache_options o;
    hz_cache_options_init(&o);
    o.capacity = 4;
    o.transport = HZ_TRANSPORT_REGISTERED;
    hz_cache *c = NULL;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    char name[32];
    tu_stat_str(c, "transport_requested", name, sizeof name);
    assert_string_equal(name, "registered");
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    /* input errors are not retried: the first attempt's status and message stand */
    o.transport = HZ_TRANSPORT_AUTO;
    o.capacity = 17;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_ECAPACITY);
    assert_null(c);
    assert_non_null(strstr(hz_last_error_message(), "capacity"));
    assert_int_equal(hz_device_close(d), HZ_OK);

    /* the registration refused: threaded, and the log says why */
    hz_backend *fault = NULL;
    d = tu_fault_device(&fault);
    hz_backend_fault_arm(fault, HZ_FAULT_HOST_REGISTER, 1, HZ_EDEVICE);
    g_log[0] = '\0';
    hz_set_log_callback(keep_log, NULL, HZ_LOG_INFO);
    o.capacity = 4;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    hz_set_log_callback(NULL, NULL, 0);
    assert_int_equal(hz_backend_fault_fired(fault), 1);
    tu_stat_str(c, "transport", name, sizeof name);
    assert_string_equal(name, "threaded");
    assert_non_null(strstr(g_log, "threaded instead"));
    assert_non_null(strstr(g_log, "HZ_EDEVICE"));
    uint32_t g[4] = {12, 13, 14, 15};
    tu_acquire_check_release(c, b, 2, g, 4);
    tu_check_invariants(c);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    /* a refusal the host does not explain (not a device or memory error) is reported, not retried */
    hz_backend_fault_arm(fault, HZ_FAULT_HOST_REGISTER, 1, HZ_EINVAL);
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_EINVAL);
    assert_null(c);
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(tu_routed_hash(b), hash0);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

static void test_device_names(void **state) {
    (void)state;
    hz_device *d = (hz_device *)0x1;
#ifdef HZ_HAVE_CUDA
    /* a CUDA build: cuda:0 opens where there is a GPU, else fails as a device error (CI has none) */
    int st = hz_device_open("cuda:0", &d);
    if (st == HZ_OK) {
        assert_int_equal(hz_device_close(d), HZ_OK);
    } else {
        assert_int_equal(st, HZ_EDEVICE);
        assert_null(d);
        assert_true(strlen(hz_last_error_message()) > 0);
    }
    d = (hz_device *)0x1;
#else
    assert_int_equal(hz_device_open("cuda:0", &d), HZ_EUNSUPPORTED);
    assert_null(d);
    assert_non_null(strstr(hz_last_error_message(), "without CUDA"));
#endif
    assert_int_equal(hz_device_open("gpu", &d), HZ_EINVAL);
    assert_int_equal(hz_device_open("cuda:x", &d), HZ_EINVAL);
    assert_int_equal(hz_device_open(NULL, &d), HZ_EINVAL);
    assert_int_equal(hz_device_close(NULL), HZ_OK);
}

/* ---- the cpu backend: asynchronous copies, ordered queues, real events ---- */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

static void gate_wait(void *arg) {
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A stand-in for the decode step's gated experts: work on the compute queue that waits for this host,
 * up to 5 s (then it notes that it gave up, as the gate kernel does). */
typedef struct host_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, gave_up;
} host_gate;

static void host_gate_wait(void *arg) {
    host_gate *g = arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&g->mu);
    while (!g->open && !g->gave_up)
        if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) != 0) g->gave_up = 1;
    pthread_mutex_unlock(&g->mu);
}

/* An acquire with misses, while the compute queue holds work that waits for this thread, returns without
 * waiting for it: nothing on the miss path, the invariant checker's reads of the new rows included
 * (debug builds), waits for the compute queue. Before, those reads were queued there and synchronised
 * it, and every GPU miss with the experts ahead stalled until the gate gave up (scripts/demo's build). */
static void test_acquire_ignores_compute_queue(void **state) {
    fixture *f = *state;
    host_gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    assert_int_equal(hz_backend_cpu_enqueue_host_fn(f->d->be, HZ_QUEUE_COMPUTE, host_gate_wait, &g), HZ_OK);
    uint32_t grp[4] = {4, 5, 6, 7};
    tu_acquire_check_release(f->c, f->b, 0, grp, 4); /* four misses: a transaction and a publication */
    pthread_mutex_lock(&g.mu);
    const int gave_up = g.gave_up;
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(f->d->be->ops->queue_sync(f->d->be, HZ_QUEUE_COMPUTE), HZ_OK);
    assert_false(gave_up);
    tu_check_invariants(f->c);
}

static void test_cpu_backend_events(void **state) {
    (void)state;
    hz_device *d = NULL;
    assert_int_equal(hz_device_open("cpu", &d), HZ_OK);
    hz_backend *be = d->be;
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    uint8_t src[64], dst[64];
    memset(src, 7, sizeof src);
    memset(dst, 0, sizeof dst);
    /* the copy queue is held by a gate: the copy is enqueued but has not run */
    assert_int_equal(hz_backend_cpu_enqueue_host_fn(be, HZ_QUEUE_COPY, gate_wait, &g), HZ_OK);
    assert_int_equal(hz_backend_copy_h2d(be, HZ_QUEUE_COPY, dst, src, sizeof src, HZ_PURPOSE_WEIGHTS), HZ_OK);
    hz_bevent *ev = NULL;
    assert_int_equal(be->ops->event_create(be, &ev), HZ_OK);
    assert_int_equal(be->ops->event_query(be, ev), HZ_OK); /* never recorded = complete */
    assert_int_equal(be->ops->event_record(be, ev, HZ_QUEUE_COPY), HZ_OK);
    /* the compute queue waits on the copy's event; a public event recorded after it stays pending */
    assert_int_equal(be->ops->queue_wait_event(be, HZ_QUEUE_COMPUTE, ev), HZ_OK);
    hz_event *pub = NULL;
    assert_int_equal(hz_event_create(d, &pub), HZ_OK);
    assert_int_equal(hz_event_record(pub), HZ_OK);
    usleep(20000);
    assert_int_equal(be->ops->event_query(be, ev), HZ_EBUSY);
    assert_int_equal(hz_event_query(pub), HZ_EBUSY);
    assert_int_equal(dst[0], 0);
    /* destroying an event whose marker is still queued is allowed */
    be->ops->event_destroy(be, ev);
    gate_open(&g);
    assert_int_equal(hz_event_synchronize(pub), HZ_OK);
    assert_int_equal(dst[0], 7);
    assert_int_equal(hz_device_close(d), HZ_EBUSY); /* the event is a child */
    hz_event_destroy(pub);
    assert_int_equal(atomic_load(&be->bytes[HZ_H2D][HZ_PURPOSE_WEIGHTS]), 64);
    assert_int_equal(be->ops->queue_sync(be, HZ_QUEUE_COPY), HZ_OK);
    assert_int_equal(hz_device_close(d), HZ_OK);
}

static void test_fault_backend_counts(void **state) {
    (void)state;
    hz_backend *fb = NULL;
    hz_device *d = tu_fault_device(&fb);
    uint8_t a[16] = {1}, b2[16] = {0};
    hz_backend_fault_arm(fb, HZ_FAULT_COPY_H2D, 2, HZ_EDEVICE);
    assert_int_equal(hz_backend_copy_h2d(fb, HZ_QUEUE_COPY, b2, a, 16, HZ_PURPOSE_EXPERT), HZ_OK);
    assert_int_equal(hz_backend_copy_h2d(fb, HZ_QUEUE_COPY, b2, a, 16, HZ_PURPOSE_EXPERT), HZ_EDEVICE);
    assert_non_null(strstr(hz_last_error_message(), "injected"));
    assert_int_equal(hz_backend_copy_h2d(fb, HZ_QUEUE_COPY, b2, a, 16, HZ_PURPOSE_EXPERT), HZ_OK);
    /* the refused copy is not counted */
    assert_int_equal(atomic_load(&fb->copies[HZ_H2D][HZ_PURPOSE_EXPERT]), 2);
    assert_int_equal(hz_backend_fault_fired(fb), 1);
    hz_event *e = NULL;
    assert_int_equal(hz_event_create(d, &e), HZ_OK);
    hz_backend_fault_arm_event_error(fb, 1, HZ_EDEVICE);
    assert_int_equal(hz_event_record(e), HZ_OK);
    assert_int_equal(hz_event_synchronize(e), HZ_EDEVICE);
    assert_int_equal(hz_event_record(e), HZ_OK); /* re-record clears it */
    assert_int_equal(hz_event_synchronize(e), HZ_OK);
    hz_event_destroy(e);
    assert_int_equal(hz_device_close(d), HZ_OK);
}

/* Registered: misses are copied straight from the backing; no staging is allocated, none is used, no
 * staging copy is made, and no expert byte travels device -> host. */
static void test_registered_no_staging(void **state) {
    (void)state;
    hz_host_backing *b = tu_backing(2, 16, 4, 13);
    uint64_t hash0 = tu_routed_hash(b);
    hz_device *d = NULL;
    assert_int_equal(hz_device_open("cpu", &d), HZ_OK);
    assert_int_equal(hz_backend_cpu_set_copy_delay(d->be, 500), HZ_OK);
    hz_cache_options o;
    tu_options(&o, HZ_TRANSPORT_REGISTERED);
    o.capacity = 4;
    hz_cache *c = NULL;
    assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_OK);
    uint64_t region = 0;
    assert_non_null(hz_backing_routed_region(b, &region));
    assert_int_equal(tu_stat(c, "registered_bytes"), region);
    for (uint32_t round = 0; round < 4; round++) {
        uint32_t g[4] = {4 * round, 4 * round + 1, 4 * round + 2, 4 * round + 3};
        tu_acquire_check_release(c, b, round % 2, g, 4);
    }
    char name[32];
    tu_stat_str(c, "transport", name, sizeof name);
    assert_string_equal(name, "registered");
    assert_int_equal(tu_stat(c, "misses"), 12); /* round 0 of layer 0 hit: experts 0..3 are resident */
    assert_int_equal(tu_stat(c, "h2d_copies"), 8 + 12);
    assert_int_equal(tu_stat(c, "h2d_bytes"), 20 * tu_row_bytes(b));
    assert_int_equal(tu_stat(c, "staging_bytes"), 0);
    assert_int_equal(tu_stat(c, "staging_slots"), 0);
    assert_int_equal(tu_stat(c, "staging_high_water"), 0);
    assert_int_equal(tu_stat(c, "staging_copies"), 0);
    assert_int_equal(tu_stat(c, "staging_copy_bytes"), 0);
    assert_int_equal(tu_stat(c, "staging_threads"), 0);
    assert_int_equal(tu_stat(c, "expert_d2h_bytes"), 0);
    tu_check_invariants(c);
    tu_close(c, d, b, hash0);
}

/* A threaded cache of capacity 4 on a new cpu device (*d) with `threads` copy threads and three staging
 * slots: an odd slot count, so slots are reused out of step with items. */
static hz_cache *threaded_cache(hz_host_backing *b, uint32_t threads, hz_device **d) {
    assert_int_equal(hz_device_open("cpu", d), HZ_OK);
    hz_cache_options o;
    tu_options(&o, HZ_TRANSPORT_THREADED);
    o.capacity = 4;
    o.staging_threads = threads;
    o.staging_bytes = 3 * tu_row_bytes(b);
    hz_cache *c = NULL;
    assert_int_equal(hz_cache_create(b, *d, &o, &c), HZ_OK);
    return c;
}

/* Threaded, more copy threads than CPUs and the smallest pieces: threads are preempted between seeing
 * a piece left and claiming it, so claims often land on a fill whose pieces are all taken (or on the
 * next fill of the same slot). Every piece is still copied exactly once (staging_chunks is exact) and
 * every row holds its blob, whole-blob and piecewise. */
static void test_threaded_claims_exact(void **state) {
    (void)state;
    for (int piecewise = 0; piecewise < 2; piecewise++) {
        hz_host_backing *b = tu_backing(2, 32, 4, 23);
        hz_device *d = NULL;
        hz_cache *c = threaded_cache(b, 8, &d);
        hz_transactor *t = hz_cache_transactor(c);
        assert_int_equal(hz_transactor_set_piece_bytes(t, 64), HZ_OK);
        assert_int_equal(hz_transactor_set_piecewise(t, piecewise), HZ_OK);
        const uint32_t pieces = piecewise ? 16 : 8; /* 8 threads; piecewise: two waves */
        const double chunks0 = tu_stat(c, "staging_chunks"), copies0 = tu_stat(c, "staging_copies");
        const uint32_t rounds = 200;
        for (uint32_t r = 0; r < rounds; r++) {
            const uint32_t base = 4 * (r % 8);
            uint32_t g[4] = {base, base + 1, base + 2, base + 3};
            tu_acquire_check_release(c, b, r % 2, g, 4);
        }
        const double copies = tu_stat(c, "staging_copies") - copies0;
        assert_true(copies >= 4.0 * (rounds - 16)); /* all but the first rounds of each layer miss all four */
        assert_true(tu_stat(c, "staging_chunks") - chunks0 == copies * pieces);
        assert_true(tu_stat(c, "staging_copy_bytes") == tu_stat(c, "staging_copies") * tu_row_bytes(b));
        assert_int_equal(tu_stat(c, "staging_slots_busy"), 0);
        tu_check_invariants(c);
        assert_int_equal(hz_cache_destroy(c), HZ_OK);
        assert_int_equal(hz_device_close(d), HZ_OK);
        assert_int_equal(hz_host_backing_close(b), HZ_OK);
    }
}

/* Threaded: every blob is split into one piece per thread, the pieces land in staging, every byte is
 * counted once, and the rows hold the backing's bytes. */
static void test_threaded_pieces(void **state) {
    (void)state;
    hz_host_backing *b = tu_backing(2, 16, 4, 17);
    hz_device *d = NULL;
    hz_cache *c = threaded_cache(b, 4, &d);
    assert_int_equal(tu_stat(c, "staging_threads"), 4);
    /* the initial fill: 8 blobs of 50 KB, less than one 256 KiB piece each, and piecewise by default:
     * each blob in two waves of one piece */
    assert_int_equal(tu_stat(c, "staging_chunks"), 8 * 2);
    assert_int_equal(hz_transactor_set_piecewise(hz_cache_transactor(c), 0), HZ_OK);
    assert_int_equal(hz_transactor_set_piece_bytes(hz_cache_transactor(c), 1024), HZ_OK);
    assert_int_equal(hz_backend_cpu_set_copy_delay(d->be, 300), HZ_OK);
    for (uint32_t round = 1; round < 4; round++) {
        uint32_t g[4] = {4 * round, 4 * round + 1, 4 * round + 2, 4 * round + 3};
        tu_acquire_check_release(c, b, round % 2, g, 4);
    }
    assert_int_equal(tu_stat(c, "staging_copies"), 8 + 12);
    assert_int_equal(tu_stat(c, "staging_chunks"), 8 * 2 + 12 * 4);
    assert_int_equal(tu_stat(c, "staging_copy_bytes"), 20 * tu_row_bytes(b));
    assert_int_equal(tu_stat(c, "h2d_copies"), 20);
    assert_true(tu_stat(c, "staging_high_water") <= 3 * tu_row_bytes(b));
    assert_true(tu_stat(c, "staging_gbps") > 0);
    /* 12 blobs of 4 pieces, every H2D delayed 300 us: the copies take time, and so do the threads'
     * reaction to a hand-out and the loading thread's to a blob's last piece */
    assert_true(tu_stat(c, "staging_fill_wait_seconds") > 0);
    assert_true(tu_stat(c, "staging_fill_span_seconds") > 0);
    assert_true(tu_stat(c, "staging_fill_lag_seconds") > 0);
    assert_int_equal(tu_stat(c, "staging_slots_busy"), 0);
    assert_int_equal(tu_stat(c, "expert_d2h_bytes"), 0);
    tu_check_invariants(c);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

/* The staging copies' streaming routine, at each store width this CPU has, copies every byte for every
 * length and alignment and touches nothing outside [dst, dst + n): heads before the first 16- or 64-byte
 * boundary, bodies and tails, against memcpy. */
static void test_streaming_copy(void **state) {
    (void)state;
    enum { MAX = 1000, PAD = 64 };
    uint8_t *src = malloc(MAX + PAD), *dst = malloc(MAX + 2 * PAD), *want = malloc(MAX + 2 * PAD);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(want);
    for (size_t i = 0; i < MAX + PAD; i++) src[i] = (uint8_t)(i * 131u + 7u);
    const size_t lens[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 255, 256, 257, 511, 777, MAX};
    const int widths[2] = {0, 16};
    int used[2] = {-1, -1};
    for (int wi = 0; wi < 2; wi++)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
            for (size_t da = 0; da < 64; da += 5)
                for (size_t sa = 0; sa < 20; sa += 7) {
                    memset(dst, 0xA5, MAX + 2 * PAD);
                    memset(want, 0xA5, MAX + 2 * PAD);
                    memcpy(want + PAD + da, src + sa, lens[li]);
                    used[wi] = hz_txn_copy_streaming(dst + PAD + da, src + sa, lens[li], widths[wi]);
                    assert_memory_equal(dst, want, MAX + 2 * PAD);
                }
#if defined(__x86_64__)
    assert_true(used[0] == 64 || used[0] == 16); /* 64 where the CPU has AVX-512F */
    assert_int_equal(used[1], 16);
#else
    assert_int_equal(used[0], 0);
#endif
    printf("streaming copy: widest stores %d bytes\n", used[0]);
    free(src);
    free(dst);
    free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streaming_copy),
        TU_TRANSPORT_TESTS(test_initial_placement_canonical, setup, teardown),
        TU_TRANSPORT_TESTS(test_miss_publishes_new_generation, setup, teardown),
        TU_TRANSPORT_TESTS(test_lease_pins_old_generation, setup, teardown),
        TU_TRANSPORT_TESTS(test_self_pinned_spares_report_capacity, setup, teardown),
        TU_TRANSPORT_TESTS(test_hold_current_generation, setup, teardown),
        TU_TRANSPORT_TESTS(test_waits_for_other_thread_lease, setup, teardown),
        TU_TRANSPORT_TESTS(test_crossed_leases, setup, teardown),
        TU_TRANSPORT_TESTS(test_acquire_ignores_compute_queue, setup, teardown),
        TU_TRANSPORT_TESTS(test_lru_order, setup, teardown),
        TU_TRANSPORT_TESTS(test_bad_input, setup, teardown),
        TU_TRANSPORT_TESTS(test_destroy_busy, setup, teardown),
        TU_TRANSPORT_TESTS(test_stats_json_fields, setup, teardown),
        TU_TRANSPORT_TESTS(test_multi_round_group, NULL, NULL),
        TU_TRANSPORT_TESTS(test_caller_placement_and_defaults, NULL, NULL),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_registered_no_staging),
        cmocka_unit_test(test_threaded_pieces),
        cmocka_unit_test(test_threaded_claims_exact),
        cmocka_unit_test(test_transport_auto),
        cmocka_unit_test(test_device_names),
        cmocka_unit_test(test_cpu_backend_events),
        cmocka_unit_test(test_fault_backend_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
