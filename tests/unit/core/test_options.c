/* The options-struct initialisers (doc/abi.md): hz_X_init_sized fills defaults into exactly `size`
 * bytes and stores size as struct_size, never writing past it (a struct from an older header is
 * smaller than the library's); the hz_X_init macro passes the caller's sizeof; the exported functions
 * hz_X_init (the compatibility entry points) fill the sizes of 0.1.0, the last header without the macros. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

#include "core/core.h"

enum { BUF = 256, POISON = 0xa5 };

static uint32_t struct_size_of(const unsigned char *buf) {
    uint32_t v;
    memcpy(&v, buf, sizeof v);
    return v;
}

static void assert_poisoned(const unsigned char *buf, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (buf[i] != POISON) fail_msg("byte %zu of %zu was written (past the size passed)", i, to);
}

static void assert_zero(const unsigned char *buf, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (buf[i] != 0) fail_msg("byte %zu is %u, not zeroed", i, buf[i]);
}

/* One initialiser against the full default struct `full` (filled through the macro): every size from
 * 0 to well past the struct writes exactly min(size, sizeof) default bytes, zeroes the rest up to size,
 * and stores struct_size = size (sizes below 4 write nothing). */
typedef void (*init_sized_fn)(void *p, size_t size);

static void check_sized(init_sized_fn fn, const void *full, size_t full_size) {
    _Alignas(max_align_t) unsigned char buf[BUF];
    for (size_t size = 0; size <= full_size + 24; size++) {
        memset(buf, POISON, sizeof buf);
        fn(buf, size);
        if (size < sizeof(uint32_t)) {
            assert_poisoned(buf, 0, sizeof buf);
            continue;
        }
        assert_int_equal(struct_size_of(buf), size);
        size_t known = size < full_size ? size : full_size;
        if (known > sizeof(uint32_t))
            assert_memory_equal(buf + 4, (const unsigned char *)full + 4, known - 4);
        assert_zero(buf, known, size);
        assert_poisoned(buf, size, sizeof buf);
    }
    fn(NULL, full_size); /* NULL: nothing, no crash */
    memset(buf, POISON, sizeof buf);
    fn(buf, (size_t)UINT32_MAX + 1u); /* struct_size cannot hold it: nothing */
    assert_poisoned(buf, 0, sizeof buf);
}

#define SIZED_ADAPTER(type)                                                                          \
    static void type##_adapter(void *p, size_t size) { type##_init_sized((type *)p, size); }

SIZED_ADAPTER(hz_backing_options)
SIZED_ADAPTER(hz_cache_options)
SIZED_ADAPTER(hz_model_options)
SIZED_ADAPTER(hz_model_info)
SIZED_ADAPTER(hz_session_options)
SIZED_ADAPTER(hz_sampler_options)

static void test_sized_writes_only_size_bytes(void **state) {
    (void)state;
#define CHECK_TYPE(type)                                                                             \
    do {                                                                                             \
        type full;                                                                                   \
        memset(&full, POISON, sizeof full);                                                          \
        type##_init(&full);                                                                          \
        assert_int_equal(full.struct_size, sizeof full);                                             \
        check_sized(type##_adapter, &full, sizeof full);                                             \
    } while (0)
    CHECK_TYPE(hz_backing_options);
    CHECK_TYPE(hz_cache_options);
    CHECK_TYPE(hz_model_options);
    CHECK_TYPE(hz_model_info);
    CHECK_TYPE(hz_session_options);
    CHECK_TYPE(hz_sampler_options);
#undef CHECK_TYPE
}

static void test_defaults(void **state) {
    (void)state;
    hz_cache_options co;
    memset(&co, POISON, sizeof co);
    hz_cache_options_init(&co);
    assert_int_equal(co.capacity, 0);
    assert_int_equal(co.spare_rows, 0);
    assert_int_equal(co.staging_bytes, 0);
    assert_int_equal(co.eviction, HZ_EVICT_LRU);
    assert_int_equal(co.transport, HZ_TRANSPORT_SERIAL);
    assert_null(co.initial_placement);
    assert_int_equal(co.initial_placement_count, 0);
    assert_int_equal(co.staging_threads, 0);
    assert_int_equal(co.prefetch, HZ_PREFETCH_OFF);

    hz_sampler_options so;
    memset(&so, POISON, sizeof so);
    hz_sampler_options_init(&so);
    assert_true(so.temperature == 0.0f && so.top_p == 1.0f);
    assert_int_equal(so.top_k, 0);
    assert_int_equal(so.seed, 0);

    hz_model_options mo;
    memset(&mo, POISON, sizeof mo);
    hz_model_options_init(&mo);
    assert_null(mo.executor);
    assert_int_equal(mo.flags, 0);
    assert_int_equal(mo.struct_size, sizeof mo);

    /* a struct cut before top_p (an older header) gets the fields it has, nothing after */
    _Alignas(max_align_t) unsigned char buf[BUF];
    memset(buf, POISON, sizeof buf);
    hz_sampler_options_init_sized((hz_sampler_options *)(void *)buf, offsetof(hz_sampler_options, top_p));
    assert_int_equal(struct_size_of(buf), offsetof(hz_sampler_options, top_p));
    assert_poisoned(buf, offsetof(hz_sampler_options, top_p), sizeof buf);
}

/* The structs as the last header without the *_init macros (0.1.0) laid them out. Every binary that
 * calls a compatibility entry point (hz_X_init the function, not the macro) was built against such a
 * header, so that function must fill exactly these sizes forever, whatever fields are appended later
 * (doc/abi.md). A struct that grows fails test_compatibility_entry_points until its entry point is
 * changed to keep filling the size below. */
struct backing_options_0_1_0 { uint32_t struct_size, flags; };
struct cache_options_0_1_0 {
    uint32_t struct_size, capacity, spare_rows;
    uint64_t staging_bytes;
    int32_t eviction, transport;
    const uint32_t *initial_placement;
    uint32_t initial_placement_count, staging_threads;
    int32_t prefetch;
};
struct model_options_0_1_0 { uint32_t struct_size; const char *executor; };
struct model_info_0_1_0 {
    uint32_t struct_size, vocab_size, hidden_size, layers, experts, top_k, max_context;
    int32_t eos_token, bos_token;
};
struct session_options_0_1_0 { uint32_t struct_size, max_context; };
struct sampler_options_0_1_0 {
    uint32_t struct_size;
    float temperature;
    uint32_t top_k;
    float top_p;
    uint64_t seed;
};

/* The exported functions of the old names (the parentheses bypass the macros) fill the 0.1.0 sizes:
 * binaries built before the macros keep working unchanged. The macros pass the caller's sizeof. */
static void test_compatibility_entry_points(void **state) {
    (void)state;
    _Alignas(max_align_t) unsigned char buf[BUF];
#define OLD_SIZE(type, old)                                                                          \
    do {                                                                                             \
        memset(buf, POISON, sizeof buf);                                                             \
        (type##_init)((type *)(void *)buf);                                                          \
        assert_int_equal(struct_size_of(buf), sizeof(struct old));                                   \
        assert_poisoned(buf, sizeof(struct old), sizeof buf);                                        \
    } while (0)
    OLD_SIZE(hz_backing_options, backing_options_0_1_0);
    OLD_SIZE(hz_cache_options, cache_options_0_1_0);
    OLD_SIZE(hz_model_options, model_options_0_1_0);
    OLD_SIZE(hz_model_info, model_info_0_1_0);
    OLD_SIZE(hz_session_options, session_options_0_1_0);
    OLD_SIZE(hz_sampler_options, sampler_options_0_1_0);
#undef OLD_SIZE

    hz_cache_options a, b;
    memset(&a, POISON, sizeof a);
    memset(&b, 0, sizeof b);
    (hz_cache_options_init)(&a);
    hz_cache_options_init(&b);
    assert_memory_equal(&a, &b, sizeof a);
    assert_int_equal(a.struct_size, sizeof a);
    (hz_backing_options_init)(NULL); /* NULL: nothing */
    hz_backing_options_init(NULL);

#define SAME(type)                                                                                   \
    do {                                                                                             \
        type x, y;                                                                                   \
        memset(&x, POISON, sizeof x);                                                                \
        memset(&y, 0, sizeof y);                                                                     \
        (type##_init)(&x);                                                                           \
        type##_init_sized(&y, sizeof y);                                                             \
        assert_memory_equal(&x, &y, sizeof x);                                                       \
    } while (0)
    SAME(hz_backing_options);
    SAME(hz_model_info);
    SAME(hz_session_options);
    SAME(hz_sampler_options);
#undef SAME

    /* hz_model_options grew after 0.1.0 (flags): its entry point fills only the old fields,
     * with the same defaults as the macro there (OLD_SIZE above checks it writes nothing past them) */
    hz_model_options mx, my;
    memset(&mx, 0, sizeof mx);
    memset(&my, 0, sizeof my);
    (hz_model_options_init)(&mx);
    hz_model_options_init_sized(&my, offsetof(hz_model_options, flags));
    assert_memory_equal(&mx, &my, sizeof mx);
    assert_int_equal(mx.struct_size, offsetof(hz_model_options, flags));
    assert_null(mx.executor);
}

/* hz_options_merge: the caller's first struct_size bytes over the defaults, struct_size set to the
 * library's size, a struct_size below the minimum refused with the caller's name in the message. */
static void test_merge(void **state) {
    (void)state;
    unsigned char o[16], opts[16];
    const uint32_t known = sizeof o;
    memset(o, 0x11, sizeof o);
    assert_int_equal(hz_options_merge(o, known, NULL, 0, "t"), HZ_OK); /* no options: the defaults stay */
    for (size_t i = 0; i < sizeof o; i++) assert_int_equal(o[i], 0x11);

    memset(opts, 0x22, sizeof opts);
    uint32_t size = 12; /* an older, shorter struct: bytes 12..15 keep the defaults */
    memcpy(opts, &size, sizeof size);
    assert_int_equal(hz_options_merge(o, known, opts, 8, "t"), HZ_OK);
    assert_int_equal(struct_size_of(o), known);
    for (size_t i = 4; i < 12; i++) assert_int_equal(o[i], 0x22);
    for (size_t i = 12; i < sizeof o; i++) assert_int_equal(o[i], 0x11);

    size = 64; /* a newer, longer struct: only the bytes this library knows are read */
    memcpy(opts, &size, sizeof size);
    assert_int_equal(hz_options_merge(o, known, opts, 0, "t"), HZ_OK);
    assert_int_equal(struct_size_of(o), known);

    memset(o, 0x11, sizeof o);
    size = 6; /* below the minimum: refused, nothing copied */
    memcpy(opts, &size, sizeof size);
    assert_int_equal(hz_options_merge(o, known, opts, 8, "who"), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), "who: options struct_size 6 too small"));
    for (size_t i = 0; i < sizeof o; i++) assert_int_equal(o[i], 0x11);
    size = 2; /* below the struct_size field itself */
    memcpy(opts, &size, sizeof size);
    assert_int_equal(hz_options_merge(o, known, opts, 0, "who"), HZ_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_sized_writes_only_size_bytes),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_compatibility_entry_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
