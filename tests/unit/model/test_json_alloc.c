/* Every JSON producer under cJSON allocation failure: cJSON_InitHooks installs an allocator that fails
 * the Nth allocation (alone, then with every later one), for every N up to the number of allocations a
 * successful call makes. Each call must return HZ_OK with exactly the reference text or HZ_ENOMEM with
 * a message and no output, and leave no cJSON allocation behind (counted here; LeakSanitizer in the
 * ASan build). The library links the shared libcjson, as this test does, so the hooks apply to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "core/core.h"
#include "format/artifact.h"
#include "format/hfconfig.h"
#include "format/qpack.h"
#include "horizon/horizon.h"
#include "tiny_model.h"

#define CHECK(call)                                                                                 \
    do {                                                                                            \
        int st_ = (call);                                                                           \
        if (st_ != HZ_OK) fail_msg("%s -> %s: %s", #call, hz_status_name(st_), hz_last_error_message()); \
    } while (0)

/* ---- the failing allocator ------------------------------------------------------------------- */

enum { COUNT_ONLY, FAIL_ONE, FAIL_FROM };
static int g_mode;
static size_t g_fail_at, g_calls;
static long g_live; /* cJSON allocations not yet freed */

static void *t_malloc(size_t n) {
    size_t k = g_calls++;
    if ((g_mode == FAIL_ONE && k == g_fail_at) || (g_mode == FAIL_FROM && k >= g_fail_at)) return NULL;
    void *p = malloc(n);
    if (p) g_live++;
    return p;
}

static void t_free(void *p) {
    if (!p) return;
    g_live--;
    free(p);
}

static void hooks_install(int mode, size_t fail_at) {
    g_mode = mode;
    g_fail_at = fail_at;
    g_calls = 0;
    g_live = 0;
    cJSON_Hooks h = {.malloc_fn = t_malloc, .free_fn = t_free};
    cJSON_InitHooks(&h);
}

static void hooks_restore(void) { cJSON_InitHooks(NULL); }

/* An application's allocator whose blocks are not malloc's: each pointer handed to cJSON sits 16 bytes
 * into a malloc'd block, so memory of cJSON's that the library released with plain free() would be an
 * invalid free (an abort from glibc, a report from ASan). */
static long g_offset_live;
static void *off_malloc(size_t n) {
    unsigned char *p = malloc(n + 16);
    if (!p) return NULL;
    g_offset_live++;
    return p + 16;
}
static void off_free(void *p) {
    if (!p) return;
    g_offset_live--;
    free((unsigned char *)p - 16);
}

/* ---- the driver -------------------------------------------------------------------------------- */

/* A producer: HZ_OK and a malloc'd text in *out, or a status with *out NULL. */
typedef int (*producer_fn)(void *ctx, char **out);

static void check_producer(const char *name, producer_fn f, void *ctx) {
    char *ref = NULL;
    hooks_install(COUNT_ONLY, 0);
    int st = f(ctx, &ref);
    size_t total = g_calls;
    long live = g_live;
    hooks_restore();
    if (st) fail_msg("%s: reference call -> %s: %s", name, hz_status_name(st), hz_last_error_message());
    assert_non_null(ref);
    assert_int_equal(live, 0);
    assert_true(total > 0);
    size_t enomem = 0;
    for (int mode = FAIL_ONE; mode <= FAIL_FROM; mode++) {
        for (size_t n = 0; n <= total; n++) { /* n == total: nothing fails */
            static char sentinel;
            char *text = &sentinel; /* anything but NULL: the call must clear it */
            hooks_install(mode, n);
            st = f(ctx, &text);
            live = g_live;
            hooks_restore();
            if (live != 0) fail_msg("%s: failing allocation %zu of %zu (mode %d): %ld cJSON allocation(s) leaked",
                                    name, n, total, mode, live);
            if (st == HZ_OK) {
                assert_non_null(text);
                if (strcmp(text, ref) != 0)
                    fail_msg("%s: failing allocation %zu of %zu (mode %d) returned HZ_OK with other JSON:\n%s\n"
                             "expected:\n%s",
                             name, n, total, mode, text, ref);
                free(text);
            } else {
                if (st != HZ_ENOMEM)
                    fail_msg("%s: failing allocation %zu of %zu (mode %d) -> %s: %s", name, n, total, mode,
                             hz_status_name(st), hz_last_error_message());
                assert_null(text);
                assert_true(strlen(hz_last_error_message()) > 0);
                enomem++;
            }
            if (n == total) assert_int_equal(st, HZ_OK);
        }
    }
    print_message("%s: %zu cJSON allocations; %zu failed calls returned HZ_ENOMEM\n", name, total, enomem);
    free(ref);
}

/* ---- the producers ----------------------------------------------------------------------------- */

typedef tiny_world world; /* the tiny pair (tiny_model.h), this file's group fixture */

static int p_model(void *ctx, char **out) { return hz_model_describe_json(ctx, out); }
static int p_cache(void *ctx, char **out) { return hz_cache_stats_json(ctx, out); }
static int p_backing(void *ctx, char **out) { return hz_host_backing_describe_json(ctx, out); }
static int p_device(void *ctx, char **out) { return hz_device_describe_json(ctx, out); }

static int p_hfconfig(void *ctx, char **out) {
    *out = hz_hfconfig_to_json(ctx);
    return *out ? HZ_OK : hz_error(HZ_ENOMEM, "hz_hfconfig_to_json: NULL");
}

/* The public describe / stats producers on a model that has run (so that the cache's stats hold miss
 * rounds: miss_round_blobs is an array of arrays). */
static void test_public_producers(void **state) {
    world *w = *state;
    for (int a = 0; a < 2; a++) {
        hz_host_backing *b = NULL;
        hz_device *d = NULL;
        hz_cache *c = NULL;
        hz_model *m = NULL;
        hz_session *s = NULL;
        CHECK(hz_host_backing_open(w->path[a], NULL, &b));
        CHECK(hz_device_open("cpu", &d));
        hz_cache_options co;
        hz_cache_options_init(&co);
        co.capacity = 4;
        CHECK(hz_cache_create(b, d, &co, &c));
        CHECK(hz_model_create(b, d, c, NULL, &m));
        CHECK(hz_session_create(m, NULL, &s));
        const int32_t prompt[4] = {5, 17, 300, 42};
        int32_t next = 0;
        CHECK(hz_prefill(s, prompt, 4, &next));
        CHECK(hz_decode_step(s, next, &next));
        char *js = NULL;
        CHECK(hz_cache_stats_json(c, &js));
        assert_non_null(strstr(js, "\"miss_round_blobs\":[["));
        free(js);

        check_producer("hz_model_describe_json", p_model, m);
        check_producer("hz_cache_stats_json", p_cache, c);
        check_producer("hz_host_backing_describe_json", p_backing, b);
        check_producer("hz_device_describe_json", p_device, d);

        hz_session_destroy(s);
        CHECK(hz_model_destroy(m));
        CHECK(hz_cache_destroy(c));
        CHECK(hz_device_close(d));
        CHECK(hz_host_backing_close(b));
    }
}

static void test_hfconfig_to_json(void **state) {
    (void)state;
    const hz_arch archs[2] = {HZ_ARCH_OLMOE, HZ_ARCH_QWEN2MOE};
    for (int a = 0; a < 2; a++) {
        hz_model_config cfg;
        CHECK(hz_config_preset(archs[a], "tiny", &cfg));
        check_producer("hz_hfconfig_to_json", p_hfconfig, &cfg);
    }
}

/* The artifact manifest (built with cJSON when the writer finishes): a one-layer, two-expert artifact
 * of zeros. The output compared is the whole file. */
typedef struct artifact_ctx {
    char path[TINY_PATH_MAX];
    hz_model_config cfg;
} artifact_ctx;

static int write_small_artifact(const artifact_ctx *x) {
    hz_artifact_writer *w = NULL;
    int st = hz_artifact_writer_create(x->path, &x->cfg, "bf16", "0123456789abcdef0123456789abcdef", &w);
    if (st) return st;
    hz_tensor_spec *specs = NULL;
    uint32_t n = 0;
    st = hz_arch_nonrouted_tensors(&x->cfg, &specs, &n);
    for (uint32_t i = 0; i < n && !st; i++) {
        const hz_tensor_spec *sp = &specs[i];
        uint64_t bytes = sp->shape[0] * (sp->ndim > 1 ? sp->shape[1] : 1u) * 2u;
        void *zeros = calloc(1, bytes);
        st = zeros ? hz_artifact_writer_begin_tensor(w, sp->name, sp->ndim, sp->shape) : HZ_ENOMEM;
        if (!st) st = hz_artifact_writer_write(w, zeros, bytes);
        if (!st) st = hz_artifact_writer_end_tensor(w);
        free(zeros);
    }
    free(specs);
    hz_expert_layout layout;
    hz_expert_layout_init(&layout, x->cfg.hidden, x->cfg.expert_inter);
    uint8_t *blob = calloc(1, layout.blob_bytes);
    if (!st && !blob) st = HZ_ENOMEM;
    for (uint32_t l = 0; l < x->cfg.layers && !st; l++)
        for (uint32_t e = 0; e < x->cfg.experts && !st; e++) st = hz_artifact_writer_add_expert(w, l, e, blob);
    free(blob);
    if (st) {
        hz_artifact_writer_abort(w);
        return st;
    }
    return hz_artifact_writer_finish(w, NULL);
}

static int p_artifact(void *ctx, char **out) {
    const artifact_ctx *x = ctx;
    *out = NULL;
    remove(x->path);
    int st = write_small_artifact(x);
    if (st) return st;
    /* the file's bytes as hex: a text to compare */
    FILE *f = fopen(x->path, "rb");
    if (!f) return hz_error(HZ_EIO, "reopening %s", x->path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)len);
    char *hex = malloc((size_t)len * 2 + 1);
    size_t got = bytes ? fread(bytes, 1, (size_t)len, f) : 0;
    fclose(f);
    if (!bytes || !hex || got != (size_t)len) {
        free(bytes);
        free(hex);
        return hz_error(HZ_EIO, "reading %s back", x->path);
    }
    for (long i = 0; i < len; i++) snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
    hex[2 * len] = '\0';
    free(bytes);
    *out = hex;
    return HZ_OK;
}

static void test_artifact_manifest(void **state) {
    world *w = *state;
    artifact_ctx x;
    snprintf(x.path, sizeof x.path, "%s/small.hzq", w->dir);
    CHECK(hz_config_preset(HZ_ARCH_OLMOE, "tiny", &x.cfg));
    x.cfg.layers = 1, x.cfg.experts = 2, x.cfg.top_k = 1, x.cfg.vocab = 8;
    x.cfg.hidden = 64, x.cfg.heads = 1, x.cfg.kv_heads = 1, x.cfg.head_dim = 64, x.cfg.expert_inter = 64;
    x.cfg.eos = 7, x.cfg.pad = 1;
    check_producer("artifact manifest", p_artifact, &x);
    /* and what was written opens */
    char *hex = NULL;
    CHECK(p_artifact(&x, &hex));
    free(hex);
    hz_host_backing *b = NULL;
    CHECK(hz_host_backing_open(x.path, NULL, &b));
    CHECK(hz_host_backing_close(b));
    remove(x.path);
}

/* With the application's own cJSON allocator installed, every library call that parses or prints JSON
 * (the artifact's manifest and config on open, the describe and stats producers) still frees cJSON's
 * memory through cJSON and hands out only malloc'd text: the backing's config text was once cJSON's. */
static void test_foreign_hooks(void **state) {
    world *w = *state;
    for (int a = 0; a < 2; a++) {
        g_offset_live = 0;
        cJSON_Hooks h = {.malloc_fn = off_malloc, .free_fn = off_free};
        cJSON_InitHooks(&h);
        hz_host_backing *b = NULL;
        hz_device *d = NULL;
        hz_cache *c = NULL;
        hz_model *m = NULL;
        char *t1 = NULL, *t2 = NULL, *t3 = NULL;
        CHECK(hz_host_backing_open(w->path[a], NULL, &b));
        CHECK(hz_device_open("cpu", &d));
        CHECK(hz_cache_create(b, d, NULL, &c));
        CHECK(hz_model_create(b, d, c, NULL, &m));
        CHECK(hz_model_describe_json(m, &t1));
        CHECK(hz_cache_stats_json(c, &t2));
        CHECK(hz_host_backing_describe_json(b, &t3));
        free(t1); /* malloc'd, as the header says: plain free is right whatever the hooks */
        free(t2);
        free(t3);
        hz_model_destroy(m);
        hz_cache_destroy(c);
        hz_device_close(d);
        hz_host_backing_close(b);
        hooks_restore();
        assert_int_equal(g_offset_live, 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_public_producers),
        cmocka_unit_test(test_hfconfig_to_json),
        cmocka_unit_test(test_artifact_manifest),
        cmocka_unit_test(test_foreign_hooks),
    };
    return cmocka_run_group_tests(tests, tiny_world_setup, tiny_world_teardown);
}
