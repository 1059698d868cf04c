/* Shared helpers of the cache tests: synthetic backings, devices, stats lookups, row checks. */
#ifndef HZ_CACHE_TEST_UTIL_H
#define HZ_CACHE_TEST_UTIL_H

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include "backend/backend.h"
#include "backend/backend_fault.h"
#include "backing/backing.h"
#include "cache/cache_internal.h"
#include "test_config.h"

static inline hz_host_backing *tu_backing(uint32_t layers, uint32_t experts, uint32_t top_k, uint64_t seed) {
    hz_model_config cfg = tu_config(layers, experts, top_k, 256, 128);
    hz_host_backing *b = NULL;
    int st = hz_backing_create_synthetic(&cfg, seed, &b);
    if (st) fprintf(stderr, "synthetic backing: %s: %s\n", hz_status_name(st), hz_last_error_message());
    assert_int_equal(st, HZ_OK);
    return b;
}

static inline uint64_t tu_routed_hash(const hz_host_backing *b) {
    uint64_t n = 0;
    const uint8_t *p = hz_backing_routed_region(b, &n);
    assert_non_null(p);
    return XXH3_64bits(p, (size_t)n);
}

static inline uint64_t tu_row_bytes(const hz_host_backing *b) { return hz_backing_expert_layout(b)->blob_bytes; }

/* A device whose backend is the fault wrapper around a cpu backend; *out_fault is the wrapper. */
static inline hz_device *tu_fault_device(hz_backend **out_fault) {
    hz_backend *cpu = NULL, *fault = NULL;
    assert_int_equal(hz_backend_cpu_create(&cpu), HZ_OK);
    assert_int_equal(hz_backend_fault_create(cpu, &fault), HZ_OK);
    hz_device *d = NULL;
    assert_int_equal(hz_device_wrap(fault, &d), HZ_OK);
    *out_fault = fault;
    return d;
}

/* The cache's stats, parsed (caller deletes). */
static inline cJSON *tu_stats(hz_cache *c) {
    char *s = NULL;
    assert_int_equal(hz_cache_stats_json(c, &s), HZ_OK);
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    hz_free(s);
    return j;
}

/* A stats field; nested keys with '.', e.g. "rows.free" or "miss_latency_us.count". -1 when absent. */
static inline double tu_stat(hz_cache *c, const char *key) {
    cJSON *j = tu_stats(c);
    char path[128];
    snprintf(path, sizeof path, "%s", key);
    cJSON *node = j;
    for (char *tok = strtok(path, "."); tok && node; tok = strtok(NULL, ".")) node = cJSON_GetObjectItemCaseSensitive(node, tok);
    double v = (node && cJSON_IsNumber(node)) ? node->valuedouble : -1.0;
    cJSON_Delete(j);
    return v;
}

/* A boolean stats field: 1 true, 0 false, -1 absent or not a boolean. */
static inline int tu_stat_bool(hz_cache *c, const char *key) {
    cJSON *j = tu_stats(c);
    cJSON *node = cJSON_GetObjectItemCaseSensitive(j, key);
    int v = (node && cJSON_IsBool(node)) ? cJSON_IsTrue(node) != 0 : -1;
    cJSON_Delete(j);
    return v;
}

/* miss_round_blobs as text, "blobs:rounds" pairs separated by spaces (e.g. "1:1 2:3"); "" for none, "?"
 * when the field is missing or malformed. */
static inline void tu_round_sizes(hz_cache *c, char *buf, size_t n) {
    cJSON *j = tu_stats(c);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "miss_round_blobs");
    size_t used = 0;
    buf[0] = '\0';
    if (!cJSON_IsArray(a)) {
        snprintf(buf, n, "?");
        cJSON_Delete(j);
        return;
    }
    const cJSON *pair;
    cJSON_ArrayForEach(pair, a) {
        const cJSON *k = cJSON_GetArrayItem(pair, 0), *r = cJSON_GetArrayItem(pair, 1);
        if (cJSON_GetArraySize(pair) != 2 || !cJSON_IsNumber(k) || !cJSON_IsNumber(r)) {
            snprintf(buf, n, "?");
            break;
        }
        used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%s%.0f:%.0f", used ? " " : "", k->valuedouble,
                                 r->valuedouble);
    }
    cJSON_Delete(j);
}

static inline void tu_stat_str(hz_cache *c, const char *key, char *buf, size_t n) {
    cJSON *j = tu_stats(c);
    cJSON *node = cJSON_GetObjectItemCaseSensitive(j, key);
    snprintf(buf, n, "%s", (node && cJSON_IsString(node)) ? node->valuestring : "");
    cJSON_Delete(j);
}

/* Every expert of the lease's group is in a row holding exactly its backing bytes (cpu backend: the row
 * address is host memory). */
static inline void tu_check_rows(const hz_host_backing *b, hz_generation *lease, const uint32_t *experts, uint32_t n) {
    uint32_t layer = hz_generation_layer(lease);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t row = 0;
        const void *addr = NULL;
        assert_int_equal(hz_generation_row(lease, experts[i], &row, &addr), HZ_OK);
        assert_non_null(addr);
        const uint8_t *blob = hz_backing_expert_blob(b, layer, experts[i]);
        assert_non_null(blob);
        assert_memory_equal(addr, blob, (size_t)tu_row_bytes(b));
    }
}

/* Acquires `experts` of `layer` (the call must succeed), checks that every row holds its backing bytes
 * and releases the lease; returns the lease's generation. */
static inline uint64_t tu_acquire_check_release(hz_cache *c, const hz_host_backing *b, uint32_t layer,
                                                const uint32_t *experts, uint32_t n) {
    hz_generation *l = NULL;
    assert_int_equal(hz_generation_acquire(c, layer, experts, n, &l), HZ_OK);
    uint64_t id = hz_generation_id(l);
    tu_check_rows(b, l, experts, n);
    assert_int_equal(hz_generation_release(l, NULL), HZ_OK);
    return id;
}

/* The cache's "state" field is `want` ("OK" or "FAULTED"). */
static inline void tu_expect_state(hz_cache *c, const char *want) {
    char state[16];
    tu_stat_str(c, "state", state, sizeof state);
    assert_string_equal(state, want);
}

/* After a load that failed before publication, on a cache that published nothing since its creation:
 * still OK, generation 1 current, every spare row (`spares`) free again, none reserved or in transfer,
 * no staging slot busy. */
static inline void tu_expect_rolled_back(hz_cache *c, uint32_t spares) {
    tu_expect_state(c, "OK");
    assert_int_equal(tu_stat(c, "generation"), 1);
    assert_int_equal(tu_stat(c, "rows.free"), spares);
    assert_int_equal(tu_stat(c, "rows.reserved"), 0);
    assert_int_equal(tu_stat(c, "rows.in_transfer"), 0);
    assert_int_equal(tu_stat(c, "staging_slots_busy"), 0);
}

/* Destroys the cache (unless NULL: the test destroyed it itself), closes the device, checks that the
 * backing's routed bytes still hash to `hash0` (nothing wrote to them) and closes the backing. */
static inline void tu_close(hz_cache *c, hz_device *d, hz_host_backing *b, uint64_t hash0) {
    if (c) assert_int_equal(hz_cache_destroy(c), HZ_OK);
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(tu_routed_hash(b), hash0);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

/* Every cache scenario runs once per transport. The cmocka initial state of a test is a pointer into
 * this array. */
/* The tests' fourth transport: threaded with piecewise H2D (hz_txn_config.piecewise), which the cache
 * takes from HZ_TXN_PIECEWISE (on unless it is 0); tu_after_create sets it on for this one and off for
 * "threaded", so that both the whole-blob and the piecewise hand-over are tested. Compares unequal to every
 * HZ_TRANSPORT_*, so a test's "registered or not" checks treat it as the threaded transport it is. */
#define TU_PIECEWISE 0x100
#define TU_THREADED_PIECEWISE (HZ_TRANSPORT_THREADED | TU_PIECEWISE)

static const int tu_transports[4] = {HZ_TRANSPORT_SERIAL, HZ_TRANSPORT_THREADED, HZ_TRANSPORT_REGISTERED,
                                     TU_THREADED_PIECEWISE};

static inline const char *tu_transport_name(int transport) {
    transport &= ~TU_PIECEWISE;
    return transport == HZ_TRANSPORT_THREADED ? "threaded" : transport == HZ_TRANSPORT_REGISTERED ? "registered" : "serial";
}

/* Set by tu_options, read by the tu_after_create that follows it (tests create caches one at a time). */
static int tu_piecewise_next;

/* Default options for `transport`; the threaded one runs 3 copy threads (more than the sandbox's cores,
 * so pieces of one blob really are copied concurrently and out of order). */
static inline void tu_options(hz_cache_options *o, int transport) {
    hz_cache_options_init(o);
    tu_piecewise_next = (transport & TU_PIECEWISE) != 0;
    o->transport = transport & ~TU_PIECEWISE;
    if (o->transport == HZ_TRANSPORT_THREADED) o->staging_threads = 3;
}

/* Right after hz_cache_create: a threaded cache splits even the tests' small blobs into one piece per
 * thread (production pieces are at least 256 KiB), or, piecewise, into two per thread. Generation
 * 1 was loaded with the cache's default (piecewise unless HZ_TXN_PIECEWISE=0). */
static inline void tu_after_create(hz_cache *c) {
    hz_transactor *t = hz_cache_transactor(c);
    hz_txn_stats ts;
    hz_transactor_stats(t, &ts);
    if (ts.transport == HZ_TXN_THREADED) assert_int_equal(hz_transactor_set_piece_bytes(t, 1024), HZ_OK);
    if (ts.transport == HZ_TXN_THREADED) assert_int_equal(hz_transactor_set_piecewise(t, tu_piecewise_next), HZ_OK);
    tu_piecewise_next = 0;
}

#define TU_TRANSPORT_TEST_(fn, setup, teardown, i, name)                                               \
    { #fn " [" name "]", fn, setup, teardown, (void *)&tu_transports[i] }
/* Four cmocka entries: `fn` with each transport (and threaded piecewise) as its initial state. */
#define TU_TRANSPORT_TESTS(fn, setup, teardown)                                                        \
    TU_TRANSPORT_TEST_(fn, setup, teardown, 0, "serial"), TU_TRANSPORT_TEST_(fn, setup, teardown, 1, "threaded"), \
        TU_TRANSPORT_TEST_(fn, setup, teardown, 2, "registered"),                                     \
        TU_TRANSPORT_TEST_(fn, setup, teardown, 3, "threaded piecewise")

static inline void tu_check_invariants(hz_cache *c) {
    char why[256] = "";
    int st = hz_cache_check_invariants(c, 1, why, sizeof why);
    if (st) fprintf(stderr, "invariant violated: %s\n", why);
    assert_int_equal(st, HZ_OK);
}

#endif
