/* The .hzq artifact: header serialization, manifest writer and validating reader, streaming load with
 * checksums, the per-architecture tensor inventory and the source checkpoint identity.
 * doc/format.md describes the format; every rule stated there is checked here. */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "format/artifact.h"
#include "core/json.h"
#include "format/safetensors.h"

/* ---------------------------------------------------------------------------------------------------
 * Little-endian fields (explicit byte order: the header never depends on the host's struct layout)
 * ------------------------------------------------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void hz_artifact_header_write(const hz_artifact_header *h, uint8_t page[HZ_ARTIFACT_HEADER_BYTES]) {
    memset(page, 0, HZ_ARTIFACT_HEADER_BYTES);
    memcpy(page + HZ_AH_MAGIC, HZ_ARTIFACT_MAGIC, 8);
    put_u32(page + HZ_AH_VERSION, h->version);
    put_u32(page + HZ_AH_HEADER_BYTES, h->header_bytes);
    put_u64(page + HZ_AH_DATA_OFFSET, h->data_offset);
    put_u64(page + HZ_AH_DATA_BYTES, h->data_bytes);
    put_u64(page + HZ_AH_MANIFEST_OFFSET, h->manifest_offset);
    put_u64(page + HZ_AH_MANIFEST_BYTES, h->manifest_bytes);
    put_u64(page + HZ_AH_MANIFEST_XXH3, h->manifest_xxh3);
    put_u64(page + HZ_AH_IDENTITY_HI, h->identity_hi);
    put_u64(page + HZ_AH_IDENTITY_LO, h->identity_lo);
    put_u64(page + HZ_AH_FILE_BYTES, h->file_bytes);
    put_u64(page + HZ_AH_HEADER_XXH3, XXH3_64bits(page, HZ_AH_HEADER_XXH3));
}

int hz_artifact_header_parse(const uint8_t *page, size_t len, const char *what,
                             hz_artifact_header *out) {
    memset(out, 0, sizeof *out);
    if (!page || len < 8 || memcmp(page, HZ_ARTIFACT_MAGIC, 8) != 0)
        return hz_error(HZ_EFORMAT, "%s: not a Horizon artifact (the first 8 bytes are not \"%s\")",
                        what, HZ_ARTIFACT_MAGIC);
    if (len < 12)
        return hz_error(HZ_EFORMAT, "%s: truncated: %zu bytes, the header needs %u", what, len,
                        HZ_ARTIFACT_HEADER_BYTES);
    uint32_t version = get_u32(page + HZ_AH_VERSION);
    if (version != HZ_ARTIFACT_VERSION)
        return hz_error(HZ_EFORMAT,
                        "%s: artifact format version %u found, this library reads version %u "
                        "(re-run hz-pack)",
                        what, version, HZ_ARTIFACT_VERSION);
    if (len < HZ_ARTIFACT_HEADER_BYTES)
        return hz_error(HZ_EFORMAT, "%s: truncated: %zu bytes, shorter than the %u-byte header", what,
                        len, HZ_ARTIFACT_HEADER_BYTES);
    uint64_t hx = get_u64(page + HZ_AH_HEADER_XXH3);
    if (hx != XXH3_64bits(page, HZ_AH_HEADER_XXH3))
        return hz_error(HZ_EIDENTITY, "%s: header checksum mismatch (header bytes 0..%d are corrupt)",
                        what, HZ_AH_HEADER_XXH3 - 1);
    for (size_t i = HZ_AH_USED; i < HZ_ARTIFACT_HEADER_BYTES; i++)
        if (page[i] != 0)
            return hz_error(HZ_EFORMAT, "%s: header: reserved byte at offset %zu is not zero", what,
                            i);
    hz_artifact_header h;
    h.version = version;
    h.header_bytes = get_u32(page + HZ_AH_HEADER_BYTES);
    h.data_offset = get_u64(page + HZ_AH_DATA_OFFSET);
    h.data_bytes = get_u64(page + HZ_AH_DATA_BYTES);
    h.manifest_offset = get_u64(page + HZ_AH_MANIFEST_OFFSET);
    h.manifest_bytes = get_u64(page + HZ_AH_MANIFEST_BYTES);
    h.manifest_xxh3 = get_u64(page + HZ_AH_MANIFEST_XXH3);
    h.identity_hi = get_u64(page + HZ_AH_IDENTITY_HI);
    h.identity_lo = get_u64(page + HZ_AH_IDENTITY_LO);
    h.file_bytes = get_u64(page + HZ_AH_FILE_BYTES);
    if (h.header_bytes != HZ_ARTIFACT_HEADER_BYTES)
        return hz_error(HZ_EFORMAT, "%s: header: header_bytes %u, expected %u", what, h.header_bytes,
                        HZ_ARTIFACT_HEADER_BYTES);
    if (h.data_offset != HZ_ARTIFACT_HEADER_BYTES)
        return hz_error(HZ_EFORMAT, "%s: header: data_offset %llu, expected %u", what,
                        (unsigned long long)h.data_offset, HZ_ARTIFACT_HEADER_BYTES);
    if (h.data_bytes % HZ_ARTIFACT_ALIGN != 0)
        return hz_error(HZ_EFORMAT, "%s: header: data_bytes %llu is not a multiple of %u", what,
                        (unsigned long long)h.data_bytes, HZ_ARTIFACT_ALIGN);
    uint64_t end;
    if (!hz_add_ok(h.data_offset, h.data_bytes, &end) || end != h.manifest_offset)
        return hz_error(HZ_EFORMAT,
                        "%s: header: manifest_offset %llu does not follow the data region (%llu + %llu)",
                        what, (unsigned long long)h.manifest_offset,
                        (unsigned long long)h.data_offset, (unsigned long long)h.data_bytes);
    if (h.manifest_bytes < 2 || h.manifest_bytes > HZ_ARTIFACT_MAX_MANIFEST)
        return hz_error(HZ_EFORMAT, "%s: header: manifest_bytes %llu outside [2, %u]", what,
                        (unsigned long long)h.manifest_bytes, HZ_ARTIFACT_MAX_MANIFEST);
    if (!hz_add_ok(h.manifest_offset, h.manifest_bytes, &end) || end != h.file_bytes)
        return hz_error(HZ_EFORMAT,
                        "%s: header: file_bytes %llu != manifest_offset %llu + manifest_bytes %llu",
                        what, (unsigned long long)h.file_bytes, (unsigned long long)h.manifest_offset,
                        (unsigned long long)h.manifest_bytes);
    *out = h;
    return HZ_OK;
}

void hz_artifact_identity_hex(const hz_artifact_header *h, char out[HZ_IDENTITY_HEX_BYTES]) {
    snprintf(out, HZ_IDENTITY_HEX_BYTES, "%016llx%016llx", (unsigned long long)h->identity_hi,
             (unsigned long long)h->identity_lo);
}

void hz_artifact_free(hz_artifact *art) {
    if (!art) return;
    if (art->tensors) {
        for (uint32_t i = 0; i < art->n_tensors; i++) free(art->tensors[i].name);
        free(art->tensors);
    }
    free(art->blobs);
    free(art->config_json);
    free(art->manifest);
    free(art);
}

/* ---------------------------------------------------------------------------------------------------
 * Architecture inventory (MODELS.md tensor lists)
 * ------------------------------------------------------------------------------------------------- */

typedef struct spec_list {
    hz_tensor_spec *v;
    uint32_t n, cap;
    int oom;
} spec_list;

static void spec_add(spec_list *l, uint32_t ndim, uint64_t d0, uint64_t d1, const char *fmt, ...)
    HZ_PRINTF(5, 6);
static void spec_add(spec_list *l, uint32_t ndim, uint64_t d0, uint64_t d1, const char *fmt, ...) {
    if (l->oom) return;
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 64;
        hz_tensor_spec *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) {
            l->oom = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    hz_tensor_spec *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->name, sizeof s->name, fmt, ap);
    va_end(ap);
    s->ndim = ndim;
    s->shape[0] = d0;
    s->shape[1] = d1;
}

int hz_arch_nonrouted_tensors(const hz_model_config *cfg, hz_tensor_spec **out, uint32_t *out_n) {
    *out = NULL;
    *out_n = 0;
    if (cfg->arch != HZ_ARCH_OLMOE && cfg->arch != HZ_ARCH_QWEN2MOE)
        return hz_error(HZ_EUNSUPPORTED, "architecture %d has no tensor inventory", (int)cfg->arch);
    spec_list l = {0};
    uint64_t h = cfg->hidden;
    uint64_t qd = (uint64_t)cfg->heads * cfg->head_dim;
    uint64_t kvd = (uint64_t)cfg->kv_heads * cfg->head_dim;
    spec_add(&l, 2, cfg->vocab, h, "model.embed_tokens.weight");
    for (uint32_t i = 0; i < cfg->layers; i++) {
        const char *p = "model.layers";
        spec_add(&l, 1, h, 0, "%s.%u.input_layernorm.weight", p, i);
        spec_add(&l, 2, qd, h, "%s.%u.self_attn.q_proj.weight", p, i);
        spec_add(&l, 2, kvd, h, "%s.%u.self_attn.k_proj.weight", p, i);
        spec_add(&l, 2, kvd, h, "%s.%u.self_attn.v_proj.weight", p, i);
        spec_add(&l, 2, h, qd, "%s.%u.self_attn.o_proj.weight", p, i);
        if (cfg->qkv_bias) {
            spec_add(&l, 1, qd, 0, "%s.%u.self_attn.q_proj.bias", p, i);
            spec_add(&l, 1, kvd, 0, "%s.%u.self_attn.k_proj.bias", p, i);
            spec_add(&l, 1, kvd, 0, "%s.%u.self_attn.v_proj.bias", p, i);
            /* OLMoE's attention_bias puts a bias on all four projections, Qwen's only on q/k/v */
            if (cfg->arch == HZ_ARCH_OLMOE) spec_add(&l, 1, h, 0, "%s.%u.self_attn.o_proj.bias", p, i);
        }
        if (cfg->qk_norm) {
            spec_add(&l, 1, qd, 0, "%s.%u.self_attn.q_norm.weight", p, i);
            spec_add(&l, 1, kvd, 0, "%s.%u.self_attn.k_norm.weight", p, i);
        }
        spec_add(&l, 1, h, 0, "%s.%u.post_attention_layernorm.weight", p, i);
        spec_add(&l, 2, cfg->experts, h, "%s.%u.mlp.gate.weight", p, i);
        if (cfg->arch == HZ_ARCH_QWEN2MOE && cfg->shared_inter > 0) {
            spec_add(&l, 2, cfg->shared_inter, h, "%s.%u.mlp.shared_expert.gate_proj.weight", p, i);
            spec_add(&l, 2, cfg->shared_inter, h, "%s.%u.mlp.shared_expert.up_proj.weight", p, i);
            spec_add(&l, 2, h, cfg->shared_inter, "%s.%u.mlp.shared_expert.down_proj.weight", p, i);
            spec_add(&l, 2, 1, h, "%s.%u.mlp.shared_expert_gate.weight", p, i);
        }
    }
    spec_add(&l, 1, h, 0, "model.norm.weight");
    if (!cfg->tie_embeddings) spec_add(&l, 2, cfg->vocab, h, "lm_head.weight");
    if (l.oom) {
        free(l.v);
        return hz_error(HZ_ENOMEM, "out of memory listing tensors");
    }
    *out = l.v;
    *out_n = l.n;
    return HZ_OK;
}

void hz_expert_tensor_name(char out[HZ_TENSOR_NAME_MAX], uint32_t layer, uint32_t expert, int proj) {
    static const char *const names[3] = {"gate_proj", "up_proj", "down_proj"};
    snprintf(out, HZ_TENSOR_NAME_MAX, "model.layers.%u.mlp.experts.%u.%s.weight", layer, expert,
             names[proj < 0 || proj > 2 ? 0 : proj]);
}

static int spec_cmp(const void *a, const void *b) {
    return strcmp(((const hz_tensor_spec *)a)->name, ((const hz_tensor_spec *)b)->name);
}

static int spec_key_cmp(const void *key, const void *elem) {
    return strcmp((const char *)key, ((const hz_tensor_spec *)elem)->name);
}

/* ---------------------------------------------------------------------------------------------------
 * Manifest: schema helpers
 * ------------------------------------------------------------------------------------------------- */

#define HZ_JSON_MAX_EXACT 9007199254740992.0 /* 2^53: larger integers are not exact in a double */

static int json_u64(const cJSON *obj, const char *key, uint64_t *out, const char *what,
                    const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return hz_error(HZ_EFORMAT, "%s: manifest: %s: missing key \"%s\"", what, where, key);
    if (!cJSON_IsNumber(v))
        return hz_error(HZ_EFORMAT, "%s: manifest: %s: \"%s\" is not a number", what, where, key);
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > HZ_JSON_MAX_EXACT || d != (double)(uint64_t)d)
        return hz_error(HZ_EFORMAT, "%s: manifest: %s: \"%s\" is not a non-negative integer", what,
                        where, key);
    *out = (uint64_t)d;
    return HZ_OK;
}

static int json_str(const cJSON *obj, const char *key, const char **out, const char *what,
                    const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return hz_error(HZ_EFORMAT, "%s: manifest: %s: missing key \"%s\"", what, where, key);
    if (!cJSON_IsString(v) || !v->valuestring)
        return hz_error(HZ_EFORMAT, "%s: manifest: %s: \"%s\" is not a string", what, where, key);
    *out = v->valuestring;
    return HZ_OK;
}

static int json_expect_str(const cJSON *obj, const char *key, const char *expected, const char *what,
                           const char *where) {
    const char *s = NULL;
    int rc = json_str(obj, key, &s, what, where);
    if (rc) return rc;
    if (strcmp(s, expected) != 0)
        return hz_error(HZ_EFORMAT, "%s: manifest: %s: \"%s\" is \"%.64s\", expected \"%s\"", what,
                        where, key, s, expected);
    return HZ_OK;
}

static int json_expect_u64(const cJSON *obj, const char *key, uint64_t expected, const char *what,
                           const char *where) {
    uint64_t v = 0;
    int rc = json_u64(obj, key, &v, what, where);
    if (rc) return rc;
    if (v != expected)
        return hz_error(HZ_EFORMAT, "%s: manifest: %s: \"%s\" is %llu, expected %llu", what, where,
                        key, (unsigned long long)v, (unsigned long long)expected);
    return HZ_OK;
}

static int parse_hex(const char *s, size_t digits, uint64_t *out) {
    if (strlen(s) != digits) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else return 0;
        v = (v << 4) | d;
    }
    if (out) *out = v;
    return 1;
}

static int json_xxh3(const cJSON *obj, uint64_t *out, const char *what, const char *where) {
    const char *s = NULL;
    int rc = json_str(obj, "xxh3", &s, what, where);
    if (rc) return rc;
    if (!parse_hex(s, 16, out))
        return hz_error(HZ_EFORMAT, "%s: manifest: %s: \"xxh3\" is not 16 lowercase hex digits", what,
                        where);
    return HZ_OK;
}

static void xxh3_hex(uint64_t v, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)v); }

/* Checks [off, off + bytes) is aligned and inside [lo, hi). */
static int check_range(uint64_t off, uint64_t bytes, uint64_t lo, uint64_t hi, const char *what,
                       const char *where) {
    uint64_t end;
    if (off % HZ_ARTIFACT_ALIGN != 0)
        return hz_error(HZ_EFORMAT, "%s: manifest: %s: offset %llu is not a multiple of %u", what,
                        where, (unsigned long long)off, HZ_ARTIFACT_ALIGN);
    if (!hz_add_ok(off, bytes, &end) || off < lo || end > hi)
        return hz_error(HZ_EFORMAT,
                        "%s: manifest: %s: bytes [%llu, %llu + %llu) outside its region [%llu, %llu)",
                        what, where, (unsigned long long)off, (unsigned long long)off,
                        (unsigned long long)bytes, (unsigned long long)lo, (unsigned long long)hi);
    return HZ_OK;
}

static int tensor_offset_cmp(const void *a, const void *b) {
    uint64_t x = ((const hz_artifact_tensor *)a)->offset, y = ((const hz_artifact_tensor *)b)->offset;
    return x < y ? -1 : x > y;
}

static int layout_check(const cJSON *lo, const hz_expert_layout *want, const char *what) {
    static const char *where = "experts.layout";
    int rc;
    if ((rc = json_expect_u64(lo, "hidden", want->hidden, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "inter", want->inter, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "part_align", HZ_BLOB_PART_ALIGN, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "gate_q", want->gate_q, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "gate_s", want->gate_s, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "up_q", want->up_q, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "up_s", want->up_s, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "down_q", want->down_q, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "down_s", want->down_s, what, where))) return rc;
    if ((rc = json_expect_u64(lo, "blob_bytes", want->blob_bytes, what, where))) return rc;
    return HZ_OK;
}

static int parse_tensors(const cJSON *arr, hz_artifact *art, uint64_t lo, uint64_t hi,
                         const char *what) {
    /* every layer has at least 7 non-routed tensors: refuse an inflated layer count before building an
     * inventory of that size (a corrupt config must not make the reader allocate gigabytes) */
    int n_listed = cJSON_GetArraySize(arr);
    if (n_listed < 0 || (uint64_t)n_listed < (uint64_t)art->cfg.layers * 7)
        return hz_error(HZ_EFORMAT, "%s: manifest: \"tensors\" lists %d tensors, too few for %u layers",
                        what, n_listed, art->cfg.layers);
    hz_tensor_spec *specs = NULL;
    uint32_t n_specs = 0;
    int rc = hz_arch_nonrouted_tensors(&art->cfg, &specs, &n_specs);
    if (rc) return rc;
    qsort(specs, n_specs, sizeof *specs, spec_cmp);
    uint8_t *seen = NULL;
    int n_arr = cJSON_GetArraySize(arr);
    if (n_arr < 0 || (uint32_t)n_arr != n_specs) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest: \"tensors\" lists %d tensors, %s needs %u", what,
                      n_arr, hz_arch_name(art->cfg.arch), n_specs);
        goto done;
    }
    seen = calloc(n_specs ? n_specs : 1, 1);
    art->tensors = calloc(n_specs ? n_specs : 1, sizeof *art->tensors);
    if (!seen || !art->tensors) {
        rc = hz_error(HZ_ENOMEM, "out of memory reading the manifest");
        goto done;
    }
    uint32_t i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, arr) {
        char where[160];
        snprintf(where, sizeof where, "tensors[%u]", i);
        if (!cJSON_IsObject(t)) {
            rc = hz_error(HZ_EFORMAT, "%s: manifest: %s is not an object", what, where);
            goto done;
        }
        const char *name = NULL;
        if ((rc = json_str(t, "name", &name, what, where))) goto done;
        const hz_tensor_spec *sp = bsearch(name, specs, n_specs, sizeof *specs, spec_key_cmp);
        if (!sp) {
            rc = hz_error(HZ_EFORMAT, "%s: manifest: %s: tensor '%.120s' is not part of %s", what,
                          where, name, hz_arch_name(art->cfg.arch));
            goto done;
        }
        snprintf(where, sizeof where, "tensor '%s'", sp->name);
        size_t si = (size_t)(sp - specs);
        if (seen[si]) {
            rc = hz_error(HZ_EFORMAT, "%s: manifest: %s is listed twice", what, where);
            goto done;
        }
        seen[si] = 1;
        if ((rc = json_expect_str(t, "dtype", "f16", what, where))) goto done;
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        if (!cJSON_IsArray(shape) || (uint32_t)cJSON_GetArraySize(shape) != sp->ndim) {
            rc = hz_error(HZ_EFORMAT, "%s: manifest: %s: \"shape\" must be an array of %u dimensions",
                          what, where, sp->ndim);
            goto done;
        }
        hz_artifact_tensor *at = &art->tensors[i];
        uint32_t d = 0;
        const cJSON *dim;
        cJSON_ArrayForEach(dim, shape) {
            double v = cJSON_IsNumber(dim) ? dim->valuedouble : -1.0;
            if (v != (double)sp->shape[d]) {
                rc = hz_error(HZ_EFORMAT,
                              "%s: manifest: %s: dimension %u is not %llu as the config requires",
                              what, where, d, (unsigned long long)sp->shape[d]);
                goto done;
            }
            at->shape[d] = sp->shape[d];
            d++;
        }
        at->ndim = sp->ndim;
        at->numel = 1;
        for (d = 0; d < at->ndim; d++)
            if (!hz_mul_ok(at->numel, at->shape[d], &at->numel)) {
                rc = hz_error(HZ_EFORMAT, "%s: manifest: %s: element count overflows", what, where);
                goto done;
            }
        uint64_t want_bytes;
        if (!hz_mul_ok(at->numel, 2, &want_bytes)) {
            rc = hz_error(HZ_EFORMAT, "%s: manifest: %s: byte count overflows", what, where);
            goto done;
        }
        if ((rc = json_u64(t, "offset", &at->offset, what, where))) goto done;
        if ((rc = json_expect_u64(t, "bytes", want_bytes, what, where))) goto done;
        at->bytes = want_bytes;
        if ((rc = json_xxh3(t, &at->xxh3, what, where))) goto done;
        if ((rc = check_range(at->offset, at->bytes, lo, hi, what, where))) goto done;
        at->name = hz_strdup(sp->name);
        if (!at->name) {
            rc = HZ_ENOMEM;
            goto done;
        }
        i++;
        art->n_tensors = i;
    }
    /* non-overlapping: sort by offset, each must end before the next begins */
    qsort(art->tensors, art->n_tensors, sizeof *art->tensors, tensor_offset_cmp);
    for (uint32_t k = 1; k < art->n_tensors; k++) {
        const hz_artifact_tensor *a = &art->tensors[k - 1], *b = &art->tensors[k];
        if (a->offset + a->bytes > b->offset) {
            rc = hz_error(HZ_EFORMAT, "%s: manifest: tensor '%s' overlaps tensor '%s'", what, a->name,
                          b->name);
            goto done;
        }
    }
    rc = HZ_OK;
done:
    free(seen);
    free(specs);
    return rc;
}

static int parse_experts(const cJSON *ex, hz_artifact *art, const char *what) {
    static const char *where = "experts";
    int rc;
    if (!cJSON_IsObject(ex))
        return hz_error(HZ_EFORMAT, "%s: manifest: \"experts\" is missing or not an object", what);
    if ((rc = json_expect_u64(ex, "layers", art->cfg.layers, what, where))) return rc;
    if ((rc = json_expect_u64(ex, "experts_per_layer", art->cfg.experts, what, where))) return rc;
    hz_expert_layout_init(&art->layout, art->cfg.hidden, art->cfg.expert_inter);
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(ex, "layout");
    if (!cJSON_IsObject(lo))
        return hz_error(HZ_EFORMAT, "%s: manifest: experts.layout is missing or not an object", what);
    if ((rc = layout_check(lo, &art->layout, what))) return rc;
    /* bounds the stride computation below (no wrap-around for absurd shapes) */
    if (art->layout.blob_bytes == 0 || art->layout.blob_bytes > art->header.data_bytes)
        return hz_error(HZ_EFORMAT, "%s: manifest: expert blob of %llu bytes does not fit the %llu-byte "
                                    "data region",
                        what, (unsigned long long)art->layout.blob_bytes,
                        (unsigned long long)art->header.data_bytes);
    art->blob_stride = hz_align_up(art->layout.blob_bytes, HZ_ARTIFACT_ALIGN);
    art->n_blobs = (uint64_t)art->cfg.layers * art->cfg.experts;
    if ((rc = json_expect_u64(ex, "blob_stride", art->blob_stride, what, where))) return rc;
    uint64_t region_bytes;
    if (!hz_mul_ok(art->n_blobs, art->blob_stride, &region_bytes))
        return hz_error(HZ_EFORMAT, "%s: manifest: routed region size overflows", what);
    if ((rc = json_expect_u64(ex, "region_bytes", region_bytes, what, where))) return rc;
    art->routed_bytes = region_bytes;
    /* the routed region ends the data region, so the whole of it can be protected as one range */
    const hz_artifact_header *h = &art->header;
    uint64_t data_end = h->data_offset + h->data_bytes;
    if (region_bytes > h->data_bytes)
        return hz_error(HZ_EFORMAT,
                        "%s: manifest: routed region of %llu bytes does not fit the %llu-byte data "
                        "region",
                        what, (unsigned long long)region_bytes, (unsigned long long)h->data_bytes);
    if ((rc = json_expect_u64(ex, "region_offset", data_end - region_bytes, what, where))) return rc;
    art->routed_offset = data_end - region_bytes;

    const cJSON *blobs = cJSON_GetObjectItemCaseSensitive(ex, "blobs");
    if (!cJSON_IsArray(blobs))
        return hz_error(HZ_EFORMAT, "%s: manifest: experts.blobs is missing or not an array", what);
    int n = cJSON_GetArraySize(blobs);
    if (n < 0 || (uint64_t)n != art->n_blobs)
        return hz_error(HZ_EFORMAT, "%s: manifest: experts.blobs lists %d blobs, expected %llu", what,
                        n, (unsigned long long)art->n_blobs);
    art->blobs = calloc(art->n_blobs ? art->n_blobs : 1, sizeof *art->blobs);
    if (!art->blobs) return hz_error(HZ_ENOMEM, "out of memory reading the manifest");
    uint64_t i = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, blobs) {
        uint32_t layer = (uint32_t)(i / art->cfg.experts), expert = (uint32_t)(i % art->cfg.experts);
        char bw[64];
        snprintf(bw, sizeof bw, "layer %u expert %u", layer, expert);
        if (!cJSON_IsObject(b)) return hz_error(HZ_EFORMAT, "%s: manifest: %s is not an object", what, bw);
        if ((rc = json_expect_u64(b, "layer", layer, what, bw))) return rc;
        if ((rc = json_expect_u64(b, "expert", expert, what, bw))) return rc;
        /* blobs sit at fixed strides, layer-major: offset is implied, and checked */
        uint64_t off = art->routed_offset + i * art->blob_stride;
        if ((rc = json_expect_u64(b, "offset", off, what, bw))) return rc;
        if ((rc = json_expect_u64(b, "bytes", art->layout.blob_bytes, what, bw))) return rc;
        if ((rc = json_xxh3(b, &art->blobs[i].xxh3, what, bw))) return rc;
        art->blobs[i].offset = off;
        art->blobs[i].bytes = art->layout.blob_bytes;
        i++;
    }
    return HZ_OK;
}

int hz_artifact_parse_manifest(const hz_artifact_header *h, const char *manifest, size_t len,
                               const char *what, hz_artifact **out) {
    *out = NULL;
    if (!what) what = "artifact";
    if (len != h->manifest_bytes)
        return hz_error(HZ_EFORMAT, "%s: manifest is %zu bytes, header declares %llu", what, len,
                        (unsigned long long)h->manifest_bytes);
    if (XXH3_64bits(manifest, len) != h->manifest_xxh3)
        return hz_error(HZ_EIDENTITY, "%s: manifest checksum mismatch (the manifest at offset %llu is "
                                      "corrupt)",
                        what, (unsigned long long)h->manifest_offset);
    hz_artifact *art = hz_calloc(1, sizeof *art);
    if (!art) return HZ_ENOMEM;
    art->header = *h;
    art->manifest = hz_malloc(len ? len : 1);
    if (!art->manifest) {
        free(art);
        return HZ_ENOMEM;
    }
    memcpy(art->manifest, manifest, len);
    art->manifest_len = len;

    int rc = HZ_OK;
    cJSON *root = cJSON_ParseWithLength(manifest, len);
    if (!root || !cJSON_IsObject(root)) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest is not a JSON object", what);
        goto fail;
    }
    if ((rc = json_expect_str(root, "format", HZ_ARTIFACT_FORMAT_NAME, what, "top level"))) goto fail;
    if ((rc = json_expect_u64(root, "format_version", HZ_ARTIFACT_VERSION, what, "top level")))
        goto fail;
    const cJSON *cfgj = cJSON_GetObjectItemCaseSensitive(root, "config");
    if (!cJSON_IsObject(cfgj)) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest: \"config\" is missing or not an object", what);
        goto fail;
    }
    art->config_json = hz_json_print(cfgj, 0); /* malloc'd: freed with free() whatever cJSON's hooks */
    if (!art->config_json) {
        rc = hz_error(HZ_ENOMEM, "out of memory reading the manifest");
        goto fail;
    }
    rc = hz_hfconfig_parse(art->config_json, strlen(art->config_json), &art->cfg);
    if (rc) {
        hz_error_prefix(rc, "%s: manifest: config", what);
        goto fail;
    }
    if (art->cfg.layers == 0 || art->cfg.experts == 0 || art->cfg.hidden == 0 ||
        art->cfg.expert_inter == 0) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest: config has no routed experts", what);
        goto fail;
    }
    if ((rc = json_expect_str(root, "architecture", hz_arch_name(art->cfg.arch), what, "top level")))
        goto fail;

    const cJSON *prec = cJSON_GetObjectItemCaseSensitive(root, "precision");
    if (!cJSON_IsObject(prec)) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest: \"precision\" is missing or not an object", what);
        goto fail;
    }
    const char *sd;
    if ((rc = json_str(prec, "source_dtype", &sd, what, "precision"))) goto fail;
    if (strcmp(sd, "bf16") != 0 && strcmp(sd, "f16") != 0 && strcmp(sd, "f32") != 0) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest: precision.source_dtype \"%.32s\" is not bf16, f16 or "
                                  "f32",
                      what, sd);
        goto fail;
    }
    snprintf(art->source_dtype, sizeof art->source_dtype, "%s", sd);
    if ((rc = json_expect_str(prec, "routed", "int4", what, "precision"))) goto fail;
    if ((rc = json_expect_u64(prec, "block", HZ_QBLOCK, what, "precision"))) goto fail;
    if ((rc = json_expect_str(prec, "scale_dtype", "f16", what, "precision"))) goto fail;
    if ((rc = json_expect_str(prec, "activation", "f16", what, "precision"))) goto fail;
    if ((rc = json_expect_str(prec, "non_routed", "f16", what, "precision"))) goto fail;

    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "source");
    const char *sid;
    if (!cJSON_IsObject(src)) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest: \"source\" is missing or not an object", what);
        goto fail;
    }
    if ((rc = json_str(src, "identity", &sid, what, "source"))) goto fail;
    if (!parse_hex(sid, 32, NULL)) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest: source.identity is not 32 lowercase hex digits", what);
        goto fail;
    }
    snprintf(art->source_identity, sizeof art->source_identity, "%s", sid);

    if ((rc = json_expect_u64(root, "data_offset", h->data_offset, what, "top level"))) goto fail;
    if ((rc = json_expect_u64(root, "data_bytes", h->data_bytes, what, "top level"))) goto fail;
    if ((rc = parse_experts(cJSON_GetObjectItemCaseSensitive(root, "experts"), art, what))) goto fail;
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsArray(tensors)) {
        rc = hz_error(HZ_EFORMAT, "%s: manifest: \"tensors\" is missing or not an array", what);
        goto fail;
    }
    /* non-routed tensors live in the data region before the routed region */
    if ((rc = parse_tensors(tensors, art, h->data_offset, art->routed_offset, what))) goto fail;
    cJSON_Delete(root);
    *out = art;
    return HZ_OK;
fail:
    cJSON_Delete(root);
    hz_artifact_free(art);
    return rc;
}

int hz_artifact_parse_meta_image(const uint8_t *buf, size_t len, const char *what, hz_artifact **out) {
    *out = NULL;
    if (!what) what = "artifact";
    hz_artifact_header h;
    int rc = hz_artifact_header_parse(buf, len, what, &h);
    if (rc) return rc;
    return hz_artifact_parse_manifest(&h, (const char *)buf + HZ_ARTIFACT_HEADER_BYTES,
                                      len - HZ_ARTIFACT_HEADER_BYTES, what, out);
}

/* ---------------------------------------------------------------------------------------------------
 * File I/O
 * ------------------------------------------------------------------------------------------------- */

/* Reads exactly n bytes at off; a short file is a format error naming where it ended. */
static int pread_full(int fd, void *dst, uint64_t n, uint64_t off, const char *what) {
    uint8_t *p = dst;
    while (n > 0) {
        size_t step = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t r = pread(fd, p, step, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return hz_error(HZ_EIO, "%s: read of %zu bytes at offset %llu failed: %s", what, step,
                            (unsigned long long)off, strerror(errno));
        }
        if (r == 0)
            return hz_error(HZ_EFORMAT, "%s: truncated: file ends at offset %llu, %llu more bytes "
                                        "expected",
                            what, (unsigned long long)off, (unsigned long long)n);
        p += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return HZ_OK;
}

int hz_artifact_read_meta(int fd, const char *what, hz_artifact **out) {
    *out = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) return hz_error(HZ_EIO, "%s: fstat failed: %s", what, strerror(errno));
    if (!S_ISREG(st.st_mode)) return hz_error(HZ_EIO, "%s: not a regular file", what);
    uint64_t size = (uint64_t)st.st_size;
    uint8_t *page = hz_calloc(1, HZ_ARTIFACT_HEADER_BYTES);
    if (!page) return HZ_ENOMEM;
    uint64_t n = size < HZ_ARTIFACT_HEADER_BYTES ? size : HZ_ARTIFACT_HEADER_BYTES;
    int rc = pread_full(fd, page, n, 0, what);
    hz_artifact_header h;
    if (!rc) rc = hz_artifact_header_parse(page, (size_t)n, what, &h);
    free(page);
    if (rc) return rc;
    if (size < h.file_bytes)
        return hz_error(HZ_EFORMAT, "%s: truncated: file is %llu bytes, the header declares %llu", what,
                        (unsigned long long)size, (unsigned long long)h.file_bytes);
    if (size > h.file_bytes)
        return hz_error(HZ_EFORMAT, "%s: file is %llu bytes, the header declares %llu (trailing data)",
                        what, (unsigned long long)size, (unsigned long long)h.file_bytes);
    char *m = hz_malloc((size_t)h.manifest_bytes);
    if (!m) return HZ_ENOMEM;
    rc = pread_full(fd, m, h.manifest_bytes, h.manifest_offset, what);
    if (!rc) rc = hz_artifact_parse_manifest(&h, m, (size_t)h.manifest_bytes, what, out);
    free(m);
    return rc;
}

/* One checksummed item of the data region, in file order. */
typedef struct load_item {
    uint64_t offset, bytes, xxh3;
    const char *tensor; /* NULL for a blob */
    uint64_t blob;
} load_item;

static int item_mismatch(const hz_artifact *art, const load_item *it, uint64_t got, const char *what) {
    if (it->tensor)
        return hz_error(HZ_EIDENTITY,
                        "%s: checksum mismatch in tensor '%s' (offset %llu, %llu bytes): xxh3 "
                        "%016llx, manifest says %016llx",
                        what, it->tensor, (unsigned long long)it->offset, (unsigned long long)it->bytes,
                        (unsigned long long)got, (unsigned long long)it->xxh3);
    return hz_error(HZ_EIDENTITY,
                    "%s: checksum mismatch in layer %llu expert %llu (offset %llu, %llu bytes): xxh3 "
                    "%016llx, manifest says %016llx",
                    what, (unsigned long long)(it->blob / art->cfg.experts),
                    (unsigned long long)(it->blob % art->cfg.experts), (unsigned long long)it->offset,
                    (unsigned long long)it->bytes, (unsigned long long)got,
                    (unsigned long long)it->xxh3);
}

int hz_artifact_load(int fd, const char *what, const hz_artifact *art, uint8_t *dst, uint32_t flags) {
    const hz_artifact_header *h = &art->header;
    const uint64_t chunk = 8u << 20; /* large enough to stream at disk speed, small enough for cache */
    uint8_t *scratch = NULL;
    if (!dst) {
        scratch = hz_malloc((size_t)chunk);
        if (!scratch) return HZ_ENOMEM;
    }
    uint64_t n_items = (uint64_t)art->n_tensors + art->n_blobs;
    load_item *items = hz_calloc((size_t)(n_items ? n_items : 1), sizeof *items);
    XXH3_state_t *id = XXH3_createState(), *is = XXH3_createState();
    int rc = HZ_OK;
    if (!items || !id || !is) {
        rc = hz_error(HZ_ENOMEM, "out of memory verifying %s", what);
        goto done;
    }
    /* tensors are sorted by offset and all precede the routed region */
    for (uint32_t i = 0; i < art->n_tensors; i++)
        items[i] = (load_item){art->tensors[i].offset, art->tensors[i].bytes, art->tensors[i].xxh3,
                               art->tensors[i].name, 0};
    for (uint64_t i = 0; i < art->n_blobs; i++)
        items[art->n_tensors + i] =
            (load_item){art->blobs[i].offset, art->blobs[i].bytes, art->blobs[i].xxh3, NULL, i};
    int check_items = !(flags & HZ_ARTIFACT_SKIP_ITEM_CHECKSUMS);

    XXH3_128bits_reset(id);
    uint64_t cur = 0; /* next item to finish */
    for (uint64_t pos = h->data_offset, end = h->data_offset + h->data_bytes; pos < end;) {
        uint64_t n = end - pos < chunk ? end - pos : chunk;
        uint8_t *buf = dst ? dst + (pos - h->data_offset) : scratch;
        if ((rc = pread_full(fd, buf, n, pos, what))) goto done;
        XXH3_128bits_update(id, buf, (size_t)n);
        /* feed the part of each item that falls in this chunk into the item hash */
        while (check_items && cur < n_items) {
            const load_item *it = &items[cur];
            uint64_t it_end = it->offset + it->bytes;
            if (it->offset >= pos + n) break;
            uint64_t a = it->offset > pos ? it->offset : pos;
            uint64_t b = it_end < pos + n ? it_end : pos + n;
            if (a == it->offset) XXH3_64bits_reset(is);
            if (b > a) XXH3_64bits_update(is, buf + (a - pos), (size_t)(b - a));
            if (it_end > pos + n) break; /* continues in the next chunk */
            uint64_t got = XXH3_64bits_digest(is);
            if (got != it->xxh3) {
                rc = item_mismatch(art, it, got, what);
                goto done;
            }
            cur++;
        }
        pos += n;
    }
    XXH3_128bits_update(id, art->manifest, (size_t)art->manifest_len);
    XXH128_hash_t ident = XXH3_128bits_digest(id);
    if (ident.high64 != h->identity_hi || ident.low64 != h->identity_lo) {
        rc = hz_error(HZ_EIDENTITY,
                      "%s: identity mismatch: content hashes to %016llx%016llx, header says "
                      "%016llx%016llx",
                      what, (unsigned long long)ident.high64, (unsigned long long)ident.low64,
                      (unsigned long long)h->identity_hi, (unsigned long long)h->identity_lo);
        goto done;
    }
done:
    XXH3_freeState(id);
    XXH3_freeState(is);
    free(items);
    free(scratch);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Source checkpoint identity
 * ------------------------------------------------------------------------------------------------- */

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int hz_source_identity(const hz_st_set *set, char out[HZ_IDENTITY_HEX_BYTES]) {
    uint32_t n = set->n_files;
    uint32_t *order = hz_calloc(n ? n : 1, sizeof *order);
    XXH3_state_t *st = XXH3_createState();
    uint8_t *hdr = NULL;
    int rc = HZ_OK;
    if (!order || !st) {
        rc = hz_error(HZ_ENOMEM, "out of memory hashing the checkpoint headers");
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    /* sort by base name (insertion sort: a checkpoint has a handful of shards) */
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && strcmp(base_name(set->paths[order[j - 1]]),
                                             base_name(set->paths[order[j]])) > 0;
             j--) {
            uint32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    XXH3_128bits_reset(st);
    for (uint32_t k = 0; k < n; k++) {
        const char *path = set->paths[order[k]];
        const char *bn = base_name(path);
        XXH3_128bits_update(st, bn, strlen(bn) + 1);
        uint8_t sz[8];
        put_u64(sz, set->file_sizes[order[k]]);
        XXH3_128bits_update(st, sz, 8);
        int fd;
        rc = hz_file_open_regular(path, &fd, NULL);
        if (rc) goto done;
        uint8_t len8[8];
        rc = pread_full(fd, len8, 8, 0, path);
        uint64_t hl = rc ? 0 : get_u64(len8);
        if (!rc && hl > HZ_ST_MAX_HEADER)
            rc = hz_error(HZ_EFORMAT, "%s: safetensors header length %llu over the bound", path,
                          (unsigned long long)hl);
        if (!rc) {
            free(hdr);
            hdr = hz_malloc((size_t)hl + 8);
            if (!hdr) rc = HZ_ENOMEM;
        }
        if (!rc) rc = pread_full(fd, hdr, hl + 8, 0, path);
        close(fd);
        if (rc) goto done;
        XXH3_128bits_update(st, hdr, (size_t)hl + 8);
    }
    XXH128_hash_t d = XXH3_128bits_digest(st);
    snprintf(out, HZ_IDENTITY_HEX_BYTES, "%016llx%016llx", (unsigned long long)d.high64,
             (unsigned long long)d.low64);
done:
    free(hdr);
    free(order);
    XXH3_freeState(st);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------------------------------- */

struct hz_artifact_writer {
    char *path;
    hz_outfile out; /* unnamed (or path.tmp.XXXXXX) until finish gives it path's name */
    hz_model_config cfg;
    hz_expert_layout layout;
    char source_dtype[8];
    char source_identity[HZ_IDENTITY_HEX_BYTES];
    uint64_t pos; /* absolute offset of the next byte */
    XXH3_state_t *id, *item;

    hz_tensor_spec *specs; /* sorted by name */
    uint32_t n_specs;
    uint8_t *spec_done;
    hz_artifact_tensor *tensors; /* in write order */
    uint32_t n_tensors;
    int in_tensor;
    uint64_t tensor_written;

    uint64_t blob_stride, n_blobs, next_blob, routed_offset;
    uint64_t *blob_xxh3;
};

static int write_all(hz_artifact_writer *w, const void *data, uint64_t n) {
    int rc = hz_outfile_write(&w->out, data, n);
    if (rc) return hz_error_prefix(rc, "artifact bytes from offset %llu", (unsigned long long)w->pos);
    w->pos += n;
    return HZ_OK;
}

/* Appends data-region bytes: they go into the identity hash as they are written. */
static int write_data(hz_artifact_writer *w, const void *data, uint64_t n) {
    XXH3_128bits_update(w->id, data, (size_t)n);
    return write_all(w, data, n);
}

static int pad_to(hz_artifact_writer *w, uint64_t align) {
    static const uint8_t zeros[4096];
    uint64_t target = hz_align_up(w->pos, align);
    while (w->pos < target) {
        uint64_t n = target - w->pos < sizeof zeros ? target - w->pos : sizeof zeros;
        int rc = write_data(w, zeros, n);
        if (rc) return rc;
    }
    return HZ_OK;
}

static void writer_free(hz_artifact_writer *w) {
    if (!w) return;
    hz_outfile_abort(&w->out); /* nothing left to discard once finish committed it */
    if (w->tensors) {
        for (uint32_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
        free(w->tensors);
    }
    XXH3_freeState(w->id);
    XXH3_freeState(w->item);
    free(w->specs);
    free(w->spec_done);
    free(w->blob_xxh3);
    free(w->path);
    free(w);
}

void hz_artifact_writer_abort(hz_artifact_writer *w) {
    writer_free(w); /* discards the output file: what was at w->path stays */
}

uint64_t hz_artifact_writer_bytes(const hz_artifact_writer *w) { return w ? w->pos : 0; }

int hz_artifact_writer_create(const char *path, const hz_model_config *cfg, const char *source_dtype,
                              const char *source_identity, hz_artifact_writer **out) {
    if (out) *out = NULL;
    if (!path || !cfg || !source_dtype || !source_identity || !out)
        return hz_error(HZ_EINVAL, "hz_artifact_writer_create: NULL argument");
    if (strcmp(source_dtype, "bf16") && strcmp(source_dtype, "f16") && strcmp(source_dtype, "f32"))
        return hz_error(HZ_EINVAL, "source dtype \"%s\" is not bf16, f16 or f32", source_dtype);
    if (!parse_hex(source_identity, 32, NULL))
        return hz_error(HZ_EINVAL, "source identity \"%s\" is not 32 lowercase hex digits",
                        source_identity);
    if (cfg->layers == 0 || cfg->experts == 0 || cfg->hidden == 0 || cfg->expert_inter == 0)
        return hz_error(HZ_EINVAL, "config has no routed experts");
    hz_artifact_writer *w = hz_calloc(1, sizeof *w);
    if (!w) return HZ_ENOMEM;
    w->cfg = *cfg;
    snprintf(w->source_dtype, sizeof w->source_dtype, "%s", source_dtype);
    snprintf(w->source_identity, sizeof w->source_identity, "%s", source_identity);
    hz_expert_layout_init(&w->layout, cfg->hidden, cfg->expert_inter);
    w->blob_stride = hz_align_up(w->layout.blob_bytes, HZ_ARTIFACT_ALIGN);
    w->n_blobs = (uint64_t)cfg->layers * cfg->experts;
    int rc = hz_arch_nonrouted_tensors(cfg, &w->specs, &w->n_specs);
    if (rc) {
        writer_free(w);
        return rc;
    }
    qsort(w->specs, w->n_specs, sizeof *w->specs, spec_cmp);
    w->spec_done = calloc(w->n_specs ? w->n_specs : 1, 1);
    w->tensors = calloc(w->n_specs ? w->n_specs : 1, sizeof *w->tensors);
    w->blob_xxh3 = calloc((size_t)w->n_blobs, sizeof *w->blob_xxh3);
    w->id = XXH3_createState();
    w->item = XXH3_createState();
    w->path = hz_strdup(path);
    if (!w->spec_done || !w->tensors || !w->blob_xxh3 || !w->id || !w->item || !w->path) {
        writer_free(w);
        return hz_error(HZ_ENOMEM, "out of memory creating the artifact writer");
    }
    rc = hz_outfile_create(path, &w->out); /* committed to path by finish */
    if (rc) {
        writer_free(w);
        return rc;
    }
    XXH3_128bits_reset(w->id);
    /* placeholder header page; the real one is written last, when every checksum is known */
    static const uint8_t zeros[HZ_ARTIFACT_HEADER_BYTES];
    rc = write_all(w, zeros, sizeof zeros);
    if (rc) {
        hz_artifact_writer_abort(w);
        return rc;
    }
    *out = w;
    return HZ_OK;
}

int hz_artifact_writer_begin_tensor(hz_artifact_writer *w, const char *name, uint32_t ndim,
                                    const uint64_t *shape) {
    if (!w || !name || (ndim && !shape)) return hz_error(HZ_EINVAL, "begin_tensor: NULL argument");
    if (w->in_tensor) return hz_error(HZ_EINVAL, "begin_tensor '%s': previous tensor not ended", name);
    if (w->next_blob > 0)
        return hz_error(HZ_EINVAL, "begin_tensor '%s': non-routed tensors must precede the experts",
                        name);
    const hz_tensor_spec *sp = bsearch(name, w->specs, w->n_specs, sizeof *w->specs, spec_key_cmp);
    if (!sp)
        return hz_error(HZ_EINVAL, "tensor '%s' is not a non-routed tensor of %s", name,
                        hz_arch_name(w->cfg.arch));
    size_t si = (size_t)(sp - w->specs);
    if (w->spec_done[si]) return hz_error(HZ_EINVAL, "tensor '%s' written twice", name);
    int same = ndim == sp->ndim;
    for (uint32_t d = 0; same && d < ndim; d++) same = shape[d] == sp->shape[d];
    if (!same) {
        char want[64];
        hz_shape_text(want, sizeof want, sp->ndim, sp->shape);
        return hz_error(HZ_EINVAL, "tensor '%s': shape does not match the config (%u dims, expected %s)",
                        name, ndim, want);
    }
    int rc = pad_to(w, HZ_ARTIFACT_ALIGN);
    if (rc) return rc;
    hz_artifact_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = hz_strdup(name);
    if (!t->name) return HZ_ENOMEM;
    t->ndim = ndim;
    t->numel = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->numel *= shape[d]; /* the spec's shape came from 32-bit config fields: no overflow */
    }
    t->bytes = t->numel * 2;
    t->offset = w->pos;
    w->spec_done[si] = 1;
    w->n_tensors++;
    w->in_tensor = 1;
    w->tensor_written = 0;
    XXH3_64bits_reset(w->item);
    return HZ_OK;
}

int hz_artifact_writer_write(hz_artifact_writer *w, const void *data, uint64_t bytes) {
    if (!w || (!data && bytes)) return hz_error(HZ_EINVAL, "artifact write: NULL argument");
    if (!w->in_tensor) return hz_error(HZ_EINVAL, "artifact write: no tensor begun");
    hz_artifact_tensor *t = &w->tensors[w->n_tensors - 1];
    if (bytes > t->bytes - w->tensor_written)
        return hz_error(HZ_EINVAL, "tensor '%s': %llu bytes written past its %llu bytes", t->name,
                        (unsigned long long)(w->tensor_written + bytes), (unsigned long long)t->bytes);
    XXH3_64bits_update(w->item, data, (size_t)bytes);
    w->tensor_written += bytes;
    return write_data(w, data, bytes);
}

int hz_artifact_writer_end_tensor(hz_artifact_writer *w) {
    if (!w || !w->in_tensor) return hz_error(HZ_EINVAL, "end_tensor: no tensor begun");
    hz_artifact_tensor *t = &w->tensors[w->n_tensors - 1];
    if (w->tensor_written != t->bytes)
        return hz_error(HZ_EINVAL, "tensor '%s': %llu of %llu bytes written", t->name,
                        (unsigned long long)w->tensor_written, (unsigned long long)t->bytes);
    t->xxh3 = XXH3_64bits_digest(w->item);
    w->in_tensor = 0;
    return HZ_OK;
}

int hz_artifact_writer_add_expert(hz_artifact_writer *w, uint32_t layer, uint32_t expert,
                                  const uint8_t *blob) {
    if (!w || !blob) return hz_error(HZ_EINVAL, "add_expert: NULL argument");
    if (w->in_tensor) return hz_error(HZ_EINVAL, "add_expert: a tensor is still open");
    if (w->next_blob >= w->n_blobs || layer != w->next_blob / w->cfg.experts ||
        expert != w->next_blob % w->cfg.experts)
        return hz_error(HZ_EINVAL, "add_expert: layer %u expert %u out of layer-major order", layer,
                        expert);
    int rc;
    if (w->next_blob == 0) {
        if ((rc = pad_to(w, HZ_ARTIFACT_ALIGN))) return rc;
        w->routed_offset = w->pos;
    }
    w->blob_xxh3[w->next_blob] = XXH3_64bits(blob, (size_t)w->layout.blob_bytes);
    if ((rc = write_data(w, blob, w->layout.blob_bytes))) return rc;
    if ((rc = pad_to(w, HZ_ARTIFACT_ALIGN))) return rc;
    w->next_blob++;
    return HZ_OK;
}

void hz_json_precision(cJSON *root, const char *source_dtype, int *ok) {
    cJSON *p = hz_json_obj(root, "precision", ok);
    hz_json_str(p, "source_dtype", source_dtype, ok);
    hz_json_str(p, "routed", "int4", ok);
    hz_json_u64(p, "block", HZ_QBLOCK, ok);
    hz_json_str(p, "scale_dtype", "f16", ok);
    hz_json_str(p, "activation", "f16", ok);
    hz_json_str(p, "non_routed", "f16", ok);
}

static char *build_manifest(const hz_artifact_writer *w, uint64_t data_offset, uint64_t data_end) {
    int ok = 1;
    cJSON *root = cJSON_CreateObject(); /* NULL: every add below fails, hz_json_finish reports it */
    hz_json_str(root, "format", HZ_ARTIFACT_FORMAT_NAME, &ok);
    hz_json_u64(root, "format_version", HZ_ARTIFACT_VERSION, &ok);
    hz_json_str(root, "architecture", hz_arch_name(w->cfg.arch), &ok);
    char *cfg_text = hz_hfconfig_to_json(&w->cfg);
    hz_json_add(root, "config", cfg_text ? cJSON_Parse(cfg_text) : NULL, &ok);
    free(cfg_text);
    hz_json_precision(root, w->source_dtype, &ok);
    cJSON *s = hz_json_obj(root, "source", &ok);
    hz_json_str(s, "identity", w->source_identity, &ok);
    hz_json_str(s, "definition",
                "xxh3-128 over the safetensors files sorted by name: name, NUL, u64le "
                "size, length prefix and JSON header", &ok);
    hz_json_u64(root, "data_offset", data_offset, &ok);
    hz_json_u64(root, "data_bytes", data_end - data_offset, &ok);
    cJSON *ts = hz_json_arr(root, "tensors", &ok);
    for (uint32_t i = 0; i < w->n_tensors; i++) {
        const hz_artifact_tensor *t = &w->tensors[i];
        cJSON *o = hz_json_push(ts, cJSON_CreateObject(), &ok);
        hz_json_str(o, "name", t->name, &ok);
        cJSON *sh = hz_json_arr(o, "shape", &ok);
        for (uint32_t d = 0; d < t->ndim; d++) hz_json_push(sh, cJSON_CreateNumber((double)t->shape[d]), &ok);
        hz_json_str(o, "dtype", "f16", &ok);
        hz_json_u64(o, "offset", t->offset, &ok);
        hz_json_u64(o, "bytes", t->bytes, &ok);
        char hx[17];
        xxh3_hex(t->xxh3, hx);
        hz_json_str(o, "xxh3", hx, &ok);
    }
    cJSON *ex = hz_json_obj(root, "experts", &ok);
    hz_json_u64(ex, "layers", w->cfg.layers, &ok);
    hz_json_u64(ex, "experts_per_layer", w->cfg.experts, &ok);
    cJSON *lo = hz_json_obj(ex, "layout", &ok);
    const hz_expert_layout *L = &w->layout;
    hz_json_u64(lo, "hidden", L->hidden, &ok);
    hz_json_u64(lo, "inter", L->inter, &ok);
    hz_json_u64(lo, "part_align", HZ_BLOB_PART_ALIGN, &ok);
    hz_json_u64(lo, "gate_q", L->gate_q, &ok);
    hz_json_u64(lo, "gate_s", L->gate_s, &ok);
    hz_json_u64(lo, "up_q", L->up_q, &ok);
    hz_json_u64(lo, "up_s", L->up_s, &ok);
    hz_json_u64(lo, "down_q", L->down_q, &ok);
    hz_json_u64(lo, "down_s", L->down_s, &ok);
    hz_json_u64(lo, "blob_bytes", L->blob_bytes, &ok);
    hz_json_u64(ex, "region_offset", w->routed_offset, &ok);
    hz_json_u64(ex, "region_bytes", w->n_blobs * w->blob_stride, &ok);
    hz_json_u64(ex, "blob_stride", w->blob_stride, &ok);
    cJSON *bl = hz_json_arr(ex, "blobs", &ok);
    for (uint64_t i = 0; i < w->n_blobs; i++) {
        cJSON *o = hz_json_push(bl, cJSON_CreateObject(), &ok);
        hz_json_u64(o, "layer", i / w->cfg.experts, &ok);
        hz_json_u64(o, "expert", i % w->cfg.experts, &ok);
        hz_json_u64(o, "offset", w->routed_offset + i * w->blob_stride, &ok);
        hz_json_u64(o, "bytes", L->blob_bytes, &ok);
        char hx[17];
        xxh3_hex(w->blob_xxh3[i], hx);
        hz_json_str(o, "xxh3", hx, &ok);
    }
    return hz_json_finish(root, ok, 0); /* malloc'd: the caller frees with free() */
}

int hz_artifact_writer_finish(hz_artifact_writer *w, char identity[HZ_IDENTITY_HEX_BYTES]) {
    hz_outfile done = {.fd = -1};
    int rc = hz_artifact_writer_finish_pending(w, identity, &done);
    return rc ? rc : hz_outfile_commit(&done);
}

int hz_artifact_writer_finish_pending(hz_artifact_writer *w, char identity[HZ_IDENTITY_HEX_BYTES],
                                      hz_outfile *out) {
    *out = (hz_outfile){.fd = -1};
    if (!w) return hz_error(HZ_EINVAL, "writer_finish: NULL writer");
    int rc = HZ_OK;
    char *manifest = NULL;
    if (w->in_tensor) {
        rc = hz_error(HZ_EINVAL, "writer_finish: tensor '%s' not ended", w->tensors[w->n_tensors - 1].name);
        goto fail;
    }
    for (uint32_t i = 0; i < w->n_specs; i++)
        if (!w->spec_done[i]) {
            rc = hz_error(HZ_EINVAL, "writer_finish: tensor '%s' was never written", w->specs[i].name);
            goto fail;
        }
    if (w->next_blob != w->n_blobs) {
        rc = hz_error(HZ_EINVAL, "writer_finish: %llu of %llu expert blobs written",
                      (unsigned long long)w->next_blob, (unsigned long long)w->n_blobs);
        goto fail;
    }
    uint64_t data_end = w->pos; /* every blob ends on a 4096 boundary */
    manifest = build_manifest(w, HZ_ARTIFACT_HEADER_BYTES, data_end);
    if (!manifest) {
        rc = hz_error(HZ_ENOMEM, "out of memory building the manifest");
        goto fail;
    }
    uint64_t mlen = strlen(manifest);
    XXH3_128bits_update(w->id, manifest, (size_t)mlen);
    if ((rc = write_all(w, manifest, mlen))) goto fail;
    XXH128_hash_t ident = XXH3_128bits_digest(w->id);
    hz_artifact_header h = {
        .version = HZ_ARTIFACT_VERSION,
        .header_bytes = HZ_ARTIFACT_HEADER_BYTES,
        .data_offset = HZ_ARTIFACT_HEADER_BYTES,
        .data_bytes = data_end - HZ_ARTIFACT_HEADER_BYTES,
        .manifest_offset = data_end,
        .manifest_bytes = mlen,
        .manifest_xxh3 = XXH3_64bits(manifest, (size_t)mlen),
        .identity_hi = ident.high64,
        .identity_lo = ident.low64,
        .file_bytes = data_end + mlen,
    };
    uint8_t page[HZ_ARTIFACT_HEADER_BYTES];
    hz_artifact_header_write(&h, page);
    for (uint64_t done = 0; done < sizeof page;) {
        ssize_t r = pwrite(w->out.fd, page + done, sizeof page - done, (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = hz_error(HZ_EIO, "%s: writing the header failed: %s", hz_outfile_name(&w->out),
                          strerror(errno));
            goto fail;
        }
        done += (uint64_t)r;
    }
    if ((rc = hz_outfile_sync(&w->out))) goto fail;
    *out = w->out; /* the caller commits it (the file is complete and synced) */
    w->out = (hz_outfile){.fd = -1};
    if (identity) hz_artifact_identity_hex(&h, identity);
    free(manifest);
    writer_free(w);
    return HZ_OK;
fail:
    free(manifest);
    hz_artifact_writer_abort(w);
    return rc;
}
