/* Artifact writer and validating reader: round trip, and every corruption the reader must reject with a
 * status and a message naming what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <cJSON.h>
#include <xxhash.h>

#include "backing/backing.h"
#include "fixture.h"
#include "format/artifact.h"
#include "../../test_dir.h"

typedef struct art_state {
    char *path;
    char identity[HZ_IDENTITY_HEX_BYTES];
    uint8_t *bytes;
    size_t len;
    hz_artifact *art; /* parsed from the pristine file */
} art_state;

static int setup(void **state) {
    art_state *s = calloc(1, sizeof *s);
    s->path = fixture_write_artifact(HZ_ARCH_QWEN2MOE, 11, s->identity);
    s->bytes = fixture_read_file(s->path, &s->len);
    hz_artifact_header h;
    if (hz_artifact_header_parse(s->bytes, s->len, "t", &h) != HZ_OK ||
        hz_artifact_parse_manifest(&h, (const char *)s->bytes + h.manifest_offset,
                                   (size_t)h.manifest_bytes, "t", &s->art) != HZ_OK) {
        fprintf(stderr, "fixture does not parse: %s\n", hz_last_error_message());
        return -1;
    }
    *state = s;
    return 0;
}

static int teardown(void **state) {
    art_state *s = *state;
    unlink(s->path);
    free(s->path);
    free(s->bytes);
    hz_artifact_free(s->art);
    free(s);
    return 0;
}

/* Writes `bytes` to a temporary file and opens it as a backing; returns the status and copies the
 * message. */
static int open_bytes(const uint8_t *bytes, size_t len, uint32_t flags, char *msg, size_t cap) {
    char *p = fixture_temp_path(".hzq");
    fixture_write_file(p, bytes, len);
    hz_backing_options o;
    hz_backing_options_init(&o);
    o.flags = flags;
    hz_host_backing *b = (hz_host_backing *)0x1;
    int rc = hz_host_backing_open(p, &o, &b);
    snprintf(msg, cap, "%s", hz_last_error_message());
    if (rc) assert_null(b);
    else hz_host_backing_close(b);
    unlink(p);
    free(p);
    return rc;
}

static void expect_msg(const char *msg, const char *needle) {
    if (!strstr(msg, needle)) fail_msg("message \"%s\" does not contain \"%s\"", msg, needle);
}

static void test_round_trip(void **state) {
    art_state *s = *state;
    assert_non_null(s->art);
    char hex[HZ_IDENTITY_HEX_BYTES];
    hz_artifact_identity_hex(&s->art->header, hex);
    assert_string_equal(hex, s->identity);
    assert_int_equal(s->art->header.file_bytes, s->len);
    assert_int_equal(s->art->routed_offset % HZ_ARTIFACT_ALIGN, 0);
    assert_int_equal(s->art->routed_offset + s->art->routed_bytes,
                     s->art->header.data_offset + s->art->header.data_bytes);
    for (uint64_t i = 0; i < s->art->n_blobs; i++)
        assert_int_equal(s->art->blobs[i].offset % HZ_ARTIFACT_ALIGN, 0);

    hz_host_backing *b = NULL;
    assert_int_equal(hz_host_backing_open(s->path, NULL, &b), HZ_OK);
    assert_string_equal(hz_host_backing_identity(b), s->identity);
    const hz_model_config *cfg = hz_backing_config(b);
    assert_int_equal(cfg->arch, HZ_ARCH_QWEN2MOE);
    const hz_expert_layout *L = hz_backing_expert_layout(b);
    for (uint32_t l = 0; l < cfg->layers; l++)
        for (uint32_t e = 0; e < cfg->experts; e++) {
            const uint8_t *blob = hz_backing_expert_blob(b, l, e);
            assert_non_null(blob);
            for (uint64_t k = 0; k < L->blob_bytes; k += 97)
                assert_int_equal(blob[k], fixture_blob_byte(11, l, e, k));
        }
    assert_null(hz_backing_expert_blob(b, cfg->layers, 0));
    assert_null(hz_backing_expert_blob(b, 0, cfg->experts));
    const hz_backing_tensor *t = hz_backing_find_tensor(b, "model.layers.1.mlp.shared_expert_gate.weight");
    assert_non_null(t);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 1);
    assert_int_equal(t->shape[1], cfg->hidden);
    for (uint64_t k = 0; k < t->numel; k++)
        assert_int_equal(t->data[k], fixture_tensor_value(t->name, k));
    t = hz_backing_find_tensor(b, "lm_head.weight");
    assert_non_null(t);
    assert_int_equal(t->numel, (uint64_t)cfg->vocab * cfg->hidden);
    assert_int_equal(t->data[t->numel - 1], fixture_tensor_value("lm_head.weight", t->numel - 1));
    assert_null(hz_backing_find_tensor(b, "model.layers.0.self_attn.q_norm.weight")); /* OLMoE only */
    assert_string_equal(hz_backing_source_dtype(b), "bf16");
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
}

static void test_olmoe_round_trip(void **state) {
    (void)state;
    char id[HZ_IDENTITY_HEX_BYTES];
    char *p = fixture_write_artifact(HZ_ARCH_OLMOE, 5, id);
    hz_host_backing *b = NULL;
    assert_int_equal(hz_host_backing_open(p, NULL, &b), HZ_OK);
    assert_string_equal(hz_host_backing_identity(b), id);
    assert_non_null(hz_backing_find_tensor(b, "model.layers.0.self_attn.k_norm.weight"));
    assert_null(hz_backing_find_tensor(b, "model.layers.0.self_attn.q_proj.bias"));
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
    /* the same content written twice has the same identity */
    char id2[HZ_IDENTITY_HEX_BYTES];
    char *p2 = fixture_write_artifact(HZ_ARCH_OLMOE, 5, id2);
    assert_string_equal(id, id2);
    char *p3 = fixture_write_artifact(HZ_ARCH_OLMOE, 6, id2);
    assert_string_not_equal(id, id2);
    unlink(p);
    unlink(p2);
    unlink(p3);
    free(p);
    free(p2);
    free(p3);
}

static void test_wrong_magic(void **state) {
    art_state *s = *state;
    uint8_t *c = malloc(s->len);
    memcpy(c, s->bytes, s->len);
    c[3] ^= 0x20;
    char msg[1024];
    assert_int_equal(open_bytes(c, s->len, 0, msg, sizeof msg), HZ_EFORMAT);
    expect_msg(msg, "not a Horizon artifact");
    /* a safetensors file or an empty file is not an artifact either */
    assert_int_equal(open_bytes((const uint8_t *)"", 0, 0, msg, sizeof msg), HZ_EFORMAT);
    expect_msg(msg, "not a Horizon artifact");
    free(c);
}

static void test_wrong_version(void **state) {
    art_state *s = *state;
    uint8_t *c = malloc(s->len);
    memcpy(c, s->bytes, s->len);
    c[HZ_AH_VERSION] = 2;
    char msg[1024];
    assert_int_equal(open_bytes(c, s->len, 0, msg, sizeof msg), HZ_EFORMAT);
    expect_msg(msg, "version 2 found");
    expect_msg(msg, "reads version 1");
    free(c);
}

static void test_flipped_header_field(void **state) {
    art_state *s = *state;
    uint8_t *c = malloc(s->len);
    memcpy(c, s->bytes, s->len);
    c[HZ_AH_DATA_BYTES + 1] ^= 1;
    char msg[1024];
    assert_int_equal(open_bytes(c, s->len, 0, msg, sizeof msg), HZ_EIDENTITY);
    expect_msg(msg, "header checksum");
    memcpy(c, s->bytes, s->len);
    c[2000] = 1; /* reserved */
    assert_int_equal(open_bytes(c, s->len, 0, msg, sizeof msg), HZ_EFORMAT);
    expect_msg(msg, "reserved byte at offset 2000");
    free(c);
}

static void test_flipped_manifest(void **state) {
    art_state *s = *state;
    uint8_t *c = malloc(s->len);
    memcpy(c, s->bytes, s->len);
    c[s->art->header.manifest_offset + 40] ^= 0x01;
    char msg[1024];
    assert_int_equal(open_bytes(c, s->len, 0, msg, sizeof msg), HZ_EIDENTITY);
    expect_msg(msg, "manifest checksum mismatch");
    free(c);
}

static void test_flipped_blob(void **state) {
    art_state *s = *state;
    uint8_t *c = malloc(s->len);
    memcpy(c, s->bytes, s->len);
    const hz_artifact_blob *bl = &s->art->blobs[1 * s->art->cfg.experts + 3];
    c[bl->offset + bl->bytes / 2] ^= 0x80;
    char msg[1024];
    assert_int_equal(open_bytes(c, s->len, 0, msg, sizeof msg), HZ_EIDENTITY);
    expect_msg(msg, "layer 1 expert 3");
    /* skipping per-blob checksums still catches it through the identity */
    assert_int_equal(open_bytes(c, s->len, HZ_BACKING_SKIP_CHECKSUMS, msg, sizeof msg), HZ_EIDENTITY);
    expect_msg(msg, "identity mismatch");
    /* streaming verification (hz-inspect --verify) names the same blob */
    char *p = fixture_temp_path(".hzq");
    fixture_write_file(p, c, s->len);
    FILE *f = fopen(p, "rb");
    assert_int_equal(hz_artifact_load(fileno(f), p, s->art, NULL, 0), HZ_EIDENTITY);
    expect_msg(hz_last_error_message(), "layer 1 expert 3");
    fclose(f);
    unlink(p);
    free(p);
    free(c);
}

static void test_flipped_tensor(void **state) {
    art_state *s = *state;
    const hz_artifact_tensor *t = NULL;
    for (uint32_t i = 0; i < s->art->n_tensors; i++)
        if (!strcmp(s->art->tensors[i].name, "model.layers.1.self_attn.v_proj.bias")) t = &s->art->tensors[i];
    assert_non_null(t);
    uint8_t *c = malloc(s->len);
    memcpy(c, s->bytes, s->len);
    c[t->offset + 3] ^= 0x04;
    char msg[1024];
    assert_int_equal(open_bytes(c, s->len, 0, msg, sizeof msg), HZ_EIDENTITY);
    expect_msg(msg, "tensor 'model.layers.1.self_attn.v_proj.bias'");
    /* padding between items is covered by the identity */
    memcpy(c, s->bytes, s->len);
    c[t->offset + t->bytes] ^= 0x04;
    assert_int_equal(open_bytes(c, s->len, 0, msg, sizeof msg), HZ_EIDENTITY);
    expect_msg(msg, "identity mismatch");
    free(c);
}

static void test_truncated(void **state) {
    art_state *s = *state;
    char msg[1024], want[128];
    assert_int_equal(open_bytes(s->bytes, s->len - 100, 0, msg, sizeof msg), HZ_EFORMAT);
    expect_msg(msg, "truncated");
    snprintf(want, sizeof want, "file is %zu bytes, the header declares %zu", s->len - 100, s->len);
    expect_msg(msg, want);
    assert_int_equal(open_bytes(s->bytes, 2000, 0, msg, sizeof msg), HZ_EFORMAT);
    expect_msg(msg, "truncated: 2000 bytes");
    assert_int_equal(open_bytes(s->bytes, 10, 0, msg, sizeof msg), HZ_EFORMAT);
    expect_msg(msg, "truncated");
    /* trailing garbage is rejected too */
    uint8_t *c = calloc(1, s->len + 10);
    memcpy(c, s->bytes, s->len);
    assert_int_equal(open_bytes(c, s->len + 10, 0, msg, sizeof msg), HZ_EFORMAT);
    expect_msg(msg, "trailing");
    free(c);
}

/* Re-seals a modified manifest: recomputes the manifest and header checksums so the schema and layout
 * rules behind them are exercised. Returns a new meta image (header page + manifest). */
static uint8_t *reseal(const art_state *s, cJSON *root, size_t *out_len) {
    char *m = cJSON_PrintUnformatted(root);
    size_t ml = strlen(m);
    hz_artifact_header h = s->art->header;
    h.manifest_bytes = ml;
    h.manifest_xxh3 = XXH3_64bits(m, ml);
    h.file_bytes = h.manifest_offset + ml;
    uint8_t *img = malloc(HZ_ARTIFACT_HEADER_BYTES + ml);
    hz_artifact_header_write(&h, img);
    memcpy(img + HZ_ARTIFACT_HEADER_BYTES, m, ml);
    free(m);
    *out_len = HZ_ARTIFACT_HEADER_BYTES + ml;
    return img;
}

static cJSON *manifest_json(const art_state *s) {
    cJSON *r = cJSON_ParseWithLength((const char *)s->bytes + s->art->header.manifest_offset,
                                     s->art->header.manifest_bytes);
    assert_non_null(r);
    return r;
}

static void expect_schema_error(const art_state *s, cJSON *root, int want, const char *needle) {
    size_t n;
    uint8_t *img = reseal(s, root, &n);
    hz_artifact *a = NULL;
    int rc = hz_artifact_parse_meta_image(img, n, "x.hzq", &a);
    if (rc != want)
        fail_msg("expected %s, got %s: %s", hz_status_name(want), hz_status_name(rc),
                 hz_last_error_message());
    assert_null(a);
    expect_msg(hz_last_error_message(), needle);
    free(img);
    cJSON_Delete(root);
}

static cJSON *find_tensor(cJSON *root, const char *name) {
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "tensors")) {
        if (!strcmp(cJSON_GetObjectItem(t, "name")->valuestring, name)) return t;
    }
    return NULL;
}

static void test_manifest_schema(void **state) {
    art_state *s = *state;
    /* the unmodified manifest resealed parses */
    size_t n;
    cJSON *r = manifest_json(s);
    uint8_t *img = reseal(s, r, &n);
    hz_artifact *a = NULL;
    assert_int_equal(hz_artifact_parse_meta_image(img, n, "x", &a), HZ_OK);
    hz_artifact_free(a);
    free(img);
    cJSON_Delete(r);

    r = manifest_json(s);
    cJSON_DeleteItemFromArray(cJSON_GetObjectItem(r, "tensors"), 2);
    expect_schema_error(s, r, HZ_EFORMAT, "needs");

    r = manifest_json(s);
    cJSON *t = find_tensor(r, "model.norm.weight");
    cJSON_ReplaceItemInObject(t, "name", cJSON_CreateString("model.bogus.weight"));
    expect_schema_error(s, r, HZ_EFORMAT, "'model.bogus.weight' is not part of qwen2_moe");

    r = manifest_json(s);
    t = find_tensor(r, "model.layers.0.mlp.gate.weight");
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(t, "shape"), 0, cJSON_CreateNumber(7));
    expect_schema_error(s, r, HZ_EFORMAT, "tensor 'model.layers.0.mlp.gate.weight'");

    r = manifest_json(s);
    t = find_tensor(r, "model.norm.weight");
    double off = cJSON_GetObjectItem(t, "offset")->valuedouble;
    cJSON_ReplaceItemInObject(t, "offset", cJSON_CreateNumber(off + 2));
    expect_schema_error(s, r, HZ_EFORMAT, "not a multiple of 4096");

    /* two tensors at the same offset overlap */
    r = manifest_json(s);
    cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "tensors"), 0);
    cJSON *t1 = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "tensors"), 1);
    cJSON_ReplaceItemInObject(t1, "offset",
                              cJSON_CreateNumber(cJSON_GetObjectItem(t0, "offset")->valuedouble));
    expect_schema_error(s, r, HZ_EFORMAT, "overlaps");

    /* a tensor reaching into the routed region */
    r = manifest_json(s);
    t = find_tensor(r, "lm_head.weight");
    cJSON_ReplaceItemInObject(t, "offset", cJSON_CreateNumber((double)s->art->routed_offset));
    expect_schema_error(s, r, HZ_EFORMAT, "outside its region");

    r = manifest_json(s);
    cJSON *blob = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "experts"), "blobs"), 9);
    cJSON_ReplaceItemInObject(blob, "bytes", cJSON_CreateNumber(4096));
    expect_schema_error(s, r, HZ_EFORMAT, "layer 1 expert 1");

    r = manifest_json(s);
    blob = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "experts"), "blobs"), 0);
    cJSON_ReplaceItemInObject(blob, "offset", cJSON_CreateNumber(1e300));
    expect_schema_error(s, r, HZ_EFORMAT, "layer 0 expert 0");

    r = manifest_json(s);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(r, "precision"), "block", cJSON_CreateNumber(128));
    expect_schema_error(s, r, HZ_EFORMAT, "precision");

    r = manifest_json(s);
    cJSON_ReplaceItemInObject(r, "architecture", cJSON_CreateString("olmoe"));
    expect_schema_error(s, r, HZ_EFORMAT, "architecture");

    r = manifest_json(s);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(r, "config"), "hidden_size");
    expect_schema_error(s, r, HZ_EFORMAT, "config");

    r = manifest_json(s);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(r, "config"), "model_type", cJSON_CreateString("llama"));
    expect_schema_error(s, r, HZ_EUNSUPPORTED, "llama");

    r = manifest_json(s);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "experts"), "layout"),
                              "blob_bytes", cJSON_CreateNumber(12));
    expect_schema_error(s, r, HZ_EFORMAT, "blob_bytes");

    r = manifest_json(s);
    t = find_tensor(r, "model.norm.weight");
    cJSON_ReplaceItemInObject(t, "xxh3", cJSON_CreateString("XYZ"));
    expect_schema_error(s, r, HZ_EFORMAT, "xxh3");

    r = cJSON_CreateArray();
    expect_schema_error(s, r, HZ_EFORMAT, "not a JSON object");
}

/* Every single-byte corruption of the header page and manifest, and every truncation of the meta
 * image, is rejected without crashing (a cheap deterministic stand-in for the fuzzer). */
static void test_corruption_sweep(void **state) {
    art_state *s = *state;
    size_t ml = (size_t)s->art->header.manifest_bytes, n = HZ_ARTIFACT_HEADER_BYTES + ml;
    uint8_t *img = malloc(n);
    memcpy(img, s->bytes, HZ_ARTIFACT_HEADER_BYTES);
    memcpy(img + HZ_ARTIFACT_HEADER_BYTES, s->bytes + s->art->header.manifest_offset, ml);
    hz_artifact *a = NULL;
    assert_int_equal(hz_artifact_parse_meta_image(img, n, "x", &a), HZ_OK);
    hz_artifact_free(a);
    for (size_t i = 0; i < n; i += (i < 128 ? 1 : 37)) {
        img[i] ^= 0x5a;
        a = NULL;
        int rc = hz_artifact_parse_meta_image(img, n, "x", &a);
        if (rc == HZ_OK) fail_msg("corruption at byte %zu accepted", i);
        assert_true(rc == HZ_EFORMAT || rc == HZ_EIDENTITY);
        assert_true(strlen(hz_last_error_message()) > 0);
        img[i] ^= 0x5a;
    }
    for (size_t len = 0; len < n; len += (len < 64 ? 1 : 211)) {
        a = NULL;
        assert_int_not_equal(hz_artifact_parse_meta_image(img, len, "x", &a), HZ_OK);
        assert_null(a);
    }
    free(img);
}

static void test_writer_misuse(void **state) {
    (void)state;
    hz_model_config cfg;
    assert_int_equal(hz_config_preset(HZ_ARCH_OLMOE, "tiny", &cfg), HZ_OK);
    char *p = fixture_temp_path(".hzq");
    hz_artifact_writer *w = NULL;
    assert_int_equal(hz_artifact_writer_create(p, &cfg, "bf16", "nothex", &w), HZ_EINVAL);
    assert_int_equal(hz_artifact_writer_create(p, &cfg, "int8", "0123456789abcdef0123456789abcdef", &w),
                     HZ_EINVAL);
    assert_int_equal(hz_artifact_writer_create(p, &cfg, "bf16", "0123456789abcdef0123456789abcdef", &w),
                     HZ_OK);
    uint64_t shape[2] = {3, 3};
    assert_int_equal(hz_artifact_writer_begin_tensor(w, "model.norm.weight", 2, shape), HZ_EINVAL);
    /* a one-dimensional expected shape prints one dimension ([256], not [2560]) */
    expect_msg(hz_last_error_message(), "(2 dims, expected [256])");
    assert_int_equal(hz_artifact_writer_begin_tensor(w, "model.embed_tokens.weight", 2, shape), HZ_EINVAL);
    expect_msg(hz_last_error_message(), "(2 dims, expected [512, 256])");
    assert_int_equal(hz_artifact_writer_begin_tensor(w, "not.a.tensor", 1, shape), HZ_EINVAL);
    uint8_t blob[16] = {0};
    assert_int_equal(hz_artifact_writer_add_expert(w, 0, 1, blob), HZ_EINVAL); /* out of order */
    /* finishing with nothing written fails and removes the temporary file */
    assert_int_equal(hz_artifact_writer_finish(w, NULL), HZ_EINVAL);
    expect_msg(hz_last_error_message(), "never written");
    assert_int_not_equal(access(p, F_OK), 0);
    free(p);
}



/* While the writer is open (hz-pack's can be for minutes) its directory holds nothing new, so a process
 * killed mid-write leaves nothing; abort and a failed finish leave it empty; finish gives the artifact
 * its name, mode 0644 whatever the umask. */
static void test_writer_leaves_nothing(void **state) {
    (void)state;
    const char *tmpdir = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/hz-test-aw-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    assert_non_null(mkdtemp(dir));
    const int unnamed = hz_test_have_unnamed(dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/a.hzq", dir);
    hz_model_config cfg;
    assert_int_equal(hz_config_preset(HZ_ARCH_OLMOE, "tiny", &cfg), HZ_OK);
    const char *src_id = "0123456789abcdef0123456789abcdef";
    hz_artifact_writer *w = NULL;
    for (int round = 0; round < 2; round++) {
        assert_int_equal(hz_artifact_writer_create(path, &cfg, "bf16", src_id, &w), HZ_OK);
        uint64_t shape[1] = {cfg.hidden};
        assert_int_equal(hz_artifact_writer_begin_tensor(w, "model.norm.weight", 1, shape), HZ_OK);
        uint16_t half[64] = {0};
        assert_int_equal(hz_artifact_writer_write(w, half, sizeof half), HZ_OK);
        assert_true(hz_artifact_writer_bytes(w) > 0);
        assert_int_equal(hz_test_count_entries(dir, NULL, 0), unnamed ? 0 : 1);
        if (round == 0) {
            hz_artifact_writer_abort(w);
        } else {
            assert_int_equal(hz_artifact_writer_finish(w, NULL), HZ_EINVAL); /* tensor not ended */
        }
        assert_int_equal(hz_test_count_entries(dir, NULL, 0), 0);
    }

    /* a complete artifact, written by the fixture into this directory */
    char *saved = tmpdir ? strdup(tmpdir) : NULL; /* setenv may reuse what getenv returned */
    setenv("TMPDIR", dir, 1);
    const mode_t old_mask = umask(077);
    char id[HZ_IDENTITY_HEX_BYTES];
    char *p = fixture_write_artifact(HZ_ARCH_OLMOE, 3, id);
    umask(old_mask);
    if (saved) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
    free(saved);
    assert_int_equal(hz_test_count_entries(dir, NULL, 0), 1);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0644);
    hz_host_backing *b = NULL;
    assert_int_equal(hz_host_backing_open(p, NULL, &b), HZ_OK);
    assert_string_equal(hz_host_backing_identity(b), id);
    assert_int_equal(hz_host_backing_close(b), HZ_OK);
    unlink(p);
    free(p);
    assert_int_equal(rmdir(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_olmoe_round_trip),
        cmocka_unit_test(test_wrong_magic),
        cmocka_unit_test(test_wrong_version),
        cmocka_unit_test(test_flipped_header_field),
        cmocka_unit_test(test_flipped_manifest),
        cmocka_unit_test(test_flipped_blob),
        cmocka_unit_test(test_flipped_tensor),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_manifest_schema),
        cmocka_unit_test(test_corruption_sweep),
        cmocka_unit_test(test_writer_misuse),
        cmocka_unit_test(test_writer_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
