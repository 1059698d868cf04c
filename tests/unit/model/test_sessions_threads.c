/* Distinct sessions of one model and one cache on distinct threads (doc/api.md's threading rule):
 * every thread's greedy tokens and final logits must equal a single-threaded run of the same prompt,
 * at a partial residency where the threads' misses and evictions interleave in the shared cache.
 * Run under ThreadSanitizer by scripts/test (suite 'cache'). HZ_TEST_DEVICE names another device than
 * "cpu" (cuda:0 on the GPU machine: the decode steps there queue each layer's experts ahead of the
 * routing, and the sessions' forwards take turns on the cache). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <horizon/horizon.h>

#include "tiny_model.h"

#define THREADS 4
#define PROMPT 6
#define STEPS 12

typedef struct job {
    hz_model *model;
    uint32_t vocab;
    int32_t prompt[PROMPT];
    int32_t tokens[STEPS];
    float *logits; /* [vocab] after the last step */
    int status;
} job;

static int run(job *j) {
    hz_session *s = NULL;
    int st = hz_session_create(j->model, NULL, &s);
    if (st) return st;
    int32_t next = 0;
    st = hz_prefill(s, j->prompt, PROMPT, &next);
    for (int i = 0; i < STEPS && !st; i++) {
        j->tokens[i] = next;
        st = hz_decode_step(s, next, &next);
    }
    const float *lg = NULL;
    uint32_t n = 0;
    if (!st) st = hz_session_logits(s, &lg, &n);
    if (!st) memcpy(j->logits, lg, (size_t)n * sizeof *lg);
    /* the message is this thread's: say it here, the status alone reaches the checks */
    if (st) fprintf(stderr, "session: %s: %s\n", hz_status_name(st), hz_last_error_message());
    hz_session_destroy(s);
    return st;
}

static void *thread_main(void *arg) {
    job *j = arg;
    j->status = run(j);
    return NULL;
}

static void check_arch(hz_arch arch, uint32_t capacity) {
    char *dir = NULL;
    assert_int_equal(tiny_tmpdir(&dir), HZ_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/m.hzq", dir);
    assert_int_equal(tiny_model_write(path, arch, 5), HZ_OK);

    hz_host_backing *b = NULL;
    hz_device *d = NULL;
    hz_cache *c = NULL;
    hz_model *m = NULL;
    assert_int_equal(hz_host_backing_open(path, NULL, &b), HZ_OK);
    const char *dev = getenv("HZ_TEST_DEVICE");
    assert_int_equal(hz_device_open(dev && *dev ? dev : "cpu", &d), HZ_OK);
    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = capacity;
    assert_int_equal(hz_cache_create(b, d, &co, &c), HZ_OK);
    assert_int_equal(hz_model_create(b, d, c, NULL, &m), HZ_OK);
    hz_model_info info;
    hz_model_info_init(&info);
    assert_int_equal(hz_model_get_info(m, &info), HZ_OK);

    job ref[THREADS], par[THREADS];
    for (int t = 0; t < THREADS; t++) {
        for (int k = 0; k < 2; k++) {
            job *j = k ? &par[t] : &ref[t];
            memset(j, 0, sizeof *j);
            j->model = m;
            j->vocab = info.vocab_size;
            for (int i = 0; i < PROMPT; i++) j->prompt[i] = (int32_t)((t * 37 + i * 11 + 1) % info.vocab_size);
            j->logits = calloc(info.vocab_size, sizeof(float));
            assert_non_null(j->logits);
        }
    }
    /* the reference: one session after another */
    for (int t = 0; t < THREADS; t++) assert_int_equal(run(&ref[t]), HZ_OK);
    /* the same prompts at once, one thread each, sharing the model and the cache */
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) assert_int_equal(pthread_create(&th[t], NULL, thread_main, &par[t]), 0);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(par[t].status, HZ_OK);
        assert_memory_equal(par[t].tokens, ref[t].tokens, sizeof ref[t].tokens);
        assert_memory_equal(par[t].logits, ref[t].logits, info.vocab_size * sizeof(float));
        free(par[t].logits);
        free(ref[t].logits);
    }
    /* the threads really shared a partially resident cache: it missed, and never copied an expert back */
    char *stats = NULL;
    assert_int_equal(hz_cache_stats_json(c, &stats), HZ_OK);
    assert_null(strstr(stats, "\"misses\":0,"));
    assert_non_null(strstr(stats, "\"expert_d2h_bytes\":0,"));
    hz_free(stats);

    assert_int_equal(hz_model_destroy(m), HZ_OK);
    assert_int_equal(hz_cache_destroy(c), HZ_OK);
    assert_int_equal(hz_device_close(d), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
    tiny_rmdir(dir);
    free(dir);
}

static void test_olmoe_sessions_in_threads(void **state) {
    (void)state;
    check_arch(HZ_ARCH_OLMOE, 3);
}

static void test_qwen_sessions_in_threads(void **state) {
    (void)state;
    check_arch(HZ_ARCH_QWEN2MOE, 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_olmoe_sessions_in_threads),
        cmocka_unit_test(test_qwen_sessions_in_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
