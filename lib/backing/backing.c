/* lib/backing: the immutable host backing (DESIGN.md 4.2).
 *
 * A backing owns one page-aligned anonymous mapping that holds the artifact's data region (non-routed
 * FP16 tensors, then the contiguous routed-expert region). Everything is validated and copied before
 * the backing is handed out; afterwards the mapping is read-only, so an accidental write by the host
 * faults at once instead of silently diverging from the copies already on the device. */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backing/backing.h"
#include "core/json.h"
#include "format/artifact.h"

struct hz_host_backing {
    hz_model_config cfg;
    hz_expert_layout layout;
    char identity[HZ_IDENTITY_HEX_BYTES];
    char source_dtype[8];
    char source_identity[HZ_IDENTITY_HEX_BYTES];
    int synthetic;

    uint8_t *map;      /* the whole anonymous mapping (munmap'd on close) */
    size_t map_bytes;
    const uint8_t *data; /* first byte of the data region copy */
    uint64_t data_bytes;
    const uint8_t *routed; /* first byte of the routed region, page aligned */
    uint64_t routed_bytes;
    uint64_t stride; /* distance between consecutive (layer, expert) blobs */
    uint64_t n_blobs;

    uint32_t n_tensors;
    hz_backing_tensor *tensors; /* sorted by name for bsearch */

    uint64_t file_bytes;
    double load_seconds;
    atomic_uint children;
};

HZ_EXPORT void hz_backing_options_init_sized(hz_backing_options *opts, size_t size) {
    hz_backing_options d;
    memset(&d, 0, sizeof d);
    hz_options_fill(opts, size, &d, sizeof d);
}

/* The compatibility entry point for programs built before hz_backing_options_init became a macro
 * (horizon.h; the parentheses keep the macro from applying): fills sizeof as this library knows it,
 * which is the size in those programs' headers (0.1.0). Should the struct grow, this must keep filling
 * the 0.1.0 size (doc/abi.md; tests/unit/core/test_options.c pins it). */
HZ_EXPORT void (hz_backing_options_init)(hz_backing_options *opts) {
    hz_backing_options_init_sized(opts, sizeof *opts);
}

/* ---------------------------------------------------------------------------------------------------
 * Mapping helpers
 * ------------------------------------------------------------------------------------------------- */

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096u;
}

/* Reserves an anonymous mapping big enough for `bytes` plus slack so that the byte at offset
 * `aligned_rel` from the returned base falls on a system page boundary. The artifact aligns to 4096,
 * but on systems with larger pages (64 KiB on some arm64 kernels) the routed region must still start
 * a page for mprotect to cover exactly it. */
static int map_region(uint64_t bytes, uint64_t aligned_rel, uint8_t **out_map, size_t *out_map_bytes,
                      uint8_t **out_base) {
    size_t ps = page_size();
    uint64_t total;
    if (!hz_add_ok(bytes, ps, &total) || total > (uint64_t)SIZE_MAX)
        return hz_error(HZ_ENOMEM, "backing of %llu bytes does not fit the address space",
                        (unsigned long long)bytes);
    total = hz_align_up(total, ps);
    void *m = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return hz_error(HZ_ENOMEM, "mmap of %llu bytes for the host backing failed: %s",
                        (unsigned long long)total, strerror(errno));
    uint64_t shift = (ps - (aligned_rel % ps)) % ps;
    *out_map = m;
    *out_map_bytes = (size_t)total;
    *out_base = (uint8_t *)m + shift;
    return HZ_OK;
}

/* Deterministic byte stream for synthetic blobs: splitmix64 is tiny, fast and has no state beyond a
 * counter, so the same (seed, layer, expert) always yields the same blob. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void backing_free(hz_host_backing *b) {
    if (!b) return;
    if (b->map) munmap(b->map, b->map_bytes);
    if (b->tensors) {
        for (uint32_t i = 0; i < b->n_tensors; i++) free((char *)b->tensors[i].name);
        free(b->tensors);
    }
    free(b);
}

/* Makes [start, start + bytes) read-only; start is page aligned by construction. */
static int protect_readonly(const uint8_t *start, uint64_t bytes, const char *what) {
    if (bytes == 0) return HZ_OK;
    if (mprotect((void *)start, (size_t)bytes, PROT_READ) != 0)
        return hz_error(HZ_ENOMEM, "mprotect(PROT_READ) of the %s (%llu bytes) failed: %s", what,
                        (unsigned long long)bytes, strerror(errno));
    return HZ_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Synthetic backing (tests)
 * ------------------------------------------------------------------------------------------------- */

int hz_backing_create_synthetic(const hz_model_config *cfg, uint64_t seed, hz_host_backing **out) {
    if (out) *out = NULL;
    if (!cfg || !out) return hz_error(HZ_EINVAL, "hz_backing_create_synthetic: NULL argument");
    if (cfg->layers == 0 || cfg->experts == 0 || cfg->hidden == 0 || cfg->expert_inter == 0)
        return hz_error(HZ_EINVAL,
                        "hz_backing_create_synthetic: config has zero layers, experts, hidden or "
                        "expert width");
    hz_host_backing *b = hz_calloc(1, sizeof *b);
    if (!b) return HZ_ENOMEM;
    b->cfg = *cfg;
    b->synthetic = 1;
    atomic_init(&b->children, 0u);
    hz_expert_layout_init(&b->layout, cfg->hidden, cfg->expert_inter);
    snprintf(b->source_dtype, sizeof b->source_dtype, "%s", "bf16");
    b->stride = hz_align_up(b->layout.blob_bytes, HZ_ARTIFACT_ALIGN);
    b->n_blobs = (uint64_t)cfg->layers * cfg->experts;
    uint64_t bytes;
    if (!hz_mul_ok(b->n_blobs, b->stride, &bytes)) {
        int rc = hz_error(HZ_ENOMEM, "synthetic backing: %llu blobs of %llu bytes overflow",
                          (unsigned long long)b->n_blobs, (unsigned long long)b->stride);
        backing_free(b);
        return rc;
    }
    uint8_t *base = NULL;
    int rc = map_region(bytes, 0, &b->map, &b->map_bytes, &base);
    if (rc) {
        free(b);
        return rc;
    }
    b->data = base;
    b->data_bytes = bytes;
    b->routed = base;
    b->routed_bytes = bytes;
    b->file_bytes = 0;

    double t0 = hz_now_seconds();
    for (uint64_t i = 0; i < b->n_blobs; i++) {
        uint8_t *blob = base + i * b->stride;
        /* seed each blob independently so a blob's bytes do not depend on the layout of others */
        uint64_t st = seed ^ (0x5851f42d4c957f2dull * (i + 1));
        uint64_t n = b->layout.blob_bytes;
        uint64_t j = 0;
        for (; j + 8 <= n; j += 8) {
            uint64_t r = splitmix64(&st);
            memcpy(blob + j, &r, 8);
        }
        if (j < n) {
            uint64_t r = splitmix64(&st);
            memcpy(blob + j, &r, (size_t)(n - j));
        }
    }
    b->load_seconds = hz_now_seconds() - t0;

    /* an identity derived from the seed and shape, so two synthetic backings compare as expected */
    uint64_t st = seed ^ ((uint64_t)cfg->layers << 32 | cfg->experts);
    uint64_t hi = splitmix64(&st), lo = splitmix64(&st) ^ b->layout.blob_bytes;
    snprintf(b->identity, sizeof b->identity, "%016llx%016llx", (unsigned long long)hi,
             (unsigned long long)lo);
    snprintf(b->source_identity, sizeof b->source_identity, "%s", "synthetic");

    rc = protect_readonly(b->routed, b->routed_bytes, "synthetic routed region");
    if (rc) {
        backing_free(b);
        return rc;
    }
    *out = b;
    return HZ_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Accessors
 * ------------------------------------------------------------------------------------------------- */

const hz_model_config *hz_backing_config(const hz_host_backing *b) { return b ? &b->cfg : NULL; }

const hz_expert_layout *hz_backing_expert_layout(const hz_host_backing *b) {
    return b ? &b->layout : NULL;
}

const uint8_t *hz_backing_expert_blob(const hz_host_backing *b, uint32_t layer, uint32_t expert) {
    if (!b || layer >= b->cfg.layers || expert >= b->cfg.experts) return NULL;
    return b->routed + ((uint64_t)layer * b->cfg.experts + expert) * b->stride;
}

static int tensor_cmp(const void *key, const void *elem) {
    return strcmp((const char *)key, ((const hz_backing_tensor *)elem)->name);
}

const hz_backing_tensor *hz_backing_find_tensor(const hz_host_backing *b, const char *name) {
    if (!b || !name || b->n_tensors == 0) return NULL;
    return bsearch(name, b->tensors, b->n_tensors, sizeof *b->tensors, tensor_cmp);
}

const uint8_t *hz_backing_routed_region(const hz_host_backing *b, uint64_t *out_bytes) {
    if (out_bytes) *out_bytes = b ? b->routed_bytes : 0;
    return b ? b->routed : NULL;
}

const char *hz_backing_source_dtype(const hz_host_backing *b) { return b ? b->source_dtype : NULL; }

void hz_backing_child_add(hz_host_backing *b) {
    if (b) atomic_fetch_add_explicit(&b->children, 1u, memory_order_acq_rel);
}

void hz_backing_child_remove(hz_host_backing *b) {
    if (b) atomic_fetch_sub_explicit(&b->children, 1u, memory_order_acq_rel);
}

/* ---------------------------------------------------------------------------------------------------
 * Public calls
 * ------------------------------------------------------------------------------------------------- */

int hz_host_backing_close(hz_host_backing *backing) {
    if (!backing) return HZ_OK;
    unsigned n = atomic_load_explicit(&backing->children, memory_order_acquire);
    if (n != 0)
        return hz_error(HZ_EBUSY, "host backing %s still has %u cache(s)/model(s) created on it",
                        backing->identity, n);
    backing_free(backing);
    return HZ_OK;
}

const char *hz_host_backing_identity(const hz_host_backing *backing) {
    return backing ? backing->identity : NULL;
}

static int tensor_sort_cmp(const void *a, const void *b) {
    return strcmp(((const hz_backing_tensor *)a)->name, ((const hz_backing_tensor *)b)->name);
}

int hz_host_backing_open(const char *path, const hz_backing_options *opts, hz_host_backing **out) {
    if (out) *out = NULL;
    if (!path || !out) return hz_error(HZ_EINVAL, "hz_host_backing_open: NULL argument");
    uint32_t flags = 0;
    if (opts) {
        /* read only the fields this library knows and the caller's struct has */
        if (opts->struct_size >= offsetof(hz_backing_options, flags) + sizeof opts->flags)
            flags = opts->flags;
    }
    double t0 = hz_now_seconds();
    int fd;
    int rc0 = hz_file_open_regular(path, &fd, NULL);
    if (rc0) return rc0;

    hz_artifact *art = NULL;
    int rc = hz_artifact_read_meta(fd, path, &art);
    if (rc) {
        close(fd);
        return rc;
    }

    hz_host_backing *b = hz_calloc(1, sizeof *b);
    if (!b) {
        close(fd);
        hz_artifact_free(art);
        return HZ_ENOMEM;
    }
    atomic_init(&b->children, 0u);
    b->cfg = art->cfg;
    b->layout = art->layout;
    snprintf(b->source_dtype, sizeof b->source_dtype, "%s", art->source_dtype);
    snprintf(b->source_identity, sizeof b->source_identity, "%s", art->source_identity);
    b->stride = art->blob_stride;
    b->n_blobs = art->n_blobs;
    b->data_bytes = art->header.data_bytes;
    b->routed_bytes = art->routed_bytes;
    b->file_bytes = art->header.file_bytes;

    uint64_t routed_rel = art->routed_offset - art->header.data_offset;
    uint8_t *base = NULL;
    rc = map_region(b->data_bytes, routed_rel, &b->map, &b->map_bytes, &base);
    if (rc) goto fail;
    b->data = base;
    b->routed = base + routed_rel;

    /* copy + hash in one pass; pread writes every byte, so every page is touched before admission */
    rc = hz_artifact_load(fd, path, art, base,
                          (flags & HZ_BACKING_SKIP_CHECKSUMS) ? HZ_ARTIFACT_SKIP_ITEM_CHECKSUMS : 0u);
    if (rc) goto fail;
    close(fd);
    fd = -1;
    hz_artifact_identity_hex(&art->header, b->identity);

    /* non-routed tensors point into the copy */
    b->n_tensors = art->n_tensors;
    b->tensors = hz_calloc(art->n_tensors ? art->n_tensors : 1, sizeof *b->tensors);
    if (!b->tensors) {
        rc = HZ_ENOMEM;
        goto fail;
    }
    for (uint32_t i = 0; i < art->n_tensors; i++) {
        const hz_artifact_tensor *t = &art->tensors[i];
        hz_backing_tensor *bt = &b->tensors[i];
        bt->name = hz_strdup(t->name);
        if (!bt->name) {
            rc = HZ_ENOMEM;
            goto fail;
        }
        bt->ndim = t->ndim;
        memcpy(bt->shape, t->shape, sizeof bt->shape);
        bt->numel = t->numel;
        bt->data = (const hz_f16 *)(base + (t->offset - art->header.data_offset));
    }
    qsort(b->tensors, b->n_tensors, sizeof *b->tensors, tensor_sort_cmp);

    /* The routed region must never change after admission; the non-routed tensors are read-only
     * as well, since nothing in the library has a reason to write them. */
    rc = protect_readonly(b->routed, b->routed_bytes, "routed-expert region");
    if (rc) goto fail;
    if (b->routed > b->map) {
        /* from the mapping's first page up to the routed region's (page-aligned) start */
        rc = protect_readonly(b->map, (uint64_t)(b->routed - b->map), "non-routed region");
        if (rc) goto fail;
    }
    hz_artifact_free(art);
    b->load_seconds = hz_now_seconds() - t0;
    *out = b;
    return HZ_OK;

fail:
    if (fd >= 0) close(fd);
    hz_artifact_free(art);
    backing_free(b);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * describe
 * ------------------------------------------------------------------------------------------------- */

int hz_host_backing_describe_json(const hz_host_backing *backing, char **out) {
    if (out) *out = NULL;
    if (!backing || !out) return hz_error(HZ_EINVAL, "hz_host_backing_describe_json: NULL argument");
    const hz_host_backing *b = backing;
    int ok = 1;
    cJSON *root = cJSON_CreateObject(); /* NULL: every add below fails, hz_json_finish reports it */
    hz_json_str(root, "identity", b->identity, &ok);
    hz_json_str(root, "architecture", hz_arch_name(b->cfg.arch), &ok);
    hz_json_bool(root, "synthetic", b->synthetic, &ok);

    cJSON *c = hz_json_obj(root, "config", &ok);
    hz_json_u64(c, "hidden_size", b->cfg.hidden, &ok);
    hz_json_u64(c, "num_hidden_layers", b->cfg.layers, &ok);
    hz_json_u64(c, "num_attention_heads", b->cfg.heads, &ok);
    hz_json_u64(c, "num_key_value_heads", b->cfg.kv_heads, &ok);
    hz_json_u64(c, "head_dim", b->cfg.head_dim, &ok);
    hz_json_u64(c, "vocab_size", b->cfg.vocab, &ok);
    hz_json_u64(c, "num_experts", b->cfg.experts, &ok);
    hz_json_u64(c, "num_experts_per_tok", b->cfg.top_k, &ok);
    hz_json_u64(c, "expert_intermediate_size", b->cfg.expert_inter, &ok);
    hz_json_u64(c, "shared_expert_intermediate_size", b->cfg.shared_inter, &ok);
    hz_json_u64(c, "max_position_embeddings", b->cfg.max_pos, &ok);

    hz_json_precision(root, b->source_dtype, &ok);
    hz_json_str(root, "source_identity", b->source_identity, &ok);
    hz_json_u64(root, "layers", b->cfg.layers, &ok);
    hz_json_u64(root, "experts", b->cfg.experts, &ok);
    hz_json_u64(root, "blob_bytes", b->layout.blob_bytes, &ok);
    hz_json_u64(root, "blob_stride", b->stride, &ok);
    hz_json_u64(root, "non_routed_tensors", b->n_tensors, &ok);
    hz_json_u64(root, "total_bytes", b->data_bytes, &ok);
    hz_json_u64(root, "routed_bytes", b->routed_bytes, &ok);
    hz_json_u64(root, "file_bytes", b->file_bytes, &ok);
    hz_json_num(root, "load_seconds", b->load_seconds, &ok);
    hz_json_str(root, "routed_region_protection", "read-only", &ok);
    hz_json_num(root, "children",
                (double)atomic_load_explicit(&((hz_host_backing *)b)->children, memory_order_acquire), &ok);
    /* a malloc'd string: callers free with hz_free (free) */
    *out = hz_json_finish(root, ok, 0);
    return *out ? HZ_OK : hz_error(HZ_ENOMEM, "hz_host_backing_describe_json: out of memory");
}
