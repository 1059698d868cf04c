/* hz-cache-bench: cost of the cache's own bookkeeping on the cpu backend (not a test; figures go to
 * doc/benchmarks.md). Prints ns per all-hit acquire+release (1..8 threads, with and without a consumer
 * event) and the time of miss transactions, per transport, next to the bare memcpy the serial transport
 * cannot avoid. Build a release build for figures: debug builds run the invariant checker after every
 * publication. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backing/backing.h"
#include "cache/cache_internal.h"
#include "test_config.h"

static const char *transport_name(int t) {
    return t == HZ_TRANSPORT_THREADED ? "threaded" : t == HZ_TRANSPORT_REGISTERED ? "registered" : "serial";
}

static hz_host_backing *make_backing(uint32_t layers, uint32_t experts, uint32_t top_k, uint32_t hidden,
                                     uint32_t inter) {
    hz_model_config cfg = tu_config(layers, experts, top_k, hidden, inter);
    hz_host_backing *b = NULL;
    if (hz_backing_create_synthetic(&cfg, 42, &b) != HZ_OK) {
        fprintf(stderr, "backing: %s\n", hz_last_error_message());
        exit(1);
    }
    return b;
}

static void check(int st, const char *what) {
    if (st != HZ_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, hz_status_name(st), hz_last_error_message());
        exit(1);
    }
}

typedef struct hit_arg {
    hz_cache *c;
    hz_device *d;
    uint32_t layers, top_k, iters;
    int with_event;
    int id;
} hit_arg;

static void *hit_loop(void *p) {
    hit_arg *a = p;
    hz_event *ev = NULL;
    if (a->with_event) check(hz_event_create(a->d, &ev), "event");
    uint32_t g[16];
    for (uint32_t i = 0; i < a->iters; i++) {
        uint32_t layer = (i + (uint32_t)a->id) % a->layers;
        for (uint32_t k = 0; k < a->top_k; k++) g[k] = (k * 7 + i) % 64;
        /* distinct: k*7 mod 64 is injective for k < 64 */
        hz_generation *l = NULL;
        check(hz_generation_acquire(a->c, layer, g, a->top_k, &l), "acquire");
        if (ev) {
            check(hz_event_record(ev), "record");
            check(hz_generation_release(l, ev), "release");
        } else {
            check(hz_generation_release(l, NULL), "release");
        }
    }
    if (ev) {
        check(hz_event_synchronize(ev), "sync");
        hz_event_destroy(ev);
    }
    return NULL;
}

static double run_hits(hz_cache *c, hz_device *d, int threads, int with_event, uint32_t iters) {
    pthread_t t[8];
    hit_arg a[8];
    double t0 = hz_now_seconds();
    for (int i = 0; i < threads; i++) {
        a[i] = (hit_arg){c, d, 16, 8, iters, with_event, i};
        pthread_create(&t[i], NULL, hit_loop, &a[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double dt = hz_now_seconds() - t0;
    return dt * 1e9 / ((double)iters * threads); /* wall ns per acquire+release, all threads together */
}

typedef struct miss_arg {
    hz_cache *c;
    uint32_t layer, k, iters, experts;
} miss_arg;

/* Alternates between two disjoint groups of k experts so every acquire misses k experts. */
static void *miss_loop(void *p) {
    miss_arg *a = p;
    uint32_t g[16];
    for (uint32_t i = 0; i < a->iters; i++) {
        uint32_t base = (i % 2) ? a->k : 0;
        for (uint32_t j = 0; j < a->k; j++) g[j] = (base + j) % a->experts;
        hz_generation *l = NULL;
        check(hz_generation_acquire(a->c, a->layer, g, a->k, &l), "miss acquire");
        check(hz_generation_release(l, NULL), "release");
    }
    return NULL;
}

static void bench_misses(const char *label, uint32_t hidden, uint32_t inter, uint32_t k, int threads, uint32_t iters,
                         int transport, uint32_t staging_threads) {
    uint32_t layers = 4, experts = 4 * k;
    hz_host_backing *b = make_backing(layers, experts, k, hidden, inter);
    hz_device *d = NULL;
    check(hz_device_open("cpu", &d), "device");
    hz_cache_options o;
    hz_cache_options_init(&o);
    o.capacity = k; /* each acquire of the other group evicts the whole layer */
    o.transport = transport;
    o.staging_threads = staging_threads;
    hz_cache *c = NULL;
    check(hz_cache_create(b, d, &o, &c), "cache");
    uint64_t row = hz_backing_expert_layout(b)->blob_bytes;

    /* The unavoidable work: two memcpy per expert (backing -> staging, staging -> row). */
    uint8_t *x = malloc(row), *y = malloc(row);
    memset(x, 1, row);
    double t0 = hz_now_seconds();
    uint32_t reps = 200;
    for (uint32_t i = 0; i < reps; i++) {
        memcpy(y, hz_backing_expert_blob(b, 0, i % experts), row);
        memcpy(x, y, row);
    }
    double copy_us = (hz_now_seconds() - t0) * 1e6 / reps;
    free(x);
    free(y);

    pthread_t t[8];
    miss_arg a[8];
    t0 = hz_now_seconds();
    for (int i = 0; i < threads; i++) {
        a[i] = (miss_arg){c, (uint32_t)i % layers, k, iters, experts};
        pthread_create(&t[i], NULL, miss_loop, &a[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double dt = hz_now_seconds() - t0;
    double per_txn_us = dt * 1e6 / ((double)iters * threads);
    double floor_us = copy_us * k;
    /* Staging rate over the whole run (initial fill included): bytes over the wall time in which at
     * least one staging copy ran. */
    hz_txn_stats ts;
    hz_transactor_stats(hz_cache_transactor(c), &ts);
    char rate[32] = "-";
    if (ts.staging_copy_ns) snprintf(rate, sizeof rate, "%.1f", (double)ts.staging_copy_bytes / (double)ts.staging_copy_ns);
    char tname[32];
    snprintf(tname, sizeof tname, "%s%s", transport_name(transport),
             transport == HZ_TRANSPORT_THREADED ? (staging_threads == 1 ? " x1" : staging_threads == 2 ? " x2" : " x4") : "");
    printf("| %-31s | %-11s | %7llu | %2u | %2d | %9.1f | %9.1f | %9.1f | %6s |\n", label, tname,
           (unsigned long long)row, k, threads, per_txn_us, floor_us, per_txn_us - floor_us, rate);
    check(hz_cache_destroy(c), "destroy");
    check(hz_device_close(d), "close");
    check(hz_host_backing_close(b), "backing close");
}

int main(int argc, char **argv) {
    uint32_t iters = argc > 1 ? (uint32_t)atoi(argv[1]) : 200000;
#ifdef HZ_INVARIANTS
    printf("note: built with HZ_INVARIANTS (checks after every publication); use a release build for figures\n");
#endif
    hz_host_backing *b = make_backing(16, 64, 8, 256, 128);
    hz_device *d = NULL;
    check(hz_device_open("cpu", &d), "device");
    hz_cache *c = NULL;
    check(hz_cache_create(b, d, NULL, &c), "cache"); /* capacity 0 = all resident: every acquire hits */
    printf("All-hit acquire+release (top-8 group, 16 layers x 64 experts, all resident), wall ns per call pair:\n\n");
    printf("| threads | no event (ns) | consumer event (ns) |\n|---|---|---|\n");
    int counts[4] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        double a = run_hits(c, d, counts[i], 0, iters / (uint32_t)counts[i]);
        double e = run_hits(c, d, counts[i], 1, iters / (uint32_t)counts[i] / 4);
        printf("| %7d | %13.0f | %19.0f |\n", counts[i], a, e);
    }
    check(hz_cache_destroy(c), "destroy");
    check(hz_device_close(d), "close");
    check(hz_host_backing_close(b), "backing close");

    printf("\nMiss transactions (every acquire misses k experts; transactions serialized), wall us per acquire;\n"
           "'2 memcpy' is the serial transport's unavoidable work (backing -> staging -> row), staging GB/s the\n"
           "transactor's own figure (threaded xN: N copy threads):\n\n");
    printf("| %-31s | %-11s | %7s | %2s | %2s | %9s | %9s | %9s | %6s |\n", "blob", "transport", "bytes", "k", "th",
           "txn (us)", "2 memcpy", "overhead", "stg GB/s");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    uint32_t miters = iters / 100 > 50 ? iters / 100 : 50;
    const int transports[] = {HZ_TRANSPORT_SERIAL, HZ_TRANSPORT_THREADED, HZ_TRANSPORT_REGISTERED};
    for (int i = 0; i < 3; i++) {
        int t = transports[i];
        uint32_t st = t == HZ_TRANSPORT_THREADED ? 2 : 0;
        bench_misses("small (hidden 256, inter 128)", 256, 128, 1, 1, miters * 4, t, st);
        bench_misses("small (hidden 256, inter 128)", 256, 128, 8, 1, miters, t, st);
        bench_misses("small (hidden 256, inter 128)", 256, 128, 8, 4, miters / 4, t, st);
        bench_misses("OLMoE (hidden 2048, inter 1024)", 2048, 1024, 8, 1, miters / 10, t, st);
        bench_misses("OLMoE (hidden 2048, inter 1024)", 2048, 1024, 8, 4, miters / 40, t, st);
    }
    /* the threaded transport's scaling with its thread count on the large blob */
    bench_misses("OLMoE (hidden 2048, inter 1024)", 2048, 1024, 8, 1, miters / 10, HZ_TRANSPORT_THREADED, 1);
    bench_misses("OLMoE (hidden 2048, inter 1024)", 2048, 1024, 8, 1, miters / 10, HZ_TRANSPORT_THREADED, 4);
    return 0;
}
