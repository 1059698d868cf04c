/* hz-mkmodel: writes a random-weight Hugging Face checkpoint directory (config.json + BF16 safetensors
 * with the real tensor names, sharded when large) for the supported architectures.
 *
 * Every value is a pure function of (seed, tensor name, element index), so the output does not depend
 * on chunking or sharding, and tensors are generated chunk by chunk while they are written: the
 * full-size presets need a few MiB of memory, not the size of the model. */
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/core.h"
#include "core/fp16.h"
#include "format/artifact.h"
#include "format/hfconfig.h"
#include "format/safetensors.h"

/* Shards hold at most this many bytes by default (the "2GB" of transformers' save_pretrained
 * max_shard_size); --shard-bytes lowers it so tests can exercise sharding with a tiny model. */
#define SHARD_LIMIT 2000000000ull
#define MAX_SHARDS 512u /* open at once while the checkpoint is written: well under the usual 1,024 files */
#define CHUNK_VALUES (1u << 20)

typedef enum init_kind { INIT_LINEAR, INIT_NORM, INIT_BIAS } init_kind;

#define INIT_STD 0.02f /* transformers' initializer_range */

typedef struct gen_tensor {
    char name[HZ_TENSOR_NAME_MAX];
    uint32_t ndim;
    uint64_t shape[2];
    uint64_t numel;
    init_kind kind;
    float std; /* INIT_LINEAR: the standard deviation (INIT_STD; --embed-std for the embedding) */
    uint32_t shard;
} gen_tensor;

typedef struct gen_list {
    gen_tensor *v;
    uint32_t n, cap;
} gen_list;

static void usage(FILE *f) {
    fprintf(f,
            "usage: hz-mkmodel --arch olmoe|qwen2moe --preset tiny|olmoe-1b-7b|qwen1.5-moe-a2.7b\n"
            "                  [--seed N] [--shard-bytes N] [--layers N] [--embed-std X] OUT_DIR\n"
            "Writes a random-weight Hugging Face checkpoint (config.json + BF16 safetensors).\n"
            "--layers overrides the preset's layer count (full-width shapes with few layers, for benchmarks).\n"
            "--embed-std sets the embedding's standard deviation (default 0.02, as every other matrix). With\n"
            "  0.02 the hidden states of all positions grow alike through the layers, so most tokens pick the\n"
            "  same experts; with about 1 each token's own embedding dominates and its experts follow its id\n"
            "  (benchmarks of partial residency with spread routing).\n");
}

static int die(int status, const char *what) {
    fprintf(stderr, "hz-mkmodel: %s: %s%s%s\n", hz_status_name(status), what ? what : "",
            what && *hz_last_error_message() ? ": " : "", hz_last_error_message());
    return 1;
}

static int push(gen_list *l, const char *name, uint32_t ndim, uint64_t d0, uint64_t d1) {
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 256;
        gen_tensor *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return hz_error(HZ_ENOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    gen_tensor *t = &l->v[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->numel = ndim == 2 ? d0 * d1 : d0;
    size_t len = strlen(name);
    if (len >= 5 && strcmp(name + len - 5, ".bias") == 0) t->kind = INIT_BIAS;
    else if (len >= 11 && strcmp(name + len - 11, "norm.weight") == 0) t->kind = INIT_NORM;
    else t->kind = INIT_LINEAR;
    t->std = INIT_STD;
    return HZ_OK;
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An approximately standard normal value: the sum of four 16-bit uniforms (Irwin-Hall), centred and
 * scaled to unit variance. Bounded to +-3.46 sigma, which suits random initial weights. */
static float normalish(uint64_t tensor_seed, uint64_t i) {
    uint64_t z = mix64(tensor_seed + (i + 1) * 0x9e3779b97f4a7c15ull);
    double s = (double)(z & 0xffff) + (double)((z >> 16) & 0xffff) + (double)((z >> 32) & 0xffff) +
               (double)(z >> 48);
    return (float)((s - 131070.0) / 37837.23);
}

static float init_value(const gen_tensor *t, uint64_t seed, uint64_t i) {
    float n = normalish(seed, i);
    switch (t->kind) {
    case INIT_NORM:
        return 1.0f + 0.05f * n;
    case INIT_BIAS:
        return 0.02f * n;
    default:
        return t->std * n;
    }
}

static int mkdir_p(const char *dir) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return hz_error(HZ_EINVAL, "path too long: %s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return hz_error(HZ_EIO, "mkdir %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return hz_error(HZ_EIO, "mkdir %s: %s", buf, strerror(errno));
    return HZ_OK;
}

/* `text` and a newline into a complete, synced file for `path` that is not yet renamed into place
 * (*pending: committed by the caller once every file of the checkpoint is complete). */
static int write_text(const char *path, const char *text, hz_outfile *pending) {
    int rc = hz_outfile_create(path, pending);
    if (!rc) rc = hz_outfile_write(pending, text, strlen(text));
    if (!rc) rc = hz_outfile_write(pending, "\n", 1);
    if (!rc) rc = hz_outfile_sync(pending);
    if (rc) hz_outfile_abort(pending);
    return rc;
}

/* Removes the checkpoint files of an earlier run in `dir` that this run did not write (a single file
 * where shards were written now, or shards of another count, or an index), so that the directory holds
 * one checkpoint: a reader would otherwise find the stale index or shards. Only names this tool makes. */
static int remove_stale(const char *dir, uint32_t n_shards) {
    DIR *d = opendir(dir);
    if (!d) return hz_error(HZ_EIO, "%s: cannot list: %s", dir, strerror(errno));
    int rc = HZ_OK;
    for (struct dirent *e; rc == HZ_OK && (e = readdir(d));) {
        unsigned a, b;
        int off = 0;
        const char *n = e->d_name;
        int stale = 0;
        if (!strcmp(n, "model.safetensors")) stale = n_shards > 1;
        else if (!strcmp(n, "model.safetensors.index.json")) stale = n_shards == 1;
        else if (sscanf(n, "model-%5u-of-%5u.safetensors%n", &a, &b, &off) == 2 && off == (int)strlen(n))
            stale = n_shards == 1 || b != n_shards;
        if (!stale) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (unlink(path) != 0) rc = hz_error(HZ_EIO, "%s: cannot remove the earlier checkpoint's file: %s", path,
                                             strerror(errno));
    }
    closedir(d);
    return rc;
}

static void shard_name(char *out, size_t cap, uint32_t shard, uint32_t n_shards) {
    if (n_shards == 1) snprintf(out, cap, "model.safetensors");
    else snprintf(out, cap, "model-%05u-of-%05u.safetensors", shard + 1, n_shards);
}

static int write_shard(const char *dir, const gen_list *l, uint32_t shard, uint32_t n_shards,
                       uint64_t seed, uint16_t *buf, hz_outfile *pending) {
    char name[64], path[4096];
    shard_name(name, sizeof name, shard, n_shards);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint32_t n = 0;
    for (uint32_t i = 0; i < l->n; i++) n += l->v[i].shard == shard;
    hz_st_decl *decls = calloc(n ? n : 1, sizeof *decls);
    if (!decls) return hz_error(HZ_ENOMEM, "out of memory");
    uint32_t k = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        const gen_tensor *t = &l->v[i];
        if (t->shard != shard) continue;
        decls[k].name = t->name;
        decls[k].dtype = HZ_DTYPE_BF16;
        decls[k].ndim = t->ndim;
        decls[k].shape[0] = t->shape[0];
        decls[k].shape[1] = t->shape[1];
        k++;
    }
    hz_st_writer *w = NULL;
    int rc = hz_st_writer_create(path, decls, n, &w);
    free(decls);
    if (rc) return rc; /* the writer's messages name the path */
    for (uint32_t i = 0; i < l->n && !rc; i++) {
        const gen_tensor *t = &l->v[i];
        if (t->shard != shard) continue;
        uint64_t tseed = seed ^ XXH3_64bits(t->name, strlen(t->name));
        for (uint64_t at = 0; at < t->numel && !rc;) {
            uint64_t m = t->numel - at < CHUNK_VALUES ? t->numel - at : CHUNK_VALUES;
            for (uint64_t j = 0; j < m; j++) buf[j] = hz_f32_to_bf16(init_value(t, tseed, at + j));
            rc = hz_st_writer_write(w, buf, m * 2);
            at += m;
        }
    }
    if (rc) {
        hz_st_writer_abort(w);
        return rc;
    }
    rc = hz_st_writer_finish_pending(w, pending);
    if (rc) return rc;
    if (isatty(2)) fprintf(stderr, "hz-mkmodel: wrote %s\n", path);
    return HZ_OK;
}

static int write_index(const char *dir, const gen_list *l, uint32_t n_shards, uint64_t total, hz_outfile *pending) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    for (uint32_t i = 0; i < l->n; i++) {
        char name[64];
        shard_name(name, sizeof name, l->v[i].shard, n_shards);
        cJSON_AddStringToObject(map, l->v[i].name, name);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return hz_error(HZ_ENOMEM, "out of memory");
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    int rc = write_text(path, text, pending);
    cJSON_free(text);
    return rc;
}

int main(int argc, char **argv) {
    const char *arch_s = NULL, *preset = NULL;
    uint64_t seed = 0, shard_limit = SHARD_LIMIT;
    uint32_t layers = 0; /* 0: the preset's */
    float embed_std = INIT_STD;
    static const struct option opts[] = {{"arch", required_argument, NULL, 'a'},
                                         {"preset", required_argument, NULL, 'p'},
                                         {"seed", required_argument, NULL, 's'},
                                         {"shard-bytes", required_argument, NULL, 'b'},
                                         {"layers", required_argument, NULL, 'l'},
                                         {"embed-std", required_argument, NULL, 'e'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
            arch_s = optarg;
            break;
        case 'p':
            preset = optarg;
            break;
        case 's': {
            char *end;
            errno = 0;
            seed = strtoull(optarg, &end, 0);
            if (errno || *end || !*optarg || optarg[0] == '-') { /* strtoull would wrap a negative */
                fprintf(stderr, "hz-mkmodel: --seed: not a number: %s\n", optarg);
                return 2;
            }
            break;
        }
        case 'b': {
            char *end;
            errno = 0;
            shard_limit = strtoull(optarg, &end, 0);
            if (errno || *end || !*optarg || shard_limit == 0 || optarg[0] == '-') {
                fprintf(stderr, "hz-mkmodel: --shard-bytes: not a positive number: %s\n", optarg);
                return 2;
            }
            break;
        }
        case 'l': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 0);
            if (errno || *end || !*optarg || v == 0 || v > 4096) {
                fprintf(stderr, "hz-mkmodel: --layers: not a layer count in 1..4096: %s\n", optarg);
                return 2;
            }
            layers = (uint32_t)v;
            break;
        }
        case 'e': {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (errno || *end || !*optarg || !(v > 0.0 && v <= 16.0)) {
                fprintf(stderr, "hz-mkmodel: --embed-std: not a standard deviation in (0, 16]: %s\n", optarg);
                return 2;
            }
            embed_std = (float)v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!arch_s || !preset || optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *dir = argv[optind];
    hz_arch arch;
    if (strcmp(arch_s, "olmoe") == 0) arch = HZ_ARCH_OLMOE;
    else if (strcmp(arch_s, "qwen2moe") == 0 || strcmp(arch_s, "qwen2_moe") == 0) arch = HZ_ARCH_QWEN2MOE;
    else {
        fprintf(stderr, "hz-mkmodel: unknown --arch '%s' (olmoe or qwen2moe)\n", arch_s);
        return 2;
    }
    hz_model_config cfg;
    int rc = hz_config_preset(arch, preset, &cfg);
    if (rc) return die(rc, "preset");
    cfg.torch_dtype = HZ_DTYPE_BF16;
    if (layers) cfg.layers = layers; /* every per-layer list below follows cfg.layers */

    hz_tensor_spec *specs = NULL;
    uint32_t n_specs = 0;
    if ((rc = hz_arch_nonrouted_tensors(&cfg, &specs, &n_specs))) return die(rc, NULL);

    /* checkpoint order: each layer's experts follow its router */
    gen_list l = {0};
    for (uint32_t i = 0; i < n_specs && !rc; i++) {
        const hz_tensor_spec *s = &specs[i];
        rc = push(&l, s->name, s->ndim, s->shape[0], s->shape[1]);
        unsigned layer;
        int off = 0;
        if (sscanf(s->name, "model.layers.%u.mlp.gate.weight%n", &layer, &off) == 1 &&
            off == (int)strlen(s->name)) {
            for (uint32_t e = 0; e < cfg.experts && !rc; e++) {
                char name[HZ_TENSOR_NAME_MAX];
                hz_expert_tensor_name(name, layer, e, 0);
                rc = push(&l, name, 2, cfg.expert_inter, cfg.hidden);
                hz_expert_tensor_name(name, layer, e, 1);
                if (!rc) rc = push(&l, name, 2, cfg.expert_inter, cfg.hidden);
                hz_expert_tensor_name(name, layer, e, 2);
                if (!rc) rc = push(&l, name, 2, cfg.hidden, cfg.expert_inter);
            }
        }
    }
    free(specs);
    if (rc) return die(rc, NULL);
    for (uint32_t i = 0; i < l.n; i++)
        if (strcmp(l.v[i].name, "model.embed_tokens.weight") == 0) l.v[i].std = embed_std;

    /* assign shards greedily in order */
    uint64_t total = 0, in_shard = 0;
    uint32_t shard = 0;
    for (uint32_t i = 0; i < l.n; i++) {
        uint64_t b = l.v[i].numel * 2;
        if (in_shard > 0 && in_shard + b > shard_limit) {
            shard++;
            in_shard = 0;
        }
        l.v[i].shard = shard;
        in_shard += b;
        total += b;
    }
    uint32_t n_shards = shard + 1;
    /* Every shard stays open until all are complete (they are renamed into place together, below). */
    if (n_shards > MAX_SHARDS) {
        free(l.v);
        return die(hz_error(HZ_EINVAL, "--shard-bytes %llu makes %u shards (at most %u: raise it)",
                            (unsigned long long)shard_limit, n_shards, MAX_SHARDS),
                   NULL);
    }

    if ((rc = mkdir_p(dir))) return die(rc, NULL);
    /* Every file is written complete and synced but not yet named (hz_outfile), then all are renamed
     * into place back to back, the weights first and config.json last, then what an earlier run left
     * is removed: a failure before the renames leaves the earlier checkpoint as it was, never a mix of
     * two runs' shards or a truncated config.json. */
    hz_outfile *pending = calloc(n_shards + 2u, sizeof *pending); /* shards, index, config */
    uint16_t *buf = malloc(CHUNK_VALUES * sizeof *buf);
    if (!buf || !pending) {
        free(buf);
        free(pending);
        return die(HZ_ENOMEM, NULL);
    }
    for (uint32_t s = 0; s < n_shards + 2u; s++) pending[s].fd = -1;
    for (uint32_t s = 0; s < n_shards && !rc; s++) rc = write_shard(dir, &l, s, n_shards, seed, buf, &pending[s]);
    free(buf);
    if (!rc && n_shards > 1) rc = write_index(dir, &l, n_shards, total, &pending[n_shards]);
    char path[4096];
    char *cfg_json = rc ? NULL : hz_hfconfig_to_json(&cfg);
    if (!rc && !cfg_json) rc = hz_error(HZ_ENOMEM, "config.json: out of memory");
    if (!rc) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        rc = write_text(path, cfg_json, &pending[n_shards + 1u]);
    }
    free(cfg_json);
    for (uint32_t s = 0; s < n_shards + 2u && !rc; s++)
        if (pending[s].path) rc = hz_outfile_commit(&pending[s]);
    for (uint32_t s = 0; s < n_shards + 2u; s++) hz_outfile_abort(&pending[s]); /* after a failure */
    free(pending);
    if (!rc) rc = remove_stale(dir, n_shards);
    if (rc) {
        free(l.v);
        return die(rc, NULL);
    }
    printf("hz-mkmodel: %s %s seed %llu: %u tensors, %llu bytes in %u file%s -> %s\n", arch_s, preset,
           (unsigned long long)seed, l.n, (unsigned long long)total, n_shards, n_shards > 1 ? "s" : "",
           dir);
    free(l.v);
    return 0;
}
