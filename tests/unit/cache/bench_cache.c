/* hz-cache-bench: cost of the cache's own bookkeeping on the cpu backend (not a test; figures go to
 * doc/benchmarks.md). Prints ns per all-hit acquire+release (1..8 threads, with and without a consumer
 * event) and the time of miss transactions next to the bare memcpy they cannot avoid. Build a release
 * build for figures: debug builds run the invariant checker after every publication. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backing/backing.h"
#include "cache/cache_internal.h"

static hz_host_backing *make_backing(uint32_t layers, uint32_t experts, uint32_t top_k, uint32_t hidden,
                                     uint32_t inter) {
    hz_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.arch = HZ_ARCH_OLMOE;
    cfg.hidden = hidden;
    cfg.layers = layers;
    cfg.heads = 4;
    cfg.kv_heads = 4;
    cfg.head_dim = hidden / 4;
    cfg.vocab = 256;
    cfg.experts = experts;
    cfg.top_k = top_k;
    cfg.expert_inter = inter;
    cfg.max_pos = 128;
    cfg.eos = cfg.bos = cfg.pad = -1;
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

static void bench_misses(const char *label, uint32_t hidden, uint32_t inter, uint32_t k, int threads, uint32_t iters) {
    uint32_t layers = 4, experts = 4 * k;
    hz_host_backing *b = make_backing(layers, experts, k, hidden, inter);
    hz_device *d = NULL;
    check(hz_device_open("cpu", &d), "device");
    hz_cache_options o;
    hz_cache_options_init(&o);
    o.capacity = k; /* each acquire of the other group evicts the whole layer */
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
    printf("| %-30s | %7llu | %2u | %2d | %10.1f | %10.1f | %10.1f |\n", label, (unsigned long long)row, k, threads,
           per_txn_us, floor_us, per_txn_us - floor_us);
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

    printf("\nMiss transactions (every acquire misses k experts; serialized), wall us per acquire:\n\n");
    printf("| %-30s | %7s | %2s | %2s | %10s | %10s | %10s |\n", "blob", "bytes", "k", "th", "txn (us)",
           "2 memcpy", "overhead");
    printf("|---|---|---|---|---|---|---|\n");
    uint32_t miters = iters / 100 > 50 ? iters / 100 : 50;
    bench_misses("small (hidden 256, inter 128)", 256, 128, 1, 1, miters * 4);
    bench_misses("small (hidden 256, inter 128)", 256, 128, 8, 1, miters);
    bench_misses("small (hidden 256, inter 128)", 256, 128, 8, 4, miters / 4);
    bench_misses("OLMoE (hidden 2048, inter 1024)", 2048, 1024, 8, 1, miters / 10);
    bench_misses("OLMoE (hidden 2048, inter 1024)", 2048, 1024, 8, 4, miters / 40);
    return 0;
}
