/* lib/core: status names and messages, the thread-local last error, fp16/bf16 conversion, tuning
 * knobs from the environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/core.h"
#include "core/fp16.h"

static void test_names_and_messages(void **state) {
    (void)state;
    assert_string_equal(hz_status_name(HZ_OK), "HZ_OK");
    assert_string_equal(hz_status_name(HZ_EFORMAT), "HZ_EFORMAT");
    assert_string_equal(hz_status_name(HZ_EFAULTED), "HZ_EFAULTED");
    assert_string_equal(hz_status_name(12345), "HZ_UNKNOWN");
    assert_string_equal(hz_strerror(HZ_OK), "success");
    assert_string_equal(hz_strerror(-999), "unknown status");
    /* every code from the X-macro has a distinct name and a non-empty message */
#define CHECK_(name, value, message)                                                                \
    assert_string_equal(hz_status_name(value), #name);                                               \
    assert_true(strlen(hz_strerror(value)) > 0);
    HZ_STATUS_LIST(CHECK_)
#undef CHECK_
}

static void test_version(void **state) {
    (void)state;
    assert_int_equal(hz_version_number(), HZ_VERSION_NUMBER);
    assert_string_equal(hz_version(), "0.1.0");
}

static void *other_thread(void *arg) {
    (void)arg;
    /* a fresh thread sees an empty, non-NULL message */
    const char *m = hz_last_error_message();
    return (void *)(m != NULL && m[0] == '\0' ? (void *)1 : NULL);
}

static void test_last_error_is_thread_local(void **state) {
    (void)state;
    assert_non_null(hz_last_error_message());
    assert_int_equal(hz_error(HZ_EFORMAT, "tensor '%s' bad", "x.weight"), HZ_EFORMAT);
    assert_string_equal(hz_last_error_message(), "tensor 'x.weight' bad");
    hz_error_prefix(HZ_EFORMAT, "file %s", "a.safetensors");
    assert_string_equal(hz_last_error_message(), "file a.safetensors: tensor 'x.weight' bad");
    pthread_t t;
    void *ok = NULL;
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &ok);
    assert_non_null(ok);
    assert_string_equal(hz_last_error_message(), "file a.safetensors: tensor 'x.weight' bad");
}

static void test_fp16_roundtrip(void **state) {
    (void)state;
    /* every finite binary16 value converts to f32 and back to the same bits */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if (((h >> 10) & 0x1f) == 0x1f) continue;
        float f = hz_f16_to_f32((hz_f16)h);
        hz_f16 back = hz_f32_to_f16(f);
        if (h == 0x8000u) assert_int_equal(back, 0x8000u);
        else assert_int_equal(back, h);
    }
    assert_float_equal(hz_f16_to_f32(hz_f32_to_f16(1.0f)), 1.0f, 0.0f);
    assert_int_equal(hz_f32_to_f16(65504.0f), 0x7bffu);
    assert_int_equal(hz_f32_to_f16(65520.0f), 0x7c00u);         /* rounds to inf */
    assert_int_equal(hz_f32_to_f16(1.0f + 1.0f / 2048.0f), 0x3c00u); /* tie -> even */
    assert_int_equal(hz_f32_to_f16(1.0f + 3.0f / 2048.0f), 0x3c02u); /* tie -> even (up) */
    assert_int_equal(hz_f32_to_f16(5.9604644775390625e-8f), 0x0001u); /* smallest subnormal */
    assert_true(hz_f16_fits(65504.0f));
    assert_false(hz_f16_fits(70000.0f));
}

static void test_bf16(void **state) {
    (void)state;
    assert_int_equal(hz_f32_to_bf16(1.0f), 0x3f80u);
    assert_float_equal(hz_bf16_to_f32(0x3f80u), 1.0f, 0.0f);
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: rounds to even (1) */
    assert_int_equal(hz_f32_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80u);
    for (uint32_t h = 0; h < 0x10000u; h += 7) {
        if (((h >> 7) & 0xff) == 0xff) continue;
        assert_int_equal(hz_f32_to_bf16(hz_bf16_to_f32((hz_bf16)h)), h);
    }
}

/* hz_env_u32: a decimal number in range replaces the default; anything else leaves it. */
static void test_env_u32(void **state) {
    (void)state;
    static const struct {
        const char *val;
        int ok;
        uint32_t want;
    } cases[] = {{"7", 1, 7}, {"2", 1, 2}, {"9", 1, 9}, {"1", 0, 5}, {"10", 0, 5},
                 {"", 0, 5}, {"7x", 0, 5}, {"-3", 0, 5}, {"99999999999999999999", 0, 5}};
    uint32_t v = 5;
    unsetenv("HZ_TEST_KNOB");
    assert_int_equal(hz_env_u32("HZ_TEST_KNOB", 2, 9, &v), 0);
    assert_int_equal(v, 5);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        v = 5;
        setenv("HZ_TEST_KNOB", cases[i].val, 1);
        assert_int_equal(hz_env_u32("HZ_TEST_KNOB", 2, 9, &v), cases[i].ok);
        assert_int_equal(v, cases[i].want);
    }
    unsetenv("HZ_TEST_KNOB");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_messages),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_last_error_is_thread_local),
        cmocka_unit_test(test_fp16_roundtrip),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_env_u32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
