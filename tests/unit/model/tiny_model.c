/* Test support: tiny random-weight artifacts (see tiny_model.h). */
#include "tiny_model.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "core/fp16.h"
#include "format/artifact.h"
#include "format/qpack.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_uniform(uint64_t *s) { return (float)((double)(rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0); }

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int tiny_model_write(const char *path, hz_arch arch, uint64_t seed) {
    hz_model_config cfg;
    int st = hz_config_preset(arch, "tiny", &cfg);
    if (st) return st;
    hz_artifact_writer *w = NULL;
    st = hz_artifact_writer_create(path, &cfg, "bf16", "0123456789abcdef0123456789abcdef", &w);
    if (st) return st;
    hz_tensor_spec *specs = NULL;
    uint32_t n = 0;
    st = hz_arch_nonrouted_tensors(&cfg, &specs, &n);
    uint64_t rng = seed * 1000003ull + 17u;
    for (uint32_t i = 0; i < n && !st; i++) {
        const hz_tensor_spec *sp = &specs[i];
        uint64_t numel = sp->shape[0] * (sp->ndim > 1 ? sp->shape[1] : 1u);
        hz_f16 *buf = malloc(numel * sizeof(hz_f16));
        if (!buf) {
            st = HZ_ENOMEM;
            break;
        }
        /* Norm weights near 1, biases small, matrices scaled by 1/sqrt(fan-in) so activations stay
         * O(1) through the layers, embeddings O(1). The router gets a larger scale so routing is
         * decisive and differs between tokens. */
        float scale = sp->ndim > 1 ? 1.0f / sqrtf((float)sp->shape[1]) : 0.1f;
        float base = 0.0f;
        if (ends_with(sp->name, "norm.weight")) base = 1.0f;
        if (strstr(sp->name, "embed_tokens")) scale = 1.0f;
        if (ends_with(sp->name, "mlp.gate.weight")) scale *= 8.0f;
        for (uint64_t j = 0; j < numel; j++) buf[j] = hz_f32_to_f16(base + scale * rng_uniform(&rng));
        st = hz_artifact_writer_begin_tensor(w, sp->name, sp->ndim, sp->shape);
        if (!st) st = hz_artifact_writer_write(w, buf, numel * sizeof(hz_f16));
        if (!st) st = hz_artifact_writer_end_tensor(w);
        free(buf);
    }
    free(specs);
    hz_expert_layout layout;
    hz_expert_layout_init(&layout, cfg.hidden, cfg.expert_inter);
    size_t gi = (size_t)cfg.expert_inter * cfg.hidden;
    float *gate = malloc(gi * sizeof(float)), *up = malloc(gi * sizeof(float)), *down = malloc(gi * sizeof(float));
    uint8_t *blob = malloc(layout.blob_bytes);
    if (!st && (!gate || !up || !down || !blob)) st = HZ_ENOMEM;
    float sg = 1.0f / sqrtf((float)cfg.hidden), sd = 1.0f / sqrtf((float)cfg.expert_inter);
    for (uint32_t l = 0; l < cfg.layers && !st; l++)
        for (uint32_t e = 0; e < cfg.experts && !st; e++) {
            for (size_t j = 0; j < gi; j++) {
                gate[j] = sg * rng_uniform(&rng);
                up[j] = sg * rng_uniform(&rng);
                down[j] = sd * rng_uniform(&rng);
            }
            st = hz_expert_pack(&layout, gate, up, down, blob, "tiny expert");
            if (!st) st = hz_artifact_writer_add_expert(w, l, e, blob);
        }
    free(gate);
    free(up);
    free(down);
    free(blob);
    if (st) {
        hz_artifact_writer_abort(w);
        return st;
    }
    return hz_artifact_writer_finish(w, NULL);
}

int tiny_tmpdir(char **out) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    size_t n = strlen(base) + 32;
    char *p = malloc(n);
    if (!p) return HZ_ENOMEM;
    snprintf(p, n, "%s/hz-model-XXXXXX", base);
    if (!mkdtemp(p)) {
        free(p);
        return HZ_EIO;
    }
    *out = p;
    return HZ_OK;
}

void tiny_rmdir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

int tiny_model_pair(char **dir, char path[2][TINY_PATH_MAX]) {
    *dir = NULL;
    char *d = NULL;
    int st = tiny_tmpdir(&d);
    if (st) return hz_error(st, "tiny models: no temporary directory");
    snprintf(path[0], TINY_PATH_MAX, "%s/olmoe.hzq", d);
    snprintf(path[1], TINY_PATH_MAX, "%s/qwen.hzq", d);
    st = tiny_model_write(path[0], HZ_ARCH_OLMOE, 1);
    if (!st) st = tiny_model_write(path[1], HZ_ARCH_QWEN2MOE, 2);
    if (st) {
        tiny_rmdir(d);
        free(d);
        return st;
    }
    *dir = d;
    return HZ_OK;
}

int tiny_world_setup(void **state) {
    tiny_world *w = calloc(1, sizeof *w);
    if (!w) return -1;
    if (tiny_model_pair(&w->dir, w->path)) {
        fprintf(stderr, "tiny models: %s\n", hz_last_error_message());
        free(w);
        return -1;
    }
    *state = w;
    return 0;
}

int tiny_world_teardown(void **state) {
    tiny_world *w = *state;
    tiny_rmdir(w->dir);
    free(w->dir);
    free(w);
    return 0;
}
