/* The eviction policies through the cache: which expert a miss displaces under LRU and under LFU, the
 * LFU counts' decay (HZ_LFU_HALF_LIFE), the policies' hit rates on skewed and on uniform routing, and
 * the refusal of unknown policies. One thread, cpu backend, serial transport: the victims are the
 * subject here; test_cache_stress runs the LFU policy under threads with the invariant checker. */
#include <math.h>

#include "cache_test_util.h"

typedef struct cache_run {
    hz_host_backing *b;
    hz_device *d;
    hz_cache *c;
    uint64_t hash0;
} cache_run;

/* A cache of `capacity` of `experts` per layer with policy `eviction` (canonical placement: experts
 * 0..capacity-1 resident). */
static void open_run(cache_run *r, uint32_t layers, uint32_t experts, uint32_t top_k, uint32_t capacity,
                     int eviction) {
    r->b = tu_backing(layers, experts, top_k, 5);
    r->hash0 = tu_routed_hash(r->b);
    assert_int_equal(hz_device_open("cpu", &r->d), HZ_OK);
    hz_cache_options o;
    tu_options(&o, HZ_TRANSPORT_SERIAL);
    o.capacity = capacity;
    o.eviction = eviction;
    assert_int_equal(hz_cache_create(r->b, r->d, &o, &r->c), HZ_OK);
    char policy[16];
    tu_stat_str(r->c, "eviction", policy, sizeof policy);
    assert_string_equal(policy, eviction == HZ_EVICT_LFU ? "lfu" : "lru");
}

static void close_run(cache_run *r) {
    tu_check_invariants(r->c);
    tu_close(r->c, r->d, r->b, r->hash0);
}

/* Acquires the single expert `e` of layer 0 and releases it. */
static void use(cache_run *r, uint32_t e) { tu_acquire_check_release(r->c, r->b, 0, &e, 1); }

/* Whether expert `e` of layer 0 is resident: an acquire that adds no miss. */
static int resident(cache_run *r, uint32_t e) {
    const double before = tu_stat(r->c, "misses");
    use(r, e);
    return tu_stat(r->c, "misses") == before;
}

/* Capacity 4 (experts 0-3 resident). 0 is acquired three times and 1 twice, then 2 and 3 once each, so
 * 0 is the least recently acquired and 2 the least often. Two misses (4, then 5): LRU displaces 0 and
 * then 1, LFU displaces 2 and then 3 (each acquired once, 2 earlier), keeping the two it saw most. */
static void test_victims_by_policy(void **state) {
    (void)state;
    for (int p = 0; p < 2; p++) {
        const int lfu = p == 1;
        cache_run r;
        open_run(&r, 1, 16, 4, 4, lfu ? HZ_EVICT_LFU : HZ_EVICT_LRU);
        const uint32_t seq[] = {0, 0, 0, 1, 1, 2, 3};
        for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) use(&r, seq[i]);
        assert_int_equal(tu_stat(r.c, "misses"), 0);
        use(&r, 4);
        use(&r, 5);
        assert_int_equal(tu_stat(r.c, "misses"), 2);
        assert_int_equal(tu_stat(r.c, "evictions"), 2);
        /* the checks below acquire, so they run on the policy's survivors first */
        if (lfu) {
            assert_true(resident(&r, 0));
            assert_true(resident(&r, 1));
        } else {
            assert_true(resident(&r, 2));
            assert_true(resident(&r, 3));
        }
        close_run(&r);
    }
}

/* The counts decay: with a half-life of 2 acquires, expert 0's six acquires are worth about 0.03 after
 * 14 acquires of 1, 2 and 3 (3 twice, 1 and 2 six times each), so the miss of 9 displaces 0, not 3
 * (about 0.3). With a half-life of 2^30 they still count about 6, and the miss displaces the least used
 * of the others, 3; so it does with the default (256), which a value out of range or not a number
 * leaves in place. */
static void test_lfu_decay(void **state) {
    (void)state;
    const char *half_lives[] = {"2", "1073741824", "0", "-3", "x", "4294967296", ""};
    const uint32_t seq[14] = {1, 2, 1, 2, 3, 1, 2, 1, 2, 3, 1, 2, 1, 2};
    for (size_t p = 0; p < sizeof half_lives / sizeof *half_lives; p++) {
        assert_int_equal(setenv("HZ_LFU_HALF_LIFE", half_lives[p], 1), 0);
        cache_run r;
        open_run(&r, 1, 16, 4, 4, HZ_EVICT_LFU);
        assert_int_equal(unsetenv("HZ_LFU_HALF_LIFE"), 0); /* read at creation only */
        for (int i = 0; i < 6; i++) use(&r, 0);
        for (int i = 0; i < 14; i++) use(&r, seq[i]);
        use(&r, 9);
        assert_int_equal(tu_stat(r.c, "misses"), 1);
        const uint32_t kept = p == 0 ? 3 : 0, gone = p == 0 ? 0 : 3;
        assert_true(resident(&r, kept));
        assert_false(resident(&r, gone));
        close_run(&r);
    }
}

enum { HR_LAYERS = 2, HR_EXPERTS = 32, HR_TOPK = 4, HR_CAP = 12, HR_ACQUIRES = 3000 };

/* Hit rate of one policy over HR_ACQUIRES top-4 groups per layer, drawn with a fixed seed either
 * uniformly or by Zipf(1.1) popularity over a per-layer permutation of the experts. */
static double hit_rate(int eviction, int zipf) {
    cache_run r;
    open_run(&r, HR_LAYERS, HR_EXPERTS, HR_TOPK, HR_CAP, eviction);
    double cdf[HR_EXPERTS], sum = 0, acc = 0;
    for (uint32_t k = 0; k < HR_EXPERTS; k++) sum += 1.0 / pow(k + 1.0, 1.1);
    for (uint32_t k = 0; k < HR_EXPERTS; k++) cdf[k] = (acc += 1.0 / pow(k + 1.0, 1.1) / sum);
    uint32_t perm[HR_LAYERS][HR_EXPERTS];
    uint64_t rng = 99;
    for (uint32_t l = 0; l < HR_LAYERS; l++) {
        for (uint32_t k = 0; k < HR_EXPERTS; k++) perm[l][k] = k;
        for (uint32_t k = HR_EXPERTS - 1; k > 0; k--) {
            uint32_t m = (uint32_t)(tu_rng_next(&rng) % (k + 1)), t = perm[l][k];
            perm[l][k] = perm[l][m];
            perm[l][m] = t;
        }
    }
    for (uint32_t a = 0; a < HR_ACQUIRES; a++) {
        for (uint32_t l = 0; l < HR_LAYERS; l++) {
            uint32_t g[HR_TOPK], n = 0;
            while (n < HR_TOPK) {
                uint32_t e;
                if (zipf) {
                    double u = (double)(tu_rng_next(&rng) >> 11) * (1.0 / 9007199254740992.0);
                    uint32_t k = 0;
                    while (k + 1 < HR_EXPERTS && cdf[k] < u) k++;
                    e = perm[l][k];
                } else {
                    e = (uint32_t)(tu_rng_next(&rng) % HR_EXPERTS);
                }
                int dup = 0;
                for (uint32_t i = 0; i < n; i++) dup |= g[i] == e;
                if (!dup) g[n++] = e;
            }
            hz_generation *lease = NULL;
            assert_int_equal(hz_generation_acquire(r.c, l, g, HR_TOPK, &lease), HZ_OK);
            assert_int_equal(hz_generation_release(lease, NULL), HZ_OK);
        }
    }
    const double hits = tu_stat(r.c, "hits"), misses = tu_stat(r.c, "misses");
    assert_int_equal(hits + misses, (double)HR_ACQUIRES * HR_LAYERS * HR_TOPK);
    close_run(&r);
    return hits / (hits + misses);
}

/* What the policy is for: on skewed routing LFU keeps the popular experts and hits clearly more than
 * LRU; on uniform routing no policy can do much better than capacity / experts (12 / 32 = 37.5%), and
 * LFU stays within a few points of LRU. */
static void test_hit_rates(void **state) {
    (void)state;
    const double lru_z = hit_rate(HZ_EVICT_LRU, 1), lfu_z = hit_rate(HZ_EVICT_LFU, 1);
    const double lru_u = hit_rate(HZ_EVICT_LRU, 0), lfu_u = hit_rate(HZ_EVICT_LFU, 0);
    fprintf(stderr, "  hit rate, zipf 1.1: lru %.3f, lfu %.3f; uniform: lru %.3f, lfu %.3f\n", lru_z, lfu_z, lru_u,
            lfu_u);
    assert_true(lfu_z > lru_z + 0.05);
    assert_true(fabs(lfu_u - lru_u) < 0.05);
    assert_true(lru_u > 0.30 && lru_u < 0.45);
}

/* Unknown policies are refused with a message that names the option; nothing is created. */
static void test_unknown_policy(void **state) {
    (void)state;
    hz_host_backing *b = tu_backing(1, 16, 4, 5);
    hz_device *d = NULL;
    assert_int_equal(hz_device_open("cpu", &d), HZ_OK);
    const int32_t bad[] = {2, -1, 1000};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hz_cache_options o;
        hz_cache_options_init(&o);
        o.eviction = bad[i];
        hz_cache *c = (hz_cache *)&o; /* must come back NULL */
        assert_int_equal(hz_cache_create(b, d, &o, &c), HZ_EUNSUPPORTED);
        assert_null(c);
        assert_non_null(strstr(hz_last_error_message(), "eviction"));
    }
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_victims_by_policy),
        cmocka_unit_test(test_lfu_decay),
        cmocka_unit_test(test_hit_rates),
        cmocka_unit_test(test_unknown_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
