/* The immutable host backing: synthetic backings, read-only routed region (a write faults), describe,
 * close refusing while children live, argument errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <cJSON.h>

#include "backing/backing.h"
#include "fixture.h"

static hz_model_config tiny(hz_arch arch) {
    hz_model_config cfg;
    assert_int_equal(hz_config_preset(arch, "tiny", &cfg), HZ_OK);
    return cfg;
}

static void test_synthetic_deterministic(void **state) {
    (void)state;
    hz_model_config cfg = tiny(HZ_ARCH_QWEN2MOE);
    hz_host_backing *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(hz_backing_create_synthetic(&cfg, 42, &a), HZ_OK);
    assert_int_equal(hz_backing_create_synthetic(&cfg, 42, &b), HZ_OK);
    assert_int_equal(hz_backing_create_synthetic(&cfg, 43, &c), HZ_OK);
    const hz_expert_layout *L = hz_backing_expert_layout(a);
    hz_expert_layout want;
    hz_expert_layout_init(&want, cfg.hidden, cfg.expert_inter);
    assert_int_equal(L->blob_bytes, want.blob_bytes);
    assert_int_equal(hz_backing_config(a)->experts, cfg.experts);
    int differs = 0;
    for (uint32_t l = 0; l < cfg.layers; l++)
        for (uint32_t e = 0; e < cfg.experts; e++) {
            const uint8_t *x = hz_backing_expert_blob(a, l, e), *y = hz_backing_expert_blob(b, l, e);
            assert_non_null(x);
            assert_memory_equal(x, y, L->blob_bytes);
            differs |= memcmp(x, hz_backing_expert_blob(c, l, e), L->blob_bytes) != 0;
            /* blobs of one backing differ from each other */
            if (e > 0) assert_memory_not_equal(x, hz_backing_expert_blob(a, l, e - 1), 64);
            assert_int_equal((uintptr_t)x % 4096, 0);
        }
    assert_true(differs);
    assert_null(hz_backing_expert_blob(a, cfg.layers, 0));
    assert_null(hz_backing_expert_blob(a, 0, cfg.experts));
    uint64_t bytes = 0;
    const uint8_t *region = hz_backing_routed_region(a, &bytes);
    assert_ptr_equal(region, hz_backing_expert_blob(a, 0, 0));
    assert_int_equal(bytes, (uint64_t)cfg.layers * cfg.experts * ((L->blob_bytes + 4095) / 4096 * 4096));
    assert_string_equal(hz_host_backing_identity(a), hz_host_backing_identity(b));
    assert_string_not_equal(hz_host_backing_identity(a), hz_host_backing_identity(c));
    assert_null(hz_backing_find_tensor(a, "lm_head.weight"));
    assert_int_equal(hz_host_backing_close(a), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
    assert_int_equal(hz_host_backing_close(c), HZ_OK);
}

/* Forks; the child writes one byte into `p`, which must kill it with SIGSEGV. */
static void expect_write_faults(const uint8_t *p) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* sanitizers install a SIGSEGV handler that exits instead of dying by the signal */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGSEGV, &sa, NULL);
        *(volatile uint8_t *)(uintptr_t)p = (uint8_t)(*p + 1);
        _exit(0); /* reached only if the write went through */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status)) fail_msg("child exited with %d: the write went through", WEXITSTATUS(status));
    assert_int_equal(WTERMSIG(status), SIGSEGV);
}

static void test_synthetic_readonly(void **state) {
    (void)state;
    hz_model_config cfg = tiny(HZ_ARCH_OLMOE);
    hz_host_backing *b = NULL;
    assert_int_equal(hz_backing_create_synthetic(&cfg, 1, &b), HZ_OK);
    expect_write_faults(hz_backing_expert_blob(b, 0, 0));
    expect_write_faults(hz_backing_expert_blob(b, cfg.layers - 1, cfg.experts - 1) + 17);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

static void test_file_backing_readonly_and_describe(void **state) {
    (void)state;
    char id[HZ_IDENTITY_HEX_BYTES];
    char *p = fixture_write_artifact(HZ_ARCH_OLMOE, 3, id);
    hz_host_backing *b = NULL;
    assert_int_equal(hz_host_backing_open(p, NULL, &b), HZ_OK);
    /* the file is no longer needed once the backing is open */
    assert_int_equal(unlink(p), 0);
    const hz_model_config *cfg = hz_backing_config(b);
    expect_write_faults(hz_backing_expert_blob(b, 1, 2));
    uint64_t rb = 0;
    const uint8_t *region = hz_backing_routed_region(b, &rb);
    expect_write_faults(region + rb - 1);
    /* non-routed tensors are read-only as well */
    expect_write_faults((const uint8_t *)hz_backing_find_tensor(b, "model.embed_tokens.weight")->data);

    char *json = NULL;
    assert_int_equal(hz_host_backing_describe_json(b, &json), HZ_OK);
    cJSON *d = cJSON_Parse(json);
    assert_non_null(d);
    assert_string_equal(cJSON_GetObjectItem(d, "identity")->valuestring, id);
    assert_string_equal(cJSON_GetObjectItem(d, "architecture")->valuestring, "olmoe");
    assert_string_equal(cJSON_GetObjectItem(d, "routed_region_protection")->valuestring, "read-only");
    assert_int_equal((uint64_t)cJSON_GetObjectItem(d, "layers")->valuedouble, cfg->layers);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(d, "experts")->valuedouble, cfg->experts);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(d, "blob_bytes")->valuedouble,
                     hz_backing_expert_layout(b)->blob_bytes);
    assert_int_equal((uint64_t)cJSON_GetObjectItem(d, "routed_bytes")->valuedouble, rb);
    assert_true(cJSON_GetObjectItem(d, "total_bytes")->valuedouble > (double)rb);
    assert_true(cJSON_GetObjectItem(d, "load_seconds")->valuedouble >= 0.0);
    cJSON *prec = cJSON_GetObjectItem(d, "precision");
    assert_string_equal(cJSON_GetObjectItem(prec, "routed")->valuestring, "int4");
    assert_int_equal((int)cJSON_GetObjectItem(prec, "block")->valuedouble, 256);
    assert_string_equal(cJSON_GetObjectItem(prec, "source_dtype")->valuestring, "bf16");
    assert_int_equal((int)cJSON_GetObjectItem(cJSON_GetObjectItem(d, "config"), "hidden_size")->valuedouble,
                     (int)cfg->hidden);
    cJSON_Delete(d);
    hz_free(json);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
    free(p);
}

static void test_close_busy(void **state) {
    (void)state;
    hz_model_config cfg = tiny(HZ_ARCH_OLMOE);
    hz_host_backing *b = NULL;
    assert_int_equal(hz_backing_create_synthetic(&cfg, 9, &b), HZ_OK);
    hz_backing_child_add(b);
    hz_backing_child_add(b);
    assert_int_equal(hz_host_backing_close(b), HZ_EBUSY);
    assert_non_null(strstr(hz_last_error_message(), "2 cache"));
    hz_backing_child_remove(b);
    assert_int_equal(hz_host_backing_close(b), HZ_EBUSY);
    hz_backing_child_remove(b);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
    assert_int_equal(hz_host_backing_close(NULL), HZ_OK);
}

static void *churn(void *arg) {
    hz_host_backing *b = arg;
    for (int i = 0; i < 20000; i++) {
        hz_backing_child_add(b);
        hz_backing_child_remove(b);
    }
    return NULL;
}

static void test_child_count_threads(void **state) {
    (void)state;
    hz_model_config cfg = tiny(HZ_ARCH_QWEN2MOE);
    hz_host_backing *b = NULL;
    assert_int_equal(hz_backing_create_synthetic(&cfg, 9, &b), HZ_OK);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, churn, b), 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

static void test_arguments(void **state) {
    (void)state;
    hz_backing_options o;
    memset(&o, 0xff, sizeof o);
    hz_backing_options_init(&o);
    assert_int_equal(o.struct_size, sizeof o);
    assert_int_equal(o.flags, 0);
    hz_backing_options_init(NULL);
    hz_host_backing *b = (hz_host_backing *)0x1;
    assert_int_equal(hz_host_backing_open(NULL, NULL, &b), HZ_EINVAL);
    assert_null(b);
    assert_int_equal(hz_host_backing_open("x", NULL, NULL), HZ_EINVAL);
    assert_int_equal(hz_host_backing_open("/nonexistent/dir/model.hzq", NULL, &b), HZ_EIO);
    assert_non_null(strstr(hz_last_error_message(), "/nonexistent/dir/model.hzq"));
    assert_int_equal(hz_host_backing_open("/", NULL, &b), HZ_EIO);
    char *json = (char *)0x1;
    assert_int_equal(hz_host_backing_describe_json(NULL, &json), HZ_EINVAL);
    assert_null(json);
    assert_int_equal(hz_backing_create_synthetic(NULL, 0, &b), HZ_EINVAL);
    assert_null(hz_host_backing_identity(NULL));
    assert_null(hz_backing_expert_blob(NULL, 0, 0));
    /* an options struct from an older caller that has no flags field is accepted */
    hz_backing_options old = {.struct_size = sizeof(uint32_t), .flags = 0xdead};
    char id[HZ_IDENTITY_HEX_BYTES];
    char *p = fixture_write_artifact(HZ_ARCH_QWEN2MOE, 1, id);
    assert_int_equal(hz_host_backing_open(p, &old, &b), HZ_OK);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
    unlink(p);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_deterministic),
        cmocka_unit_test(test_synthetic_readonly),
        cmocka_unit_test(test_file_backing_readonly_and_describe),
        cmocka_unit_test(test_close_busy),
        cmocka_unit_test(test_child_count_threads),
        cmocka_unit_test(test_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
