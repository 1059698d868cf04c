/* The cache under threads: 8 threads acquire random top-k groups over 8 layers (uniform and Zipf-skewed
 * popularity), hold their leases for random times, and release most of them with consumer events that
 * complete late: a "kernel" enqueued on the cpu backend's compute queue sleeps, then reads every row of
 * the group and compares it with the backing. If a row were reused before its consumer finished, or
 * handed out before its transfer completed, a comparison fails (and ThreadSanitizer sees the race).
 * Every mode runs with every transport; each run is bounded in wall time (HZ_STRESS_SECONDS, default
 * 0.8 per mode and transport, 12 runs). */
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "cache_test_util.h"

#define THREADS 8
#define LAYERS 8
#define EXPERTS 32
#define TOPK 4

static _Atomic int g_failed;
static char g_fail_msg[512];
static pthread_mutex_t g_fail_mu = PTHREAD_MUTEX_INITIALIZER;

static void fail_once(const char *fmt, ...) HZ_PRINTF(1, 2);
static void fail_once(const char *fmt, ...) {
    pthread_mutex_lock(&g_fail_mu);
    if (!atomic_load(&g_failed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_fail_msg, sizeof g_fail_msg, fmt, ap);
        va_end(ap);
        atomic_store(&g_failed, 1);
    }
    pthread_mutex_unlock(&g_fail_mu);
}

typedef struct run {
    hz_host_backing *b;
    hz_device *d;
    hz_backend *cpu;
    hz_cache *c;
    int zipf;
    double deadline;
    double cdf[EXPERTS];          /* Zipf(1.1) by rank */
    uint32_t perm[LAYERS][EXPERTS]; /* rank -> expert, per layer */
    _Atomic uint64_t iterations, consumers, checks;
} run;

typedef struct consumer_job {
    const uint8_t *rows[TOPK];
    const uint8_t *blobs[TOPK];
    uint32_t experts[TOPK], n, layer;
    uint64_t row_bytes;
    unsigned delay_us;
    uint64_t gen;
} consumer_job;

/* Runs on the compute queue's worker: a kernel that reads the rows after the lease was released. */
static void consumer_kernel(void *arg) {
    consumer_job *j = arg;
    if (j->delay_us) usleep(j->delay_us);
    for (uint32_t i = 0; i < j->n; i++)
        if (memcmp(j->rows[i], j->blobs[i], (size_t)j->row_bytes) != 0)
            fail_once("consumer of generation %llu: layer %u expert %u changed under a pending consumer event",
                      (unsigned long long)j->gen, j->layer, j->experts[i]);
    free(j);
}

static void pick_group(run *r, uint64_t *rng, uint32_t layer, uint32_t *g) {
    uint32_t n = 0;
    while (n < TOPK) {
        uint32_t e;
        if (r->zipf) {
            double u = (double)(tu_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
            uint32_t k = 0;
            while (k + 1 < EXPERTS && r->cdf[k] < u) k++;
            e = r->perm[layer][k];
        } else {
            e = (uint32_t)(tu_rng_next(rng) % EXPERTS);
        }
        int dup = 0;
        for (uint32_t i = 0; i < n; i++) dup |= g[i] == e;
        if (!dup) g[n++] = e;
    }
}

typedef struct worker {
    run *r;
    int id;
    pthread_t t;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    run *r = w->r;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1) + (uint64_t)r->zipf;
    uint64_t row_bytes = tu_row_bytes(r->b);
    hz_event *ev = NULL;
    if (hz_event_create(r->d, &ev) != HZ_OK) {
        fail_once("event create: %s", hz_last_error_message());
        return NULL;
    }
    uint64_t last_gen = 0;
    uint64_t it = 0;
    while (!atomic_load(&g_failed) && hz_now_seconds() < r->deadline) {
        uint32_t layer = (uint32_t)(tu_rng_next(&rng) % LAYERS);
        uint32_t g[TOPK];
        pick_group(r, &rng, layer, g);
        hz_generation *lease = NULL;
        int st = hz_generation_acquire(r->c, layer, g, TOPK, &lease);
        if (st != HZ_OK) {
            fail_once("thread %d acquire: %s: %s", w->id, hz_status_name(st), hz_last_error_message());
            break;
        }
        uint64_t gen = hz_generation_id(lease);
        if (gen < last_gen) fail_once("thread %d saw generation %llu after %llu", w->id, (unsigned long long)gen,
                                      (unsigned long long)last_gen);
        last_gen = gen;
        consumer_job *j = calloc(1, sizeof *j);
        j->n = TOPK;
        j->layer = layer;
        j->row_bytes = row_bytes;
        j->gen = gen;
        for (uint32_t i = 0; i < TOPK; i++) {
            const void *addr = NULL;
            uint32_t row;
            if (hz_generation_row(lease, g[i], &row, &addr) != HZ_OK) {
                fail_once("row of a leased expert: %s", hz_last_error_message());
                break;
            }
            j->rows[i] = addr;
            j->blobs[i] = hz_backing_expert_blob(r->b, layer, g[i]);
            j->experts[i] = g[i];
            /* a reader never sees a row mid-transfer or holding another expert */
            if (memcmp(addr, j->blobs[i], (size_t)row_bytes) != 0)
                fail_once("thread %d: layer %u expert %u (row %u, generation %llu) does not hold its bytes at "
                          "acquire", w->id, layer, g[i], row, (unsigned long long)gen);
        }
        uint64_t mode = tu_rng_next(&rng) % 8;
        if (mode == 0) usleep((useconds_t)(tu_rng_next(&rng) % 300)); /* hold the lease a while */
        if (mode < 2) {
            /* synchronous consumer: read again, then release with no event */
            for (uint32_t i = 0; i < TOPK; i++)
                if (memcmp(j->rows[i], j->blobs[i], (size_t)row_bytes) != 0)
                    fail_once("thread %d: layer %u expert %u changed while leased", w->id, layer, g[i]);
            free(j);
            st = hz_generation_release(lease, NULL);
        } else {
            /* asynchronous consumer: its kernel runs later on the compute queue */
            j->delay_us = (unsigned)(tu_rng_next(&rng) % 400);
            if (hz_backend_cpu_enqueue_host_fn(r->cpu, HZ_QUEUE_COMPUTE, consumer_kernel, j) != HZ_OK) {
                free(j);
                fail_once("enqueue consumer: %s", hz_last_error_message());
            }
            st = hz_event_record(ev);
            if (st == HZ_OK) st = hz_generation_release(lease, ev);
            atomic_fetch_add(&r->consumers, 1);
        }
        if (st != HZ_OK) fail_once("thread %d release: %s: %s", w->id, hz_status_name(st), hz_last_error_message());
        if (w->id == 0 && it % 16 == 15) {
            char why[256];
            if (hz_cache_check_invariants(r->c, 1, why, sizeof why) != HZ_OK) fail_once("invariants: %s", why);
            atomic_fetch_add(&r->checks, 1);
        }
        if (w->id == 1 && it % 50 == 0) {
            char *s = NULL;
            if (hz_cache_stats_json(r->c, &s) != HZ_OK) fail_once("stats: %s", hz_last_error_message());
            hz_free(s);
        }
        it++;
    }
    atomic_fetch_add(&r->iterations, it);
    hz_event_destroy(ev);
    return NULL;
}

static double seconds_per_mode(void) {
    const char *s = getenv("HZ_STRESS_SECONDS");
    double v = s ? atof(s) : 0.8;
    return v > 0 ? v : 0.8;
}

static void stress(uint32_t capacity, uint32_t spare, uint32_t staging_blobs, int zipf, int transport) {
    run *r = calloc(1, sizeof *r);
    atomic_store(&g_failed, 0);
    r->b = tu_backing(LAYERS, EXPERTS, TOPK, 1234 + capacity);
    uint64_t hash0 = tu_routed_hash(r->b);
    assert_int_equal(hz_device_open("cpu", &r->d), HZ_OK);
    r->cpu = r->d->be;
    hz_cache_options o;
    tu_options(&o, transport);
    o.capacity = capacity;
    o.spare_rows = spare;
    o.staging_bytes = staging_blobs * tu_row_bytes(r->b);
    assert_int_equal(hz_cache_create(r->b, r->d, &o, &r->c), HZ_OK);
    tu_after_create(r->c);
    /* transfers take time and land in two halves: a row published or reused too early shows */
    assert_int_equal(hz_backend_cpu_set_copy_delay(r->cpu, 100), HZ_OK);
    r->zipf = zipf;
    double sum = 0;
    for (uint32_t k = 0; k < EXPERTS; k++) sum += 1.0 / pow(k + 1.0, 1.1);
    double acc = 0;
    for (uint32_t k = 0; k < EXPERTS; k++) {
        acc += 1.0 / pow(k + 1.0, 1.1) / sum;
        r->cdf[k] = acc;
    }
    uint64_t prng = 77;
    for (uint32_t l = 0; l < LAYERS; l++) {
        for (uint32_t k = 0; k < EXPERTS; k++) r->perm[l][k] = k;
        for (uint32_t k = EXPERTS - 1; k > 0; k--) {
            uint32_t m = (uint32_t)(tu_rng_next(&prng) % (k + 1));
            uint32_t t = r->perm[l][k];
            r->perm[l][k] = r->perm[l][m];
            r->perm[l][m] = t;
        }
    }
    double t0 = hz_now_seconds();
    r->deadline = t0 + seconds_per_mode();
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.r = r, .id = i};
        assert_int_equal(pthread_create(&w[i].t, NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(w[i].t, NULL);
    /* let every pending consumer kernel run */
    hz_event *ev = NULL;
    assert_int_equal(hz_event_create(r->d, &ev), HZ_OK);
    assert_int_equal(hz_event_record(ev), HZ_OK);
    assert_int_equal(hz_event_synchronize(ev), HZ_OK);
    hz_event_destroy(ev);
    if (atomic_load(&g_failed)) fprintf(stderr, "stress failure: %s\n", g_fail_msg);
    assert_false(atomic_load(&g_failed));

    fprintf(stderr,
            "  %s %-10s capacity %u spares %u staging %u: %llu acquires (%llu with late consumers), %.0f misses, %.0f "
            "publications, %.0f evictions, %.0f retired, %llu invariant checks, %.2f s\n",
            zipf ? "zipf   " : "uniform", tu_transport_name(transport), capacity, spare, staging_blobs, (unsigned long long)atomic_load(&r->iterations),
            (unsigned long long)atomic_load(&r->consumers), tu_stat(r->c, "misses"), tu_stat(r->c, "publications"),
            tu_stat(r->c, "evictions"), tu_stat(r->c, "retired_rows"), (unsigned long long)atomic_load(&r->checks),
            hz_now_seconds() - t0);
    assert_true(tu_stat(r->c, "publications") > 1);
    assert_true(tu_stat(r->c, "evictions") > 0);
    assert_int_equal(tu_stat(r->c, "leases_active"), 0);
    assert_int_equal(tu_stat(r->c, "expert_d2h_bytes"), 0);
    assert_int_equal(tu_stat(r->c, "staging_slots_busy"), 0);
    assert_int_equal(tu_stat(r->c, "failed_transactions"), 0);
    if (transport == HZ_TRANSPORT_REGISTERED) {
        assert_int_equal(tu_stat(r->c, "staging_high_water"), 0);
        assert_int_equal(tu_stat(r->c, "staging_copy_bytes"), 0);
    } else {
        /* every H2D was fed by exactly one staged blob */
        assert_int_equal(tu_stat(r->c, "staging_copies"), tu_stat(r->c, "h2d_copies"));
        assert_int_equal(tu_stat(r->c, "staging_copy_bytes"), tu_stat(r->c, "h2d_bytes"));
    }
    if ((transport & ~TU_PIECEWISE) == HZ_TRANSPORT_THREADED) {
        /* each blob's copy took time, and so did the reaction to its last piece */
        assert_true(tu_stat(r->c, "staging_fill_span_seconds") > 0);
        assert_true(tu_stat(r->c, "staging_fill_lag_seconds") > 0);
    } else {
        assert_true(tu_stat(r->c, "staging_fill_wait_seconds") == 0);
        assert_true(tu_stat(r->c, "staging_fill_span_seconds") == 0);
        assert_true(tu_stat(r->c, "staging_fill_lag_seconds") == 0);
    }
    tu_check_invariants(r->c);
    /* one more miss retires every old generation (all consumers are done): no victim stays pending */
    uint32_t g[TOPK];
    hz_generation *lease = NULL;
    for (uint32_t l = 0; l < LAYERS && tu_stat(r->c, "rows.victim_pending") > 0; l++) {
        const uint32_t before = (uint32_t)tu_stat(r->c, "publications");
        for (uint32_t e0 = 0; e0 < EXPERTS; e0 += TOPK) {
            for (uint32_t i = 0; i < TOPK; i++) g[i] = e0 + i;
            assert_int_equal(hz_generation_acquire(r->c, l, g, TOPK, &lease), HZ_OK);
            assert_int_equal(hz_generation_release(lease, NULL), HZ_OK);
            if ((uint32_t)tu_stat(r->c, "publications") != before) break;
        }
    }
    assert_int_equal(tu_stat(r->c, "rows.victim_pending"), 0);
    assert_int_equal(tu_stat(r->c, "generations_live"), 1);
    assert_int_equal(tu_stat(r->c, "rows.free") + tu_stat(r->c, "rows.reusable"), spare);
    tu_check_invariants(r->c);
    assert_int_equal(hz_cache_destroy(r->c), HZ_OK);
    assert_int_equal(hz_device_close(r->d), HZ_OK);
    assert_int_equal(tu_routed_hash(r->b), hash0);
    assert_int_equal(hz_host_backing_close(r->b), HZ_OK);
    free(r);
}

typedef struct mode {
    uint32_t capacity, spare, staging_blobs;
    int zipf;
    int transport;
} mode;

#define MODES(t)                                                                                      \
    {8, TOPK, 2, 0, t}, {8, TOPK, 2, 1, t}, {12, 2 * TOPK, 3, 0, t}, { 12, 2 * TOPK, 3, 1, t }
static const mode k_modes[] = {MODES(HZ_TRANSPORT_SERIAL), MODES(HZ_TRANSPORT_THREADED),
                               MODES(HZ_TRANSPORT_REGISTERED), MODES(TU_THREADED_PIECEWISE)};

static void test_stress(void **state) {
    const mode *m = *state;
    stress(m->capacity, m->spare, m->staging_blobs, m->zipf, m->transport);
}

#define STRESS_TEST(i, name) {name, test_stress, NULL, NULL, (void *)&k_modes[i]}
#define STRESS_TESTS(base, t)                                                                         \
    STRESS_TEST(base, "uniform tight [" t "]"), STRESS_TEST(base + 1, "zipf tight [" t "]"),               \
        STRESS_TEST(base + 2, "uniform roomy [" t "]"), STRESS_TEST(base + 3, "zipf roomy [" t "]")

int main(void) {
    const struct CMUnitTest tests[] = {
        STRESS_TESTS(0, "serial"),
        STRESS_TESTS(4, "threaded"),
        STRESS_TESTS(8, "registered"),
        STRESS_TESTS(12, "threaded piecewise"),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
