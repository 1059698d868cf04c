/* Whole-model tests on tiny random models of both architectures (CPU device, reference executor):
 * residency never changes the numerics, prefill equals token-by-token decode, bad input gets a clear
 * status, lifetimes are enforced, the sampler is deterministic per seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "backend/backend_fault.h"
#include "horizon/horizon.h"
#include "tiny_model.h"

typedef tiny_world world; /* the tiny pair (tiny_model.h), this file's group fixture */

/* An opened stack: backing, device, cache (capacity, 0 = all), model. */
typedef struct stack {
    hz_host_backing *b;
    hz_device *d;
    hz_cache *c;
    hz_model *m;
    hz_model_info info;
} stack;

#define CHECK(call)                                                                                 \
    do {                                                                                            \
        int st_ = (call);                                                                           \
        if (st_ != HZ_OK) fail_msg("%s -> %s: %s", #call, hz_status_name(st_), hz_last_error_message()); \
    } while (0)

static void stack_open(stack *s, const char *path, uint32_t capacity) {
    memset(s, 0, sizeof *s);
    CHECK(hz_host_backing_open(path, NULL, &s->b));
    CHECK(hz_device_open("cpu", &s->d));
    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = capacity;
    CHECK(hz_cache_create(s->b, s->d, &co, &s->c));
    CHECK(hz_model_create(s->b, s->d, s->c, NULL, &s->m));
    hz_model_info_init(&s->info);
    CHECK(hz_model_get_info(s->m, &s->info));
}

static void stack_close(stack *s) {
    CHECK(hz_model_destroy(s->m));
    CHECK(hz_cache_destroy(s->c));
    CHECK(hz_device_close(s->d));
    CHECK(hz_host_backing_close(s->b));
}

enum { PROMPT = 10, STEPS = 6 };
static const int32_t k_prompt[PROMPT] = {5, 17, 300, 42, 42, 7, 511, 0, 128, 64};

/* Prompt + STEPS greedy steps; records the logits after the prompt and after each step. */
static void run_greedy(stack *s, float *logits, int32_t *tokens) {
    hz_session *ss = NULL;
    CHECK(hz_session_create(s->m, NULL, &ss));
    int32_t next = -1;
    CHECK(hz_prefill(ss, k_prompt, PROMPT, &next));
    const uint32_t V = s->info.vocab_size;
    for (int i = 0; i <= STEPS; i++) {
        const float *lg = NULL;
        uint32_t n = 0;
        CHECK(hz_session_logits(ss, &lg, &n));
        assert_int_equal(n, V);
        memcpy(logits + (size_t)i * V, lg, V * sizeof(float));
        tokens[i] = next;
        if (i < STEPS) CHECK(hz_decode_step(ss, next, &next));
    }
    assert_int_equal(hz_session_position(ss), PROMPT + STEPS);
    hz_session_destroy(ss);
}

static uint64_t stat_u64(hz_cache *c, const char *key) {
    char *js = NULL;
    CHECK(hz_cache_stats_json(c, &js));
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(js, pat);
    uint64_t v = p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
    hz_free(js);
    return v;
}

static void residency_case(const char *path, uint32_t small) {
    stack full, part;
    stack_open(&full, path, 0);
    stack_open(&part, path, small);
    const uint32_t V = full.info.vocab_size;
    float *la = malloc((size_t)(STEPS + 1) * V * sizeof(float)), *lb = malloc((size_t)(STEPS + 1) * V * sizeof(float));
    int32_t ta[STEPS + 1], tb[STEPS + 1];
    run_greedy(&full, la, ta);
    run_greedy(&part, lb, tb);
    assert_memory_equal(ta, tb, sizeof ta);
    assert_memory_equal(la, lb, (size_t)(STEPS + 1) * V * sizeof(float));
    uint64_t misses = stat_u64(part.c, "misses"), full_misses = stat_u64(full.c, "misses");
    print_message("%s: capacity %u: %llu misses (full residency: %llu); tokens", path, small,
                  (unsigned long long)misses, (unsigned long long)full_misses);
    for (int i = 0; i <= STEPS; i++) print_message(" %d", ta[i]);
    print_message("\n");
    assert_int_equal(full_misses, 0);
    assert_true(misses > 0 && misses != UINT64_MAX); /* the partial cache really served misses */
    assert_int_equal(stat_u64(part.c, "expert_d2h_bytes"), 0);
    free(la);
    free(lb);
    stack_close(&full);
    stack_close(&part);
}

static void test_residency_bit_identical(void **state) {
    world *w = *state;
    residency_case(w->path[0], 2); /* olmoe tiny: 8 experts, top-2 */
    residency_case(w->path[1], 4); /* qwen tiny: 8 experts, top-4 */
}

/* Prefill of n tokens equals n single-token steps, bit for bit (the arithmetic per token is the same
 * and the grouping of experts does not change the sums). */
static void test_prefill_equals_steps(void **state) {
    world *w = *state;
    for (int a = 0; a < 2; a++) {
        stack s;
        stack_open(&s, w->path[a], 0);
        hz_session *p = NULL, *q = NULL;
        CHECK(hz_session_create(s.m, NULL, &p));
        CHECK(hz_session_create(s.m, NULL, &q));
        int32_t np = -1, nq = -1;
        CHECK(hz_prefill(p, k_prompt, PROMPT, &np));
        for (int i = 0; i < PROMPT; i++) CHECK(hz_decode_step(q, k_prompt[i], &nq));
        const float *lp, *lq;
        uint32_t n;
        CHECK(hz_session_logits(p, &lp, &n));
        CHECK(hz_session_logits(q, &lq, &n));
        assert_memory_equal(lp, lq, n * sizeof(float));
        assert_int_equal(np, nq);
        /* reset and run again: identical */
        CHECK(hz_session_reset(p));
        assert_int_equal(hz_session_position(p), 0);
        int32_t np2 = -1;
        CHECK(hz_prefill(p, k_prompt, PROMPT, &np2));
        CHECK(hz_session_logits(p, &lp, &n));
        assert_memory_equal(lp, lq, n * sizeof(float));
        char *js = NULL;
        CHECK(hz_session_stats_json(q, &js));
        assert_non_null(strstr(js, "\"tokens_decoded\":10"));
        hz_free(js);
        hz_session_destroy(p);
        hz_session_destroy(q);
        stack_close(&s);
    }
}

static void test_bad_input(void **state) {
    world *w = *state;
    stack s;
    stack_open(&s, w->path[0], 2);
    hz_session *ss = NULL;
    hz_session_options so;
    hz_session_options_init(&so);
    so.max_context = s.info.max_context + 1;
    assert_int_equal(hz_session_create(s.m, &so, &ss), HZ_ERANGE);
    assert_null(ss);
    so.max_context = 8;
    CHECK(hz_session_create(s.m, &so, &ss));

    const float *lg = NULL;
    uint32_t n = 0;
    assert_int_equal(hz_session_logits(ss, &lg, &n), HZ_ESTATE);
    int32_t next = 123;
    assert_int_equal(hz_prefill(ss, k_prompt, 0, &next), HZ_EINVAL);
    assert_true(strlen(hz_last_error_message()) > 0);
    assert_int_equal(hz_prefill(ss, NULL, 3, &next), HZ_EINVAL);
    assert_int_equal(hz_prefill(NULL, k_prompt, 3, &next), HZ_EINVAL);
    int32_t bad[3] = {1, (int32_t)s.info.vocab_size, 2};
    assert_int_equal(hz_prefill(ss, bad, 3, &next), HZ_ERANGE);
    assert_non_null(strstr(hz_last_error_message(), "vocabulary"));
    assert_int_equal(hz_decode_step(ss, -1, &next), HZ_ERANGE);
    assert_int_equal(hz_session_position(ss), 0);
    assert_int_equal(hz_prefill(ss, k_prompt, 9, &next), HZ_ERANGE); /* 9 > max_context 8 */
    assert_int_equal(hz_session_position(ss), 0);
    CHECK(hz_prefill(ss, k_prompt, 6, &next));
    CHECK(hz_decode_step(ss, next, &next));
    CHECK(hz_decode_step(ss, next, &next));
    assert_int_equal(hz_session_position(ss), 8);
    assert_int_equal(hz_decode_step(ss, next, &next), HZ_ERANGE); /* context full */
    assert_non_null(strstr(hz_last_error_message(), "max_context"));
    CHECK(hz_session_logits(ss, &lg, &n)); /* the last good logits stay readable */
    /* so do they after every other refusal for the arguments (horizon.h, hz_prefill: nothing is run) */
    const float *kept = lg;
    float first = lg[0];
    assert_int_equal(hz_prefill(ss, bad, 3, &next), HZ_ERANGE);
    assert_int_equal(hz_prefill(ss, k_prompt, 0, &next), HZ_EINVAL);
    assert_int_equal(hz_decode_step(ss, -1, &next), HZ_ERANGE);
    CHECK(hz_session_logits(ss, &lg, &n));
    assert_ptr_equal(lg, kept);
    assert_true(lg[0] == first);

    hz_sampler_options sp;
    hz_sampler_options_init(&sp);
    sp.temperature = -1.0f;
    assert_int_equal(hz_session_set_sampler(ss, &sp), HZ_EINVAL);
    sp.temperature = 1.0f;
    sp.top_p = 0.0f;
    assert_int_equal(hz_session_set_sampler(ss, &sp), HZ_EINVAL);

    /* a model with a live session refuses to go */
    assert_int_equal(hz_model_destroy(s.m), HZ_EBUSY);
    assert_non_null(strstr(hz_last_error_message(), "session"));
    /* and the model keeps its cache, device and backing alive */
    assert_int_equal(hz_cache_destroy(s.c), HZ_EBUSY);
    assert_int_equal(hz_device_close(s.d), HZ_EBUSY);
    assert_int_equal(hz_host_backing_close(s.b), HZ_EBUSY);
    hz_session_destroy(ss);
    hz_session_destroy(NULL);

    /* executors that do not run on the cpu device */
    hz_model_options mo;
    hz_model_options_init(&mo);
    mo.executor = "grouped";
    hz_model *m2 = NULL;
    assert_int_equal(hz_model_create(s.b, s.d, s.c, &mo, &m2), HZ_EUNSUPPORTED);
    assert_null(m2);
    assert_int_equal(hz_model_create(NULL, s.d, s.c, NULL, &m2), HZ_EINVAL);
    /* a cache made on another backing */
    hz_host_backing *other = NULL;
    CHECK(hz_host_backing_open(w->path[1], NULL, &other));
    assert_int_equal(hz_model_create(other, s.d, s.c, NULL, &m2), HZ_EINVAL);
    assert_null(m2);
    CHECK(hz_host_backing_close(other));
    assert_int_equal(hz_model_destroy(NULL), HZ_OK);
    stack_close(&s);
}

/* out_next may point into tokens (horizon.h): the tokens are read before it is written, so the call
 * runs the prompt as given and gives the same next token and logits as with a separate out_next. */
static void test_out_next_aliases_tokens(void **state) {
    world *w = *state;
    for (int a = 0; a < 2; a++) {
        stack s;
        stack_open(&s, w->path[a], 0);
        hz_session *p = NULL, *q = NULL;
        CHECK(hz_session_create(s.m, NULL, &p));
        CHECK(hz_session_create(s.m, NULL, &q));
        const int32_t prompt[4] = {1, 2, 3, 4};
        int32_t ref = -1;
        CHECK(hz_prefill(p, prompt, 4, &ref));
        int32_t toks[4] = {1, 2, 3, 4};
        CHECK(hz_prefill(q, toks, 4, &toks[0]));
        assert_int_equal(toks[0], ref);
        const float *lp, *lq;
        uint32_t n;
        CHECK(hz_session_logits(p, &lp, &n));
        CHECK(hz_session_logits(q, &lq, &n));
        assert_memory_equal(lp, lq, n * sizeof(float));
        /* the last element too (the one the sampled token depends on most directly) */
        CHECK(hz_session_reset(q));
        int32_t toks2[4] = {1, 2, 3, 4};
        CHECK(hz_prefill(q, toks2, 4, &toks2[3]));
        assert_int_equal(toks2[3], ref);
        CHECK(hz_session_logits(q, &lq, &n));
        assert_memory_equal(lp, lq, n * sizeof(float));
        /* on a refused call *out_next is 0 (written after the check, which saw the caller's tokens) */
        int32_t bad[2] = {(int32_t)s.info.vocab_size, 5};
        assert_int_equal(hz_prefill(q, bad, 2, &bad[1]), HZ_ERANGE);
        assert_non_null(strstr(hz_last_error_message(), "vocabulary"));
        assert_non_null(strstr(hz_last_error_message(), "token 0 of 2"));
        assert_int_equal(bad[1], 0);
        hz_session_destroy(p);
        hz_session_destroy(q);
        stack_close(&s);
    }
}

/* A bogus huge n (a negative count cast to uint32_t) is refused for its length before any token is
 * read: no read past the caller's 4-token buffer (the ASan build reports one), and the message is about
 * the length, not a garbage token. */
static void test_huge_n_refused_before_reading(void **state) {
    world *w = *state;
    stack s;
    stack_open(&s, w->path[0], 2);
    hz_session *ss = NULL;
    CHECK(hz_session_create(s.m, NULL, &ss));
    int32_t toks[4] = {1, 2, 3, 4};
    int32_t next = 123;
    assert_int_equal(hz_prefill(ss, toks, UINT32_MAX, &next), HZ_ERANGE);
    const char *msg = hz_last_error_message();
    print_message("n = UINT32_MAX: %s\n", msg);
    assert_non_null(strstr(msg, "4294967295 token(s)"));
    assert_non_null(strstr(msg, "max_context"));
    assert_null(strstr(msg, "vocabulary"));
    assert_int_equal(next, 0);
    assert_int_equal(hz_session_position(ss), 0);
    /* one past the context left is refused the same way, at a later position too */
    CHECK(hz_prefill(ss, toks, 4, &next));
    assert_int_equal(hz_prefill(ss, toks, (uint32_t)-1, &next), HZ_ERANGE);
    assert_non_null(strstr(hz_last_error_message(), "at position 4"));
    assert_int_equal(hz_session_position(ss), 4);
    hz_session_destroy(ss);
    stack_close(&s);
}

static void test_describe(void **state) {
    world *w = *state;
    for (int a = 0; a < 2; a++) {
        stack s;
        stack_open(&s, w->path[a], 0);
        char *js = NULL;
        CHECK(hz_model_describe_json(s.m, &js));
        print_message("%s\n", js);
        assert_non_null(strstr(js, "\"executor\":\"reference\""));
        assert_non_null(strstr(js, "\"accumulation\":\"f32\""));
        assert_non_null(strstr(js, "\"int4\""));
        assert_non_null(strstr(js, "\"checkpoint\":\"bf16\""));
        assert_non_null(strstr(js, a == 0 ? "\"olmoe\"" : "\"qwen2_moe\""));
        hz_free(js);
        assert_int_equal(s.info.vocab_size, 512);
        assert_int_equal(s.info.top_k, a == 0 ? 2 : 4);
        /* the lm_head screen: asked for by default, never built on the cpu */
        CHECK(hz_model_describe_json(s.m, &js));
        assert_non_null(strstr(js, "\"lm_head_screen\":{\"requested\":true,\"built\":null}"));
        hz_free(js);
        stack_close(&s);
    }
}

/* hz_model_options.flags: HZ_MODEL_NO_LM_HEAD_SCREEN declines the screen; a struct from the 0.1.0 header
 * (filled by the compatibility entry point, without `flags`) and one zero-filled by hand with its size
 * get the default (asked for). */
static void test_model_options_flags(void **state) {
    world *w = *state;
    stack s;
    stack_open(&s, w->path[0], 0);
    for (int k = 0; k < 3; k++) {
        hz_model_options mo;
        memset(&mo, 0xff, sizeof mo); /* a flags word read past struct_size would decline the screen */
        if (k == 0) {
            (hz_model_options_init)(&mo); /* the 0.1.0 size: flags lies past struct_size */
            assert_int_equal(mo.struct_size, offsetof(hz_model_options, flags));
        } else {
            memset(&mo, 0, sizeof mo);
            mo.struct_size = sizeof mo;
            if (k == 2) mo.flags = HZ_MODEL_NO_LM_HEAD_SCREEN;
        }
        hz_model *m = NULL;
        CHECK(hz_model_create(s.b, s.d, s.c, &mo, &m));
        char *js = NULL;
        CHECK(hz_model_describe_json(m, &js));
        const char *want = k == 2 ? "\"lm_head_screen\":{\"requested\":false" : "\"lm_head_screen\":{\"requested\":true";
        if (!strstr(js, want)) fail_msg("options %d: %s not in %s", k, want, js);
        hz_free(js);
        CHECK(hz_model_destroy(m));
    }
    stack_close(&s);
}

static void sample_run(hz_session *ss, const hz_sampler_options *sp, int32_t *out, int n) {
    CHECK(hz_session_reset(ss));
    CHECK(hz_session_set_sampler(ss, sp));
    int32_t next;
    CHECK(hz_prefill(ss, k_prompt, 4, &next));
    for (int i = 0; i < n; i++) {
        out[i] = next;
        CHECK(hz_decode_step(ss, next, &next));
    }
}

static void test_sampler(void **state) {
    world *w = *state;
    stack s;
    stack_open(&s, w->path[1], 0);
    hz_session *ss = NULL;
    CHECK(hz_session_create(s.m, NULL, &ss));
    hz_sampler_options sp;
    hz_sampler_options_init(&sp);
    assert_true(sp.temperature == 0.0f && sp.top_p == 1.0f);
    enum { N = 8 };
    int32_t a[N], b[N], c[N], d[N];
    sp.temperature = 1.5f;
    sp.top_k = 40;
    sp.top_p = 0.95f;
    sp.seed = 42;
    sample_run(ss, &sp, a, N);
    sample_run(ss, &sp, b, N);
    assert_memory_equal(a, b, sizeof a); /* same seed, same sequence */
    /* reset alone restarts the seed */
    CHECK(hz_session_reset(ss));
    int32_t next;
    CHECK(hz_prefill(ss, k_prompt, 4, &next));
    for (int i = 0; i < N; i++) {
        c[i] = next;
        CHECK(hz_decode_step(ss, next, &next));
    }
    assert_memory_equal(a, c, sizeof a);
    sp.top_k = 0; /* full-vocabulary path */
    sample_run(ss, &sp, c, N);
    sample_run(ss, &sp, d, N);
    assert_memory_equal(c, d, sizeof c);
    for (int i = 0; i < N; i++) assert_true(a[i] >= 0 && a[i] < 512 && c[i] >= 0 && c[i] < 512);
    /* top_k = 1 is greedy whatever the temperature */
    sp.top_k = 1;
    sample_run(ss, &sp, c, N);
    hz_sampler_options_init(&sp);
    sample_run(ss, &sp, d, N);
    assert_memory_equal(c, d, sizeof c);
    hz_session_destroy(ss);
    stack_close(&s);
}

/* A miss that fails before publication (an injected H2D failure) makes prefill / decode return the
 * error with nothing advanced; the session then continues and produces exactly the logits of a run
 * that never failed. */
static void test_cache_fault_mid_decode(void **state) {
    world *w = *state;
    stack ref;
    stack_open(&ref, w->path[0], 2);
    const uint32_t V = ref.info.vocab_size;
    float *la = malloc((size_t)(STEPS + 1) * V * sizeof(float));
    int32_t ta[STEPS + 1];
    run_greedy(&ref, la, ta);
    stack_close(&ref);

    hz_host_backing *b = NULL;
    hz_backend *cpu = NULL, *fault = NULL;
    hz_device *d = NULL;
    hz_cache *c = NULL;
    hz_model *m = NULL;
    hz_session *ss = NULL;
    CHECK(hz_host_backing_open(w->path[0], NULL, &b));
    CHECK(hz_backend_cpu_create(&cpu));
    CHECK(hz_backend_fault_create(cpu, &fault));
    CHECK(hz_device_wrap(fault, &d));
    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = 2;
    CHECK(hz_cache_create(b, d, &co, &c));
    CHECK(hz_model_create(b, d, c, NULL, &m));
    CHECK(hz_session_create(m, NULL, &ss));

    int32_t next = -1;
    hz_backend_fault_arm(fault, HZ_FAULT_COPY_H2D, 1, HZ_EDEVICE);
    int st = hz_prefill(ss, k_prompt, PROMPT, &next);
    assert_int_equal(st, HZ_EDEVICE);
    print_message("injected: %s\n", hz_last_error_message());
    assert_non_null(strstr(hz_last_error_message(), "layer"));
    assert_int_equal(hz_session_position(ss), 0);
    const float *lg = NULL;
    uint32_t n = 0;
    assert_int_equal(hz_session_logits(ss, &lg, &n), HZ_ESTATE);

    CHECK(hz_prefill(ss, k_prompt, PROMPT, &next));
    CHECK(hz_session_logits(ss, &lg, &n));
    assert_memory_equal(lg, la, V * sizeof(float));
    assert_int_equal(next, ta[0]);
    /* and once more in the middle of decoding */
    CHECK(hz_decode_step(ss, next, &next));
    hz_backend_fault_arm(fault, HZ_FAULT_COPY_H2D, 1, HZ_EDEVICE);
    int32_t tok = next;
    for (int tries = 0; tries < 8; tries++) { /* until a step misses and hits the fault */
        st = hz_decode_step(ss, tok, &next);
        if (st) break;
        tok = next;
    }
    assert_int_equal(st, HZ_EDEVICE);
    uint32_t pos = hz_session_position(ss);
    CHECK(hz_decode_step(ss, tok, &next));
    assert_int_equal(hz_session_position(ss), pos + 1);
    assert_true(hz_backend_fault_fired(fault) == 2);

    hz_session_destroy(ss);
    CHECK(hz_model_destroy(m));
    CHECK(hz_cache_destroy(c));
    CHECK(hz_device_close(d));
    CHECK(hz_host_backing_close(b));
    free(la);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_residency_bit_identical),
        cmocka_unit_test(test_prefill_equals_steps),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_out_next_aliases_tokens),
        cmocka_unit_test(test_huge_n_refused_before_reading),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_model_options_flags),
        cmocka_unit_test(test_sampler),
        cmocka_unit_test(test_cache_fault_mid_decode),
    };
    return cmocka_run_group_tests(tests, tiny_world_setup, tiny_world_teardown);
}
