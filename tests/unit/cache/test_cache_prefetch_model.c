/* Speculative next-layer prefetch through a model on the cpu device, at partial residency, for both
 * architectures and every transport: greedy decoding with prefetch gives bit-identical tokens and
 * logits (every step) to decoding without it, the cache reports prefetch hits, prefill makes no
 * prediction, and the invariants hold. Sessions on several threads sharing one prefetching cache give
 * the results of a sequential run without prefetch. Suite 'cache': also run under ThreadSanitizer. */
#include <pthread.h>

#include "cache_test_util.h"
#include "../model/tiny_model.h"

#define PROMPT 5
/* Small enough for the ThreadSanitizer run, where a CPU forward pass is slow. */
#define STEPS 16
#define THREADS 2

typedef struct stack {
    hz_host_backing *b;
    hz_device *d;
    hz_cache *c;
    hz_model *m;
    uint32_t vocab;
} stack;

static void stack_open(stack *s, const char *path, uint32_t capacity, int transport, int prefetch) {
    memset(s, 0, sizeof *s);
    assert_int_equal(hz_host_backing_open(path, NULL, &s->b), HZ_OK);
    assert_int_equal(hz_device_open("cpu", &s->d), HZ_OK);
    hz_cache_options co;
    tu_options(&co, transport);
    co.capacity = capacity;
    co.prefetch = prefetch;
    assert_int_equal(hz_cache_create(s->b, s->d, &co, &s->c), HZ_OK);
    assert_int_equal(hz_model_create(s->b, s->d, s->c, NULL, &s->m), HZ_OK);
    hz_model_info info;
    hz_model_info_init(&info);
    assert_int_equal(hz_model_get_info(s->m, &info), HZ_OK);
    s->vocab = info.vocab_size;
}

static void stack_close(stack *s) {
    assert_int_equal(hz_model_destroy(s->m), HZ_OK);
    assert_int_equal(hz_cache_destroy(s->c), HZ_OK);
    assert_int_equal(hz_device_close(s->d), HZ_OK);
    assert_int_equal(hz_host_backing_close(s->b), HZ_OK);
}

/* A greedy run: the prompt, then STEPS decode steps; tokens[i] and the logits after each step. */
typedef struct run_out {
    int32_t tokens[STEPS];
    float *logits; /* [STEPS x vocab] */
    double requests_after_prefill;
    int status;
} run_out;

static int run(hz_model *m, hz_cache *c, uint32_t vocab, uint32_t seed, run_out *o) {
    hz_session *s = NULL;
    int st = hz_session_create(m, NULL, &s);
    if (st) return st;
    int32_t prompt[PROMPT], next = 0;
    for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)((seed * 31u + (uint32_t)i * 7u + 3u) % vocab);
    st = hz_prefill(s, prompt, PROMPT, &next);
    if (!st && c) {
        hz_cache_prefetch_wait(c);
        o->requests_after_prefill = tu_stat(c, "prefetch_requests");
    }
    for (int i = 0; i < STEPS && !st; i++) {
        o->tokens[i] = next;
        st = hz_decode_step(s, next, &next);
        const float *lg = NULL;
        uint32_t n = 0;
        if (!st) st = hz_session_logits(s, &lg, &n);
        if (!st) memcpy(o->logits + (size_t)i * vocab, lg, (size_t)n * sizeof *lg);
    }
    hz_session_destroy(s);
    return st;
}

/* A tiny model of `arch` written as path = DIR/m.hzq in a new temporary directory; returns DIR (for
 * remove_model). */
static char *write_model(char *path, size_t n, hz_arch arch, uint32_t seed) {
    char *dir = NULL;
    assert_int_equal(tiny_tmpdir(&dir), HZ_OK);
    snprintf(path, n, "%s/m.hzq", dir);
    assert_int_equal(tiny_model_write(path, arch, seed), HZ_OK);
    return dir;
}

static void remove_model(char *dir) {
    tiny_rmdir(dir);
    free(dir);
}

static void check_arch(hz_arch arch, uint32_t capacity, int transport) {
    char path[512];
    char *dir = write_model(path, sizeof path, arch, 7);

    stack off, on;
    stack_open(&off, path, capacity, transport, HZ_PREFETCH_OFF);
    stack_open(&on, path, capacity, transport, HZ_PREFETCH_NEXT_LAYER);
    const uint32_t V = off.vocab;
    for (uint32_t seed = 0; seed < 1; seed++) {
        run_out a = {.logits = calloc((size_t)STEPS * V, sizeof(float))};
        run_out b = {.logits = calloc((size_t)STEPS * V, sizeof(float))};
        assert_non_null(a.logits);
        assert_non_null(b.logits);
        double before = tu_stat(on.c, "prefetch_requests");
        assert_int_equal(run(off.m, NULL, V, seed, &a), HZ_OK);
        assert_int_equal(run(on.m, on.c, V, seed, &b), HZ_OK);
        /* prefill makes no prediction; every decode step predicts its second layer once */
        assert_true(b.requests_after_prefill == before);
        assert_memory_equal(a.tokens, b.tokens, sizeof a.tokens);
        assert_memory_equal(a.logits, b.logits, (size_t)STEPS * V * sizeof(float));
        free(a.logits);
        free(b.logits);
    }
    hz_cache_prefetch_wait(on.c);
    fprintf(stderr, "  %s %-10s capacity %u: %.0f requests, %.0f rounds, %.0f experts, %.0f hits, %.0f wasted, "
                    "%.0f ready; misses %.0f with prefetch, %.0f without\n",
            arch == HZ_ARCH_OLMOE ? "olmoe" : "qwen2moe", tu_transport_name(transport), capacity,
            tu_stat(on.c, "prefetch_requests"), tu_stat(on.c, "prefetch_rounds"), tu_stat(on.c, "prefetch_experts"),
            tu_stat(on.c, "prefetch_hits"), tu_stat(on.c, "prefetch_wasted_bytes") / tu_stat(on.c, "row_bytes"),
            tu_stat(on.c, "prefetch_ready"), tu_stat(on.c, "misses"), tu_stat(off.c, "misses"));
    assert_int_equal(tu_stat(on.c, "prefetch_requests"), STEPS);
    assert_true(tu_stat(on.c, "prefetch_hits") > 0);
    assert_int_equal(tu_stat(on.c, "prefetch_failures"), 0);
    assert_int_equal(tu_stat(on.c, "expert_d2h_bytes"), 0);
    assert_int_equal(tu_stat(off.c, "prefetch_requests"), 0);
    /* the same acquires and the same residency: an expert the prefetch loaded is a prefetch hit where
     * the cache without prefetch missed, and nothing else differs */
    assert_true(tu_stat(on.c, "hits") + tu_stat(on.c, "misses") == tu_stat(off.c, "hits") + tu_stat(off.c, "misses"));
    assert_true(tu_stat(on.c, "misses") + tu_stat(on.c, "prefetch_hits") == tu_stat(off.c, "misses"));
    assert_true(tu_stat(on.c, "evictions") == tu_stat(off.c, "evictions"));
    tu_check_invariants(on.c);
    tu_check_invariants(off.c);
    stack_close(&on);
    stack_close(&off);
    remove_model(dir);
}

static void test_olmoe(void **state) { check_arch(HZ_ARCH_OLMOE, 3, *(const int *)*state); }
static void test_qwen(void **state) { check_arch(HZ_ARCH_QWEN2MOE, 5, *(const int *)*state); }

/* ---- sessions on threads, one prefetching cache ---- */

typedef struct job {
    hz_model *m;
    uint32_t vocab, seed;
    run_out out;
} job;

static void *job_main(void *arg) {
    job *j = arg;
    j->out.status = run(j->m, NULL, j->vocab, j->seed, &j->out);
    return NULL;
}

static void test_threads_share_prefetching_cache(void **state) {
    int transport = *(const int *)*state;
    char path[512];
    char *dir = write_model(path, sizeof path, HZ_ARCH_QWEN2MOE, 11);
    stack off, on;
    stack_open(&off, path, 5, transport, HZ_PREFETCH_OFF);
    stack_open(&on, path, 5, transport, HZ_PREFETCH_NEXT_LAYER);
    job ref[THREADS], par[THREADS];
    for (uint32_t t = 0; t < THREADS; t++) {
        ref[t] = (job){.m = off.m, .vocab = off.vocab, .seed = 10 + t};
        par[t] = (job){.m = on.m, .vocab = on.vocab, .seed = 10 + t};
        ref[t].out.logits = calloc((size_t)STEPS * off.vocab, sizeof(float));
        par[t].out.logits = calloc((size_t)STEPS * on.vocab, sizeof(float));
        assert_non_null(ref[t].out.logits);
        assert_non_null(par[t].out.logits);
        job_main(&ref[t]);
        assert_int_equal(ref[t].out.status, HZ_OK);
    }
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) assert_int_equal(pthread_create(&th[t], NULL, job_main, &par[t]), 0);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(par[t].out.status, HZ_OK);
        assert_memory_equal(par[t].out.tokens, ref[t].out.tokens, sizeof ref[t].out.tokens);
        assert_memory_equal(par[t].out.logits, ref[t].out.logits, (size_t)STEPS * on.vocab * sizeof(float));
        free(par[t].out.logits);
        free(ref[t].out.logits);
    }
    hz_cache_prefetch_wait(on.c);
    assert_int_equal(tu_stat(on.c, "prefetch_requests"), THREADS * STEPS);
    assert_int_equal(tu_stat(on.c, "prefetch_failures"), 0);
    tu_check_invariants(on.c);
    stack_close(&on);
    stack_close(&off);
    remove_model(dir);
}

/* ---- the gate through the model ---- */

/* A cache whose gate closes at the first prefetched expert given up (HZ_PREFETCH_GATE_PCT=100 with a
 * window of 1; predictions loaded synchronously, HZ_PREFETCH_SYNC=1, so the counts are fixed) declines
 * the model's later predictions: the model then computes no prediction, the declined steps still count
 * as requests, fewer experts are prefetched than with the gate off, and tokens and logits stay those of
 * decoding without prefetch. */
static void test_gate_declines_model_predictions(void **state) {
    int transport = *(const int *)*state;
    char path[512];
    char *dir = write_model(path, sizeof path, HZ_ARCH_OLMOE, 7);
    stack off, free_gate, gated;
    stack_open(&off, path, 3, transport, HZ_PREFETCH_OFF);
    /* Each prediction is loaded before the step goes on: otherwise a demand miss may cancel a load or a
     * newer prediction replace a queued one, and how many experts are given up depends on scheduling. */
    setenv("HZ_PREFETCH_SYNC", "1", 1);
    setenv("HZ_PREFETCH_GATE_PCT", "0", 1);
    stack_open(&free_gate, path, 3, transport, HZ_PREFETCH_NEXT_LAYER);
    setenv("HZ_PREFETCH_GATE_PCT", "100", 1);
    setenv("HZ_PREFETCH_GATE_WINDOW", "1", 1);
    stack_open(&gated, path, 3, transport, HZ_PREFETCH_NEXT_LAYER);
    unsetenv("HZ_PREFETCH_GATE_PCT");
    unsetenv("HZ_PREFETCH_GATE_WINDOW");
    unsetenv("HZ_PREFETCH_SYNC");
    const uint32_t V = off.vocab;
    run_out a = {.logits = calloc((size_t)STEPS * V, sizeof(float))};
    run_out b = {.logits = calloc((size_t)STEPS * V, sizeof(float))};
    run_out g = {.logits = calloc((size_t)STEPS * V, sizeof(float))};
    assert_non_null(a.logits);
    assert_non_null(b.logits);
    assert_non_null(g.logits);
    assert_int_equal(run(off.m, NULL, V, 0, &a), HZ_OK);
    assert_int_equal(run(free_gate.m, free_gate.c, V, 0, &b), HZ_OK);
    assert_int_equal(run(gated.m, gated.c, V, 0, &g), HZ_OK);
    assert_memory_equal(a.tokens, g.tokens, sizeof a.tokens);
    assert_memory_equal(a.logits, g.logits, (size_t)STEPS * V * sizeof(float));
    hz_cache_prefetch_wait(free_gate.c);
    hz_cache_prefetch_wait(gated.c);
    fprintf(stderr, "  %-10s gate off: %.0f experts prefetched, %.0f used, %.0f wasted; gate at 100%%/1: %.0f, "
                    "%.0f, %.0f, %.0f predictions declined, %.0f closures\n",
            tu_transport_name(transport), tu_stat(free_gate.c, "prefetch_experts"),
            tu_stat(free_gate.c, "prefetch_hits"),
            tu_stat(free_gate.c, "prefetch_wasted_bytes") / tu_stat(free_gate.c, "row_bytes"),
            tu_stat(gated.c, "prefetch_experts"), tu_stat(gated.c, "prefetch_hits"),
            tu_stat(gated.c, "prefetch_wasted_bytes") / tu_stat(gated.c, "row_bytes"), tu_stat(gated.c, "prefetch_gated"),
            tu_stat(gated.c, "prefetch_gate_closed"));
    assert_true(tu_stat(free_gate.c, "prefetch_wasted_bytes") > 0); /* this model and seed waste some */
    assert_int_equal(tu_stat(free_gate.c, "prefetch_gated"), 0);
    assert_true(tu_stat(gated.c, "prefetch_gate_closed") >= 1);
    assert_true(tu_stat(gated.c, "prefetch_gated") > 0);
    assert_int_equal(tu_stat(gated.c, "prefetch_requests"), STEPS);
    assert_true(tu_stat(gated.c, "prefetch_experts") < tu_stat(free_gate.c, "prefetch_experts"));
    assert_true(tu_stat(gated.c, "misses") + tu_stat(gated.c, "prefetch_hits") == tu_stat(off.c, "misses"));
    tu_check_invariants(gated.c);
    free(a.logits);
    free(b.logits);
    free(g.logits);
    stack_close(&gated);
    stack_close(&free_gate);
    stack_close(&off);
    remove_model(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TU_TRANSPORT_TESTS(test_olmoe, NULL, NULL),
        TU_TRANSPORT_TESTS(test_qwen, NULL, NULL),
        TU_TRANSPORT_TESTS(test_threads_share_prefetching_cache, NULL, NULL),
        TU_TRANSPORT_TESTS(test_gate_declines_model_predictions, NULL, NULL),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
