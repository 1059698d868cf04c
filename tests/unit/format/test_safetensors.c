/* lib/format/safetensors: one test per rule of the format, the writer -> reader round trip with dtype
 * conversion, and sharded checkpoints with model.safetensors.index.json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "core/core.h"
#include "core/fp16.h"
#include "format/safetensors.h"
#include "../../test_dir.h"

#define FILE_NAME "bad.safetensors"

typedef struct mem {
    uint8_t *p;
    size_t len;
} mem;

/* 8-byte length + header text + data_len bytes of data. */
static mem make_st(const char *header, size_t data_len) {
    size_t n = strlen(header);
    mem m = {malloc(8 + n + data_len + 1), 8 + n + data_len};
    assert_non_null(m.p);
    for (int i = 0; i < 8; i++) m.p[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(m.p + 8, header, n);
    for (size_t i = 0; i < data_len; i++) m.p[8 + n + i] = (uint8_t)(i * 7u + 1u);
    return m;
}

static int parse_mem(mem m, hz_st_tensor **t, uint32_t *n) {
    return hz_st_parse_header(m.p, m.len, m.len, FILE_NAME, 0, t, n);
}

/* Parses a bad header and checks the status and that the message names the file and `needle`. */
static void expect_bad(const char *header, size_t data_len, int status, const char *needle) {
    mem m = make_st(header, data_len);
    hz_st_tensor *t = (hz_st_tensor *)(uintptr_t)1;
    uint32_t n = 99;
    int st = parse_mem(m, &t, &n);
    if (st != status)
        fail_msg("status %s, expected %s (%s) for header %s", hz_status_name(st), hz_status_name(status),
                 hz_last_error_message(), header);
    assert_null(t);
    assert_int_equal(n, 0);
    const char *msg = hz_last_error_message();
    if (!strstr(msg, FILE_NAME) || (needle && !strstr(msg, needle)))
        fail_msg("message \"%s\" does not name %s and %s", msg, FILE_NAME, needle ? needle : "");
    free(m.p);
}

static void test_valid_header(void **state) {
    (void)state;
    const char *h = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[16,24]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                    "\"e\":{\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[16,16]},"
                    "\"s\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[24,26]}}   ";
    mem m = make_st(h, 26);
    hz_st_tensor *t = NULL;
    uint32_t n = 0;
    assert_int_equal(hz_st_parse_header(m.p, m.len, m.len, FILE_NAME, 3, &t, &n), HZ_OK);
    assert_int_equal(n, 4);
    uint64_t data_start = 8 + strlen(h);
    assert_string_equal(t[0].name, "a");
    assert_int_equal(t[0].dtype, HZ_DTYPE_F32);
    assert_int_equal(t[0].offset, data_start);
    assert_int_equal(t[0].nbytes, 16);
    assert_int_equal(t[0].file, 3);
    assert_string_equal(t[1].name, "b");
    assert_int_equal(t[1].ndim, 2);
    assert_int_equal(t[1].numel, 4);
    assert_int_equal(t[1].offset, data_start + 16);
    assert_string_equal(t[2].name, "e");
    assert_int_equal(t[2].numel, 0);
    assert_int_equal(t[2].nbytes, 0);
    assert_string_equal(t[3].name, "s");
    assert_int_equal(t[3].ndim, 0);
    assert_int_equal(t[3].numel, 1);
    hz_st_tensors_free(t, n);
    free(m.p);

    /* no tensors and no data is a valid (empty) file */
    m = make_st("{}", 0);
    assert_int_equal(parse_mem(m, &t, &n), HZ_OK);
    assert_int_equal(n, 0);
    hz_st_tensors_free(t, n);
    free(m.p);
}

static void test_header_length_over_bound(void **state) {
    (void)state;
    uint8_t buf[8];
    uint64_t n = (uint64_t)HZ_ST_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
    hz_st_tensor *t;
    uint32_t cnt;
    assert_int_equal(hz_st_parse_header(buf, 8, 1ull << 30, FILE_NAME, 0, &t, &cnt), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), FILE_NAME));
    assert_non_null(strstr(hz_last_error_message(), "bound"));
    memset(buf, 0xff, 8);
    assert_int_equal(hz_st_parse_header(buf, 8, 1ull << 30, FILE_NAME, 0, &t, &cnt), HZ_EFORMAT);
}

static void test_header_length_beyond_file(void **state) {
    (void)state;
    mem m = make_st("{}", 0);
    m.p[0] = 200; /* claims 200 header bytes in a 10-byte file */
    hz_st_tensor *t;
    uint32_t n;
    assert_int_equal(parse_mem(m, &t, &n), HZ_EFORMAT);
    assert_non_null(strstr(hz_last_error_message(), "past the end of the file"));
    free(m.p);
    /* shorter than the length field itself */
    assert_int_equal(hz_st_parse_header((const uint8_t *)"abc", 3, 3, FILE_NAME, 0, &t, &n), HZ_EFORMAT);
}

static void test_invalid_json(void **state) {
    (void)state;
    expect_bad("{\"a\":{\"dtype\":\"F32\",", 0, HZ_EFORMAT, "JSON");
    expect_bad("{\"a\":1} trailing", 0, HZ_EFORMAT, "trailing");
    expect_bad("[1,2,3]", 0, HZ_EFORMAT, "JSON object");
    expect_bad("  {}", 0, HZ_EFORMAT, "JSON object");
    /* an embedded NUL ends nothing: the header length rules */
    mem m = make_st("{}xx", 0);
    m.p[10] = '\0';
    hz_st_tensor *t;
    uint32_t n;
    assert_int_equal(parse_mem(m, &t, &n), HZ_EFORMAT);
    free(m.p);
}

static void test_unknown_dtype(void **state) {
    (void)state;
    expect_bad("{\"w.weight\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, HZ_EFORMAT,
               "'w.weight'");
    assert_non_null(strstr(hz_last_error_message(), "Q7"));
    expect_bad("{\"w.weight\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,2]}}", 2, HZ_EFORMAT, "'w.weight'");
    expect_bad("{\"w.weight\":{\"shape\":[2],\"data_offsets\":[0,2]}}", 2, HZ_EFORMAT, "'w.weight'");
}

static void test_unsupported_dtype(void **state) {
    (void)state;
    expect_bad("{\"position_ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16,
               HZ_EUNSUPPORTED, "'position_ids'");
    assert_non_null(strstr(hz_last_error_message(), "I64"));
    expect_bad("{\"x\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, HZ_EUNSUPPORTED, "'x'");
}

static void test_bad_shape(void **state) {
    (void)state;
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":\"4\",\"data_offsets\":[0,16]}}", 16, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[0,16]}}", 16, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", 16, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,16]}}",
               16, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":[1,2]}", 0, HZ_EFORMAT, "'w'");
}

static void test_bad_data_offsets(void **state) {
    (void)state;
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4, HZ_EFORMAT, "'w'");
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, HZ_EFORMAT, "'w'");
}

static void test_byte_length_mismatch(void **state) {
    (void)state;
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"lm_head.weight\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[8,18]}}",
               18, HZ_EFORMAT, "'lm_head.weight'");
    assert_non_null(strstr(hz_last_error_message(), "need 12"));
}

static void test_overlapping_offsets(void **state) {
    (void)state;
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
               24, HZ_EFORMAT, "'b'");
    assert_non_null(strstr(hz_last_error_message(), "overlap"));
    assert_non_null(strstr(hz_last_error_message(), "'a'"));
    /* the same bytes claimed twice */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               8, HZ_EFORMAT, "overlap");
}

static void test_gapped_offsets(void **state) {
    (void)state;
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
               24, HZ_EFORMAT, "'b'");
    assert_non_null(strstr(hz_last_error_message(), "gap"));
    /* data that does not start at the buffer start */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, HZ_EFORMAT, "'a'");
    /* bytes after the last tensor */
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, HZ_EFORMAT, "'a'");
    assert_non_null(strstr(hz_last_error_message(), "4 bytes after"));
    expect_bad("{}", 4, HZ_EFORMAT, "no tensors");
}

static void test_truncated_file(void **state) {
    (void)state;
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[8,264]}}",
               100, HZ_EFORMAT, "'model.norm.weight'");
    assert_non_null(strstr(hz_last_error_message(), "truncated"));
}

static void test_duplicate_names(void **state) {
    (void)state;
    expect_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
               16, HZ_EFORMAT, "'w'");
    assert_non_null(strstr(hz_last_error_message(), "more than once"));
    expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, HZ_EFORMAT, "__metadata__");
}

static void test_bad_metadata(void **state) {
    (void)state;
    expect_bad("{\"__metadata__\":{\"format\":1}}", 0, HZ_EFORMAT, "'format'");
    expect_bad("{\"__metadata__\":[\"pt\"]}", 0, HZ_EFORMAT, "__metadata__");
    expect_bad("{\"__metadata__\":\"pt\"}", 0, HZ_EFORMAT, "__metadata__");
}

/* ------------------------------------------------------------------------------------------------ */
/* Files                                                                                             */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int make_dir(void **state) {
    const char *root = getenv("HZ_BUILD_ROOT");
    char *tmpl = malloc(4096);
    if (!tmpl) return -1;
    snprintf(tmpl, 4096, "%s/hz-test-st-XXXXXX", root && root[0] ? root : "/tmp");
    if (!mkdtemp(tmpl)) {
        snprintf(tmpl, 4096, "/tmp/hz-test-st-XXXXXX");
        if (!mkdtemp(tmpl)) return -1;
    }
    *state = tmpl;
    return 0;
}

static int remove_dir(void **state) {
    nftw((const char *)*state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(*state);
    return 0;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static mem read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    mem m = {malloc((size_t)n + 1), (size_t)n};
    assert_int_equal(fread(m.p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return m;
}

static void test_writer_reader_roundtrip(void **state) {
    const char *dir = *state;
    char *path = join(dir, "rt.safetensors");
    const float f32v[6] = {1.5f, -2.25f, 0.125f, 65504.0f, -0.0f, 3e-8f};
    const float f16src[4] = {1.0f, -2.5f, 6.103515625e-05f, 0.1f};
    const float bf16src[6] = {1.0f, -3.140625f, 1e30f, 0.1f, -1e-20f, 7.0f};
    hz_f16 f16v[4];
    hz_bf16 bf16v[6];
    for (int i = 0; i < 4; i++) f16v[i] = hz_f32_to_f16(f16src[i]);
    for (int i = 0; i < 6; i++) bf16v[i] = hz_f32_to_bf16(bf16src[i]);
    const hz_st_decl decls[] = {
        {"model.embed_tokens.weight", HZ_DTYPE_F32, 2, {2, 3}},
        {"h \"quoted\"\\name", HZ_DTYPE_F16, 1, {4}},
        {"b.weight", HZ_DTYPE_BF16, 2, {3, 2}},
        {"empty", HZ_DTYPE_F32, 2, {0, 5}},
        {"scalar", HZ_DTYPE_F16, 0, {0}},
    };
    uint8_t data[24 + 8 + 12 + 2];
    memcpy(data, f32v, 24);
    memcpy(data + 24, f16v, 8);
    memcpy(data + 32, bf16v, 12);
    hz_f16 sc = hz_f32_to_f16(-0.5f);
    memcpy(data + 44, &sc, 2);

    hz_st_writer *w = NULL;
    assert_int_equal(hz_st_writer_create(path, decls, 5, &w), HZ_OK);
    /* pieces that straddle tensor boundaries */
    size_t at = 0;
    const size_t pieces[] = {5, 0, 20, 1, 13, 7};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        assert_int_equal(hz_st_writer_write(w, data + at, pieces[i]), HZ_OK);
        at += pieces[i];
    }
    assert_int_equal(at, sizeof data);
    assert_int_equal(hz_st_writer_write(w, data, 1), HZ_EINVAL); /* past the declared end */
    assert_int_equal(hz_st_writer_finish(w), HZ_OK);

    /* the header: length a multiple of 8, metadata, offsets in declaration order */
    mem m = read_all(path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | m.p[i];
    assert_int_equal(n % 8, 0);
    assert_int_equal(m.len, 8 + n + sizeof data);
    cJSON *root = cJSON_ParseWithLength((const char *)m.p + 8, n);
    assert_non_null(root);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(meta, "format")->valuestring, "pt");
    uint64_t expect = 0;
    int i = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) continue;
        assert_string_equal(c->string, decls[i].name);
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(c, "data_offsets");
        assert_int_equal((uint64_t)offs->child->valuedouble, expect);
        expect = (uint64_t)offs->child->next->valuedouble;
        i++;
    }
    assert_int_equal(i, 5);
    cJSON_Delete(root);
    free(m.p);

    hz_st_set *set = NULL;
    assert_int_equal(hz_st_open(path, &set), HZ_OK);
    assert_int_equal(set->n_files, 1);
    assert_int_equal(set->n_tensors, 5);
    assert_null(hz_st_find(set, "missing"));
    float out[6];
    const hz_st_tensor *t = hz_st_find(set, "model.embed_tokens.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, HZ_DTYPE_F32);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(hz_st_read_f32(set, t, out), HZ_OK);
    assert_memory_equal(out, f32v, sizeof f32v);
    t = hz_st_find(set, "h \"quoted\"\\name");
    assert_non_null(t);
    assert_int_equal(t->dtype, HZ_DTYPE_F16);
    assert_int_equal(hz_st_read_f32(set, t, out), HZ_OK);
    for (int k = 0; k < 4; k++) assert_true(out[k] == hz_f16_to_f32(f16v[k]));
    assert_true(out[2] == 6.103515625e-05f);
    t = hz_st_find(set, "b.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, HZ_DTYPE_BF16);
    assert_int_equal(hz_st_read_f32(set, t, out), HZ_OK);
    for (int k = 0; k < 6; k++) assert_true(out[k] == hz_bf16_to_f32(bf16v[k]));
    assert_true(out[1] == -3.140625f);
    uint16_t raw[6];
    assert_int_equal(hz_st_read_raw(set, t, raw), HZ_OK);
    assert_memory_equal(raw, bf16v, sizeof bf16v);
    t = hz_st_find(set, "empty");
    assert_non_null(t);
    assert_int_equal(t->numel, 0);
    assert_int_equal(hz_st_read_f32(set, t, out), HZ_OK);
    t = hz_st_find(set, "scalar");
    assert_non_null(t);
    assert_int_equal(t->ndim, 0);
    assert_int_equal(hz_st_read_f32(set, t, out), HZ_OK);
    assert_true(out[0] == -0.5f);
    hz_st_close(set);
    free(path);
}

static void test_read_f32_large_in_place(void **state) {
    /* many BF16 and F16 values widen in place inside the destination buffer */
    const char *dir = *state;
    char *path = join(dir, "big.safetensors");
    enum { N = 10007 };
    hz_bf16 *b = malloc(N * 2);
    hz_f16 *h = malloc(N * 2);
    for (int i = 0; i < N; i++) {
        b[i] = hz_f32_to_bf16((float)i * 0.37f - 1000.0f);
        h[i] = hz_f32_to_f16((float)(i % 2000) * 0.5f - 500.0f);
    }
    const hz_st_decl decls[] = {{"bf", HZ_DTYPE_BF16, 1, {N}}, {"f16", HZ_DTYPE_F16, 2, {1, N}}};
    hz_st_writer *w;
    assert_int_equal(hz_st_writer_create(path, decls, 2, &w), HZ_OK);
    assert_int_equal(hz_st_writer_write(w, b, N * 2), HZ_OK);
    assert_int_equal(hz_st_writer_write(w, h, N * 2), HZ_OK);
    assert_int_equal(hz_st_writer_finish(w), HZ_OK);
    hz_st_set *set;
    assert_int_equal(hz_st_open(path, &set), HZ_OK);
    float *out = malloc(N * 4);
    assert_int_equal(hz_st_read_f32(set, hz_st_find(set, "bf"), out), HZ_OK);
    for (int i = 0; i < N; i++) assert_true(out[i] == hz_bf16_to_f32(b[i]));
    assert_int_equal(hz_st_read_f32(set, hz_st_find(set, "f16"), out), HZ_OK);
    for (int i = 0; i < N; i++) assert_true(out[i] == hz_f16_to_f32(h[i]));
    hz_st_close(set);
    free(out);
    free(b);
    free(h);
    free(path);
}

static void test_writer_errors(void **state) {
    const char *dir = *state;
    char *path = join(dir, "w.safetensors");
    hz_st_writer *w = (hz_st_writer *)(uintptr_t)1;
    const hz_st_decl dup[] = {{"x", HZ_DTYPE_F32, 1, {2}}, {"y", HZ_DTYPE_F32, 1, {2}}, {"x", HZ_DTYPE_F16, 1, {1}}};
    assert_int_equal(hz_st_writer_create(path, dup, 3, &w), HZ_EINVAL);
    assert_null(w);
    assert_non_null(strstr(hz_last_error_message(), "'x'"));
    assert_int_not_equal(access(path, F_OK), 0);
    const hz_st_decl reserved[] = {{"__metadata__", HZ_DTYPE_F32, 1, {2}}};
    assert_int_equal(hz_st_writer_create(path, reserved, 1, &w), HZ_EINVAL);

    /* a short write fails finish, names the tensor it stopped in, and leaves no file */
    const hz_st_decl decls[] = {{"first", HZ_DTYPE_F32, 1, {2}}, {"second", HZ_DTYPE_BF16, 1, {4}}};
    assert_int_equal(hz_st_writer_create(path, decls, 2, &w), HZ_OK);
    assert_int_not_equal(access(path, F_OK), 0); /* written beside its path until finish */
    uint8_t bytes[16] = {0};
    assert_int_equal(hz_st_writer_write(w, bytes, 10), HZ_OK);
    assert_int_equal(hz_st_writer_finish(w), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), "'second'"));
    assert_int_not_equal(access(path, F_OK), 0);

    /* abort removes the partial file */
    assert_int_equal(hz_st_writer_create(path, decls, 2, &w), HZ_OK);
    assert_int_equal(hz_st_writer_write(w, bytes, 4), HZ_OK);
    hz_st_writer_abort(w);
    assert_int_not_equal(access(path, F_OK), 0);
    hz_st_writer_abort(NULL);

    /* what was at the path stays there through a failed or aborted write, and no temporary is left */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("earlier", f);
    fclose(f);
    assert_int_equal(hz_st_writer_create(path, decls, 2, &w), HZ_OK);
    assert_int_equal(hz_st_writer_write(w, bytes, 10), HZ_OK);
    assert_int_equal(hz_st_writer_finish(w), HZ_EINVAL);
    assert_int_equal(hz_st_writer_create(path, decls, 2, &w), HZ_OK);
    hz_st_writer_abort(w);
    char got[16] = {0};
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(got, sizeof got, f));
    fclose(f);
    assert_string_equal(got, "earlier");
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) fail_msg("temporary file %s left behind", e->d_name);
    closedir(d);
    /* and a complete write replaces it */
    assert_int_equal(hz_st_writer_create(path, decls, 2, &w), HZ_OK);
    assert_int_equal(hz_st_writer_write(w, bytes, 16), HZ_OK);
    assert_int_equal(hz_st_writer_finish(w), HZ_OK);
    hz_st_set *set = NULL;
    assert_int_equal(hz_st_open(path, &set), HZ_OK);
    assert_non_null(hz_st_find(set, "second"));
    hz_st_close(set);
    unlink(path);

    /* a FIFO (or anything not a regular file) at the path is refused, not replaced */
    char *fifo = join(dir, "w.fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(hz_st_writer_create(fifo, decls, 2, &w), HZ_EINVAL);
    assert_non_null(strstr(hz_last_error_message(), "not a regular file"));
    struct stat sb;
    assert_int_equal(lstat(fifo, &sb), 0);
    assert_true(S_ISFIFO(sb.st_mode));
    unlink(fifo);
    free(fifo);

    /* an unwritable path */
    char *bad = join(dir, "no/such/dir.safetensors");
    assert_int_equal(hz_st_writer_create(bad, decls, 2, &w), HZ_EIO);
    assert_non_null(strstr(hz_last_error_message(), bad));
    free(bad);
    free(path);
}



/* While the writer is open its directory holds nothing new, so a process killed mid-write leaves
 * nothing; finish gives the file its name (mode 0644 whatever the umask), abort leaves the directory
 * as it was. */
static void test_writer_leaves_nothing(void **state) {
    const char *dir = *state;
    const int unnamed = hz_test_have_unnamed(dir);
    char *path = join(dir, "open.safetensors");
    const hz_st_decl decls[] = {{"a", HZ_DTYPE_F32, 1, {4}}, {"b", HZ_DTYPE_F16, 1, {4}}};
    const float a[4] = {1.0f, -2.0f, 0.5f, 8.0f};
    const hz_f16 b[4] = {0x3c00, 0xc000, 0x3800, 0x4800};
    const mode_t old_mask = umask(077);
    hz_st_writer *w = NULL;
    assert_int_equal(hz_st_writer_create(path, decls, 2, &w), HZ_OK);
    assert_int_equal(hz_st_writer_write(w, a, sizeof a), HZ_OK);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), unnamed ? 0 : 1);
    assert_int_equal(hz_st_writer_write(w, b, sizeof b), HZ_OK);
    assert_int_equal(hz_st_writer_finish(w), HZ_OK);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), 1);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0644);
    hz_st_set *set = NULL;
    assert_int_equal(hz_st_open(path, &set), HZ_OK);
    float got[4];
    assert_int_equal(hz_st_read_f32(set, hz_st_find(set, "a"), got), HZ_OK);
    assert_memory_equal(got, a, sizeof a);
    assert_int_equal(hz_st_read_f32(set, hz_st_find(set, "b"), got), HZ_OK);
    assert_true(got[0] == 1.0f && got[1] == -2.0f && got[2] == 0.5f && got[3] == 8.0f);
    hz_st_close(set);
    unlink(path);

    assert_int_equal(hz_st_writer_create(path, decls, 2, &w), HZ_OK);
    assert_int_equal(hz_st_writer_write(w, a, sizeof a), HZ_OK);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), unnamed ? 0 : 1);
    hz_st_writer_abort(w);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), 0);
    umask(old_mask);
    free(path);
}

/* Writes a file whose tensors hold `fill` + index as F32 values. */
static void write_shard(const char *dir, const char *name, const char *const *tensors, int n, float fill) {
    char *path = join(dir, name);
    hz_st_decl decls[8];
    memset(decls, 0, sizeof decls);
    for (int i = 0; i < n; i++) {
        decls[i].name = tensors[i];
        decls[i].dtype = HZ_DTYPE_F32;
        decls[i].ndim = 1;
        decls[i].shape[0] = 3;
    }
    hz_st_writer *w;
    assert_int_equal(hz_st_writer_create(path, decls, (uint32_t)n, &w), HZ_OK);
    for (int i = 0; i < n; i++) {
        float v[3] = {fill + (float)i, fill + (float)i, fill + (float)i};
        assert_int_equal(hz_st_writer_write(w, v, sizeof v), HZ_OK);
    }
    assert_int_equal(hz_st_writer_finish(w), HZ_OK);
    free(path);
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

static void setup_shards(const char *dir) {
    const char *s1[] = {"a", "b"};
    const char *s2[] = {"c"};
    write_shard(dir, SHARD1, s1, 2, 10.0f);
    write_shard(dir, SHARD2, s2, 1, 20.0f);
}

static void write_index(const char *dir, const char *weight_map) {
    char *path = join(dir, "model.safetensors.index.json");
    char text[1024];
    snprintf(text, sizeof text, "{\"metadata\":{\"total_size\":36},\"weight_map\":{%s}}", weight_map);
    write_text(path, text);
    free(path);
}

static void expect_open_fails(const char *dir, int status, const char *needle) {
    hz_st_set *set = (hz_st_set *)(uintptr_t)1;
    int st = hz_st_open(dir, &set);
    if (st != status) fail_msg("status %s, expected %s (%s)", hz_status_name(st), hz_status_name(status), hz_last_error_message());
    assert_null(set);
    if (!strstr(hz_last_error_message(), needle))
        fail_msg("message \"%s\" does not name %s", hz_last_error_message(), needle);
}

static void test_sharded_valid(void **state) {
    const char *dir = *state;
    setup_shards(dir);
    write_index(dir, "\"c\":\"" SHARD2 "\",\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\"");
    hz_st_set *set = NULL;
    assert_int_equal(hz_st_open(dir, &set), HZ_OK);
    assert_int_equal(set->n_files, 2);
    assert_int_equal(set->n_tensors, 3);
    assert_string_equal(set->tensors[0].name, "a");
    assert_string_equal(set->tensors[2].name, "c");
    float v[3];
    const hz_st_tensor *t = hz_st_find(set, "c");
    assert_non_null(t);
    assert_non_null(strstr(set->paths[t->file], SHARD2));
    assert_int_equal(hz_st_read_f32(set, t, v), HZ_OK);
    assert_true(v[0] == 20.0f && v[2] == 20.0f);
    t = hz_st_find(set, "b");
    assert_non_null(strstr(set->paths[t->file], SHARD1));
    assert_int_equal(hz_st_read_f32(set, t, v), HZ_OK);
    assert_true(v[1] == 11.0f);
    hz_st_close(set);
}

static void test_sharded_mismatch(void **state) {
    const char *dir = *state;
    setup_shards(dir);
    /* listed in the index, missing from its shard */
    write_index(dir, "\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\",\"d\":\"" SHARD2 "\"");
    expect_open_fails(dir, HZ_EFORMAT, "'d'");
    assert_non_null(strstr(hz_last_error_message(), "missing"));
    /* present in a shard, not listed */
    write_index(dir, "\"a\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_open_fails(dir, HZ_EFORMAT, "'b'");
    assert_non_null(strstr(hz_last_error_message(), "not listed"));
    /* listed twice */
    write_index(dir, "\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\",\"a\":\"" SHARD1 "\"");
    expect_open_fails(dir, HZ_EFORMAT, "'a'");
    assert_non_null(strstr(hz_last_error_message(), "twice"));
    /* listed under the wrong shard */
    write_index(dir, "\"a\":\"" SHARD1 "\",\"b\":\"" SHARD2 "\",\"c\":\"" SHARD2 "\"");
    expect_open_fails(dir, HZ_EFORMAT, "'b'");
    /* a shard name that leaves the directory */
    write_index(dir, "\"a\":\"../" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_open_fails(dir, HZ_EFORMAT, "'a'");
    /* a missing shard file */
    write_index(dir, "\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"model-00003.safetensors\"");
    expect_open_fails(dir, HZ_EIO, "model-00003.safetensors");
    /* an index that is not JSON */
    char *index = join(dir, "model.safetensors.index.json");
    write_text(index, "{\"weight_map\": ");
    expect_open_fails(dir, HZ_EFORMAT, "model.safetensors.index.json");
    free(index);
}

static void test_sharded_bad_shard(void **state) {
    const char *dir = *state;
    setup_shards(dir);
    char *bad = join(dir, SHARD2);
    mem m = make_st("{\"c\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 8);
    FILE *f = fopen(bad, "wb");
    fwrite(m.p, 1, m.len, f);
    fclose(f);
    free(m.p);
    write_index(dir, "\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"");
    expect_open_fails(dir, HZ_EFORMAT, "'c'");
    assert_non_null(strstr(hz_last_error_message(), SHARD2));
    free(bad);
}

static void test_directory_single_and_missing(void **state) {
    const char *dir = *state;
    expect_open_fails(dir, HZ_EIO, "model.safetensors");
    const char *names[] = {"w"};
    write_shard(dir, "model.safetensors", names, 1, 5.0f);
    hz_st_set *set = NULL;
    assert_int_equal(hz_st_open(dir, &set), HZ_OK);
    assert_int_equal(set->n_tensors, 1);
    hz_st_close(set);
    hz_st_close(NULL);
    char *nowhere = join(dir, "nowhere.safetensors");
    expect_open_fails(nowhere, HZ_EIO, "nowhere.safetensors");
    free(nowhere);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_header),
        cmocka_unit_test(test_header_length_over_bound),
        cmocka_unit_test(test_header_length_beyond_file),
        cmocka_unit_test(test_invalid_json),
        cmocka_unit_test(test_unknown_dtype),
        cmocka_unit_test(test_unsupported_dtype),
        cmocka_unit_test(test_bad_shape),
        cmocka_unit_test(test_bad_data_offsets),
        cmocka_unit_test(test_byte_length_mismatch),
        cmocka_unit_test(test_overlapping_offsets),
        cmocka_unit_test(test_gapped_offsets),
        cmocka_unit_test(test_truncated_file),
        cmocka_unit_test(test_duplicate_names),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test_setup_teardown(test_writer_reader_roundtrip, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_read_f32_large_in_place, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_writer_errors, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_writer_leaves_nothing, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_sharded_valid, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_sharded_mismatch, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_sharded_bad_shard, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_directory_single_and_missing, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
