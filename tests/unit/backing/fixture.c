/* Tiny artifacts for tests, written through hz_artifact_writer (the code under test). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/fp16.h"
#include "fixture.h"

uint16_t fixture_tensor_value(const char *name, uint64_t i) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    /* small values in [-0.5, 0.5): exact in FP16 steps of 1/1024 */
    int v = (int)((h + i * 2654435761u) % 1024u) - 512;
    return hz_f32_to_f16((float)v / 1024.0f);
}

uint8_t fixture_blob_byte(uint64_t seed, uint32_t layer, uint32_t expert, uint64_t i) {
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + ((uint64_t)layer << 40) + ((uint64_t)expert << 24) + i;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint8_t)(z ^ (z >> 31));
}

char *fixture_temp_path(const char *suffix) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    static unsigned counter;
    char *p = malloc(4096);
    assert_non_null(p);
    snprintf(p, 4096, "%s/hz-test-%ld-%u%s", dir, (long)getpid(), counter++, suffix);
    return p;
}

char *fixture_write_artifact(hz_arch arch, uint64_t seed, char identity[HZ_IDENTITY_HEX_BYTES]) {
    hz_model_config cfg;
    assert_int_equal(hz_config_preset(arch, "tiny", &cfg), HZ_OK);
    char *path = fixture_temp_path(".hzq");
    hz_artifact_writer *w = NULL;
    int rc = hz_artifact_writer_create(path, &cfg, "bf16", "0123456789abcdef0123456789abcdef", &w);
    if (rc) fail_msg("writer_create: %s", hz_last_error_message());
    hz_tensor_spec *specs = NULL;
    uint32_t n = 0;
    assert_int_equal(hz_arch_nonrouted_tensors(&cfg, &specs, &n), HZ_OK);
    for (uint32_t i = 0; i < n; i++) {
        const hz_tensor_spec *s = &specs[i];
        uint64_t numel = s->ndim == 2 ? s->shape[0] * s->shape[1] : s->shape[0];
        uint16_t *v = malloc(numel * 2);
        assert_non_null(v);
        for (uint64_t k = 0; k < numel; k++) v[k] = fixture_tensor_value(s->name, k);
        assert_int_equal(hz_artifact_writer_begin_tensor(w, s->name, s->ndim, s->shape), HZ_OK);
        /* two writes: the writer must accept any split */
        assert_int_equal(hz_artifact_writer_write(w, v, numel), HZ_OK);
        assert_int_equal(hz_artifact_writer_write(w, (uint8_t *)v + numel, numel), HZ_OK);
        assert_int_equal(hz_artifact_writer_end_tensor(w), HZ_OK);
        free(v);
    }
    free(specs);
    hz_expert_layout L;
    hz_expert_layout_init(&L, cfg.hidden, cfg.expert_inter);
    uint8_t *blob = malloc(L.blob_bytes);
    assert_non_null(blob);
    for (uint32_t l = 0; l < cfg.layers; l++)
        for (uint32_t e = 0; e < cfg.experts; e++) {
            for (uint64_t k = 0; k < L.blob_bytes; k++) blob[k] = fixture_blob_byte(seed, l, e, k);
            assert_int_equal(hz_artifact_writer_add_expert(w, l, e, blob), HZ_OK);
        }
    free(blob);
    rc = hz_artifact_writer_finish(w, identity);
    if (rc) fail_msg("writer_finish: %s", hz_last_error_message());
    return path;
}

uint8_t *fixture_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

void fixture_write_file(const char *path, const uint8_t *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}
