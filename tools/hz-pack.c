/* hz-pack: converts a Hugging Face checkpoint directory into a Horizon artifact (.hzq).
 *
 * Non-routed tensors become FP16 (a value outside FP16 range is an error naming the tensor, never
 * clamped); each routed expert is quantized to one INT4 blob. --export-dequantized writes the exact
 * values Horizon computes with, for reference implementations.
 *
 * The conversion is a sequence of items (chunks of non-routed tensors, then the experts layer-major)
 * computed by a pool of worker threads and written strictly in sequence order (tools/pack_pipeline.h),
 * so the artifact and the export are byte-identical whatever the thread count and a failure reports
 * the same first error. Memory is bounded by the in-flight window: one result slot per window entry
 * plus one projection-sized scratch buffer per worker, whatever the model size. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "core/fp16.h"
#include "format/artifact.h"
#include "format/hfconfig.h"
#include "format/qpack.h"
#include "format/safetensors.h"
#include "pack_pipeline.h"

#define CHUNK_BYTES (8u << 20)
#define MAX_THREADS 256u

/* One chunk of a non-routed tensor. `bad` marks a tensor that is missing or misshaped: planning stops
 * there, and the item's compute step reproduces the error in sequence order. */
typedef struct nr_item {
    uint32_t spec;
    const hz_st_tensor *t;
    uint64_t at, m; /* elements [at, at + m) */
    uint8_t first, last, bad;
} nr_item;

/* A result slot of the in-flight window. */
typedef struct pack_slot {
    uint8_t *out;      /* the expert blob, or a chunk's FP16 values */
    float *deq;        /* the dequantized expert (3 projections) for the export, or NULL */
    uint64_t src_bytes; /* checkpoint bytes the item covered, for progress */
} pack_slot;

typedef struct pack_ctx {
    hz_st_set *set;
    int *fds;
    hz_model_config cfg;
    hz_artifact_writer *aw;
    hz_st_writer *ew; /* export, or NULL */
    int progress, quiet;
    unsigned threads;
    double t0, last_print;
    uint64_t done_bytes, total_bytes;
    /* the conversion plan, read-only while the workers run */
    const hz_tensor_spec *specs;
    nr_item *nr;
    uint64_t n_nr;
    uint64_t n_experts; /* expert items after the chunks (0 when planning stopped at a bad tensor) */
    hz_expert_layout L; /* set by expert_sizes, with its arithmetic checked */
    uint64_t proj_n;    /* values per projection: hidden x expert_inter */
} pack_ctx;

static void usage(FILE *f) {
    fprintf(f, "usage: hz-pack MODEL_DIR OUT.hzq [--export-dequantized OUT.safetensors] [--threads N]\n"
               "               [--quiet] [--progress]\n"
               "Converts a Hugging Face MoE checkpoint (OLMoE, Qwen1.5-MoE) to a Horizon artifact.\n"
               "--threads N: worker threads reading, converting and quantizing (default: the number of\n"
               "online CPUs); the artifact is identical for every N.\n");
}

static void show_progress(pack_ctx *c, const char *stage, int force) {
    if (!c->progress) return;
    double now = hz_now_seconds();
    if (!force && now - c->last_print < 0.25) return;
    c->last_print = now;
    double el = now - c->t0;
    double frac = c->total_bytes ? (double)c->done_bytes / (double)c->total_bytes : 1.0;
    double mbs = el > 0 ? (double)c->done_bytes / el / 1e6 : 0.0;
    double eta = frac > 0 ? el / frac - el : 0.0;
    fprintf(stderr, "\rhz-pack: %-22s %5.1f%%  %7.1f MB/s  ETA %5.0f s ", stage, 100.0 * frac, mbs,
            eta);
    fflush(stderr);
}

/* Raw bytes of a tensor's [from, from + n) range. pread keeps this safe from any thread. */
static int read_range(const pack_ctx *c, const hz_st_tensor *t, uint64_t from, void *dst, uint64_t n) {
    uint8_t *p = dst;
    uint64_t off = t->offset + from;
    const char *path = c->set->paths[t->file];
    while (n > 0) {
        ssize_t r = pread(c->fds[t->file], p, n > (1u << 30) ? (1u << 30) : (size_t)n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            char eb[128]; /* strerror's buffer may be shared between threads; the GNU _r form is not */
            return hz_error(HZ_EIO, "%s: read failed: %s", path, strerror_r(errno, eb, sizeof eb));
        }
        if (r == 0) return hz_error(HZ_EFORMAT, "%s: tensor '%s' ends past the file", path, t->name);
        p += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return HZ_OK;
}

static float elem_f32(const uint8_t *src, hz_dtype dt, uint64_t i) {
    uint16_t h;
    float f;
    switch (dt) {
    case HZ_DTYPE_F32:
        memcpy(&f, src + 4 * i, 4);
        return f;
    case HZ_DTYPE_F16:
        memcpy(&h, src + 2 * i, 2);
        return hz_f16_to_f32(h);
    default:
        memcpy(&h, src + 2 * i, 2);
        return hz_bf16_to_f32(h);
    }
}

/* "[d0, d1, ...]" of n dimensions into buf. */
static const char *shape_text(char *buf, size_t cap, uint32_t n, const uint64_t *d) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (uint32_t i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

static int check_shape(const hz_st_tensor *t, uint32_t ndim, uint64_t d0, uint64_t d1) {
    if (t->ndim != ndim || (ndim > 0 && t->shape[0] != d0) || (ndim > 1 && t->shape[1] != d1)) {
        char have[160], want[64];
        const uint64_t need[2] = {d0, d1};
        return hz_error(HZ_EFORMAT, "tensor '%s': shape %s in the checkpoint, the config needs %s", t->name,
                        shape_text(have, sizeof have, t->ndim, t->shape), shape_text(want, sizeof want, ndim, need));
    }
    return HZ_OK;
}

/* The checkpoint tensor for a non-routed spec, or an error naming it. */
static int find_nonrouted(const pack_ctx *c, const hz_tensor_spec *s, const hz_st_tensor **out) {
    const hz_st_tensor *t = hz_st_find(c->set, s->name);
    *out = t;
    if (!t) return hz_error(HZ_EFORMAT, "tensor '%s' is missing from the checkpoint", s->name);
    return check_shape(t, s->ndim, s->shape[0], s->shape[1]);
}

/* The checkpoint tensor for projection p (gate, up, down) of layer l's expert e, or an error naming it. */
static int find_expert(const pack_ctx *c, uint32_t l, uint32_t e, int p, const hz_st_tensor **out) {
    char name[HZ_TENSOR_NAME_MAX];
    hz_expert_tensor_name(name, l, e, p);
    const hz_st_tensor *t = hz_st_find(c->set, name);
    *out = t;
    if (!t) return hz_error(HZ_EFORMAT, "tensor '%s' is missing from the checkpoint", name);
    return p < 2 ? check_shape(t, 2, c->cfg.expert_inter, c->cfg.hidden)
                 : check_shape(t, 2, c->cfg.hidden, c->cfg.expert_inter);
}

/* Every routed expert's three tensors, looked up and shape-checked from the parsed headers alone (no
 * tensor data is read). run() calls this before creating the outputs and before anything is sized from
 * config.json's expert width: a width that disagrees with the checkpoint must fail as that, naming the
 * tensor and both shapes, not as whatever allocating buffers for an absurd width does (HZ_ENOMEM, or a
 * long stall paging) once the workers would have found it. */
static int check_experts(const pack_ctx *c) {
    for (uint32_t l = 0; l < c->cfg.layers; l++)
        for (uint32_t e = 0; e < c->cfg.experts; e++)
            for (int p = 0; p < 3; p++) {
                const hz_st_tensor *t;
                int rc = find_expert(c, l, e, p, &t);
                if (rc) return rc;
            }
    return HZ_OK;
}

static const char *expert_width_key(hz_arch arch) {
    return arch == HZ_ARCH_OLMOE ? "intermediate_size" : "moe_intermediate_size";
}

/* The expert layout and the per-projection value count that convert() sizes its buffers by. The widths
 * already match the checkpoint (check_experts), but a header may declare tensors far larger than
 * memory, and a wrapped size would allocate a small buffer that the quantizer then overruns, so the
 * arithmetic is checked here, once: hz_qmat_shape keeps K padded to a multiple of 256 in 32 bits, and
 * the export's three FP32 projections (12 bytes a value) are the largest product. With those two
 * bounds the blob (about 1.5 bytes a value, plus padding of at most 255 values a row) cannot wrap. */
static int expert_sizes(pack_ctx *c) {
    const uint32_t h = c->cfg.hidden, n = c->cfg.expert_inter, kmax = UINT32_MAX - (HZ_QBLOCK - 1);
    uint64_t deq_bytes;
    if (h > kmax || n > kmax || !hz_mul_ok((uint64_t)h * n, 3 * sizeof(float), &deq_bytes))
        return hz_error(HZ_ERANGE,
                        "config.json: hidden_size %u and %s %u (the checkpoint's expert shapes) are too large "
                        "to convert: each must be at most %u and hidden_size x %s x 12 bytes must fit 64 bits",
                        h, expert_width_key(c->cfg.arch), n, kmax, expert_width_key(c->cfg.arch));
    c->proj_n = (uint64_t)h * n;
    hz_expert_layout_init(&c->L, h, n);
    return HZ_OK;
}

/* Elements per non-routed chunk: the raw chunk fits CHUNK_BYTES even for f32. */
#define CHUNK_ELEMS ((uint64_t)CHUNK_BYTES / 4u)

/* Splits the non-routed tensors into chunks, in writing order. A bad tensor ends the plan with one
 * `bad` item (nothing after it would be written); returns HZ_ENOMEM only. */
static int plan(pack_ctx *c, uint32_t n_specs) {
    uint64_t n = 0;
    int bad = 0;
    for (uint32_t i = 0; i < n_specs && !bad; i++) {
        const hz_st_tensor *t;
        if (find_nonrouted(c, &c->specs[i], &t)) {
            bad = 1;
            n++;
        } else {
            n += t->numel ? (t->numel + CHUNK_ELEMS - 1) / CHUNK_ELEMS : 1;
        }
    }
    hz_error_clear();
    c->nr = calloc(n ? n : 1, sizeof *c->nr);
    if (!c->nr) return hz_error(HZ_ENOMEM, "out of memory for the conversion plan");
    uint64_t k = 0;
    for (uint32_t i = 0; i < n_specs && k < n; i++) {
        const hz_st_tensor *t;
        if (find_nonrouted(c, &c->specs[i], &t)) {
            c->nr[k++] = (nr_item){.spec = i, .t = t, .first = 1, .last = 1, .bad = 1};
            break;
        }
        uint64_t at = 0;
        do {
            uint64_t m = t->numel - at < CHUNK_ELEMS ? t->numel - at : CHUNK_ELEMS;
            c->nr[k++] = (nr_item){.spec = i, .t = t, .at = at, .m = m, .first = at == 0,
                                   .last = at + m == t->numel};
            at += m;
        } while (at < t->numel);
    }
    hz_error_clear();
    c->n_nr = n;
    c->n_experts = bad ? 0 : (uint64_t)c->cfg.layers * c->cfg.experts;
    return HZ_OK;
}

static int compute_nonrouted(const pack_ctx *c, const nr_item *it, pack_slot *slot, uint8_t *raw) {
    const hz_tensor_spec *s = &c->specs[it->spec];
    const hz_st_tensor *t = it->t;
    if (it->bad) return find_nonrouted(c, s, &t);
    unsigned es = hz_dtype_size(t->dtype);
    int rc = read_range(c, t, it->at * es, raw, it->m * es);
    if (rc) return rc;
    hz_f16 *half = (hz_f16 *)(void *)slot->out;
    for (uint64_t j = 0; j < it->m; j++) {
        float v = elem_f32(raw, t->dtype, j);
        if (!hz_f16_fits(v))
            return hz_error(HZ_ERANGE,
                            "tensor '%s': element %llu is %g, outside the FP16 range (+-65504); "
                            "Horizon stores non-routed tensors as FP16 and does not clamp",
                            s->name, (unsigned long long)(it->at + j), (double)v);
        half[j] = hz_f32_to_f16(v);
    }
    slot->src_bytes = it->m * es;
    return HZ_OK;
}

/* Dequantizes one projection of a blob to rows x k FP32 (exactly code * scale). */
static void dequant_proj(const uint8_t *blob, const hz_qmat_shape *sh, uint64_t q_off, uint64_t s_off,
                         float *dst) {
    const uint8_t *q = blob + q_off;
    const hz_f16 *s = (const hz_f16 *)(const void *)(blob + s_off);
    for (uint32_t r = 0; r < sh->rows; r++)
        hz_qpack_dequantize_row(q + (uint64_t)r * (sh->kp / 2), s + (uint64_t)r * sh->nblocks, sh->k,
                                dst + (uint64_t)r * sh->k);
}

/* Builds the blob hz_expert_pack builds (padding zeroed, each projection quantized into its part under
 * the same name), but one projection at a time, so a worker needs one projection of FP32 scratch
 * instead of three: with many cores that is the difference between a few hundred MB and over a GB.
 * check_experts vetted every tensor before the run; the lookup checks again, as it costs nothing and
 * keeps the buffers below safe whoever calls this. */
static int compute_expert(const pack_ctx *c, uint32_t l, uint32_t e, pack_slot *slot, float *x) {
    const hz_expert_layout *L = &c->L;
    const hz_st_tensor *t[3];
    uint64_t src_bytes = 0;
    for (int p = 0; p < 3; p++) {
        int rc = find_expert(c, l, e, p, &t[p]);
        if (rc) return rc;
        src_bytes += t[p]->nbytes;
    }
    const struct {
        const char *name;
        const hz_qmat_shape *shape;
        uint64_t q_off, s_off;
    } parts[3] = {
        {"gate_proj", &L->gate, L->gate_q, L->gate_s},
        {"up_proj", &L->up, L->up_q, L->up_s},
        {"down_proj", &L->down, L->down_q, L->down_s},
    };
    memset(slot->out, 0, (size_t)L->blob_bytes);
    for (int p = 0; p < 3; p++) {
        int rc = hz_st_read_f32(c->set, t[p], x);
        if (rc) return rc;
        char what[256];
        snprintf(what, sizeof what, "layer %u expert %u.%s", l, e, parts[p].name);
        rc = hz_qpack_quantize(x, parts[p].shape->rows, parts[p].shape->k, slot->out + parts[p].q_off,
                               (hz_f16 *)(void *)(slot->out + parts[p].s_off), what);
        if (rc) return rc;
        if (slot->deq)
            dequant_proj(slot->out, parts[p].shape, parts[p].q_off, parts[p].s_off,
                         slot->deq + (uint64_t)p * c->proj_n);
    }
    slot->src_bytes = src_bytes;
    return HZ_OK;
}

static int compute_item(void *ctx, uint64_t index, void *slot, void *scratch) {
    const pack_ctx *c = ctx;
    if (index < c->n_nr) return compute_nonrouted(c, &c->nr[index], slot, scratch);
    uint64_t j = index - c->n_nr;
    return compute_expert(c, (uint32_t)(j / c->cfg.experts), (uint32_t)(j % c->cfg.experts), slot,
                          scratch);
}

static int consume_item(void *ctx, uint64_t index, void *slot_ptr) {
    pack_ctx *c = ctx;
    pack_slot *slot = slot_ptr;
    int rc;
    if (index < c->n_nr) {
        const nr_item *it = &c->nr[index];
        const hz_tensor_spec *s = &c->specs[it->spec];
        if (it->first && (rc = hz_artifact_writer_begin_tensor(c->aw, s->name, s->ndim, s->shape)))
            return rc;
        if ((rc = hz_artifact_writer_write(c->aw, slot->out, it->m * 2))) return rc;
        if (c->ew && (rc = hz_st_writer_write(c->ew, slot->out, it->m * 2))) return rc;
        if (it->last && (rc = hz_artifact_writer_end_tensor(c->aw))) return rc;
        c->done_bytes += slot->src_bytes;
        show_progress(c, "non-routed tensors", 0);
        return HZ_OK;
    }
    uint64_t j = index - c->n_nr;
    uint32_t l = (uint32_t)(j / c->cfg.experts), e = (uint32_t)(j % c->cfg.experts);
    if ((rc = hz_artifact_writer_add_expert(c->aw, l, e, slot->out))) return rc;
    if (c->ew)
        for (int p = 0; p < 3; p++)
            if ((rc = hz_st_writer_write(c->ew, slot->deq + (uint64_t)p * c->proj_n, c->proj_n * 4)))
                return rc;
    c->done_bytes += slot->src_bytes;
    char stage[48];
    snprintf(stage, sizeof stage, "layer %u/%u", l + 1, c->cfg.layers);
    show_progress(c, stage, 0);
    return HZ_OK;
}

/* Runs the plan through the worker pool. The window is twice the workers, so each worker has a result
 * queued while the writer drains; with the export each slot also holds three FP32 projections, so the
 * window shrinks to one slot per worker plus one. The sizes come from expert_sizes, which run() has
 * called, after check_experts, so none of the products below can wrap. */
static int convert(pack_ctx *c, uint32_t n_specs) {
    int rc = plan(c, n_specs);
    if (rc) return rc;

    unsigned threads = c->threads;
    unsigned window = c->ew ? threads + 1 : 2 * threads;
    uint64_t out_bytes = c->L.blob_bytes > CHUNK_BYTES / 2 ? c->L.blob_bytes : CHUNK_BYTES / 2;
    uint64_t scratch_bytes = c->proj_n * 4 > CHUNK_BYTES ? c->proj_n * 4 : CHUNK_BYTES;
    pack_slot *slots = calloc(window, sizeof *slots);
    void **slot_ptrs = calloc(window, sizeof *slot_ptrs);
    void **scratch = calloc(threads, sizeof *scratch);
    if (!slots || !slot_ptrs || !scratch) {
        rc = hz_error(HZ_ENOMEM, "out of memory");
        goto done;
    }
    for (unsigned i = 0; i < window && !rc; i++) {
        slot_ptrs[i] = &slots[i];
        slots[i].out = malloc(out_bytes);
        if (c->ew) slots[i].deq = malloc(3 * c->proj_n * sizeof(float));
        if (!slots[i].out || (c->ew && !slots[i].deq))
            rc = hz_error(HZ_ENOMEM, "out of memory for %u result slots of %llu bytes", window,
                          (unsigned long long)(out_bytes + (c->ew ? 12 * c->proj_n : 0)));
    }
    for (unsigned i = 0; i < threads && !rc; i++)
        if (!(scratch[i] = malloc(scratch_bytes)))
            rc = hz_error(HZ_ENOMEM, "out of memory for %u worker buffers of %llu bytes", threads,
                          (unsigned long long)scratch_bytes);
    if (rc) goto done;

    pack_pipeline_cfg pc = {.n_items = c->n_nr + c->n_experts,
                            .threads = threads,
                            .window = window,
                            .slots = slot_ptrs,
                            .scratch = scratch,
                            .compute = compute_item,
                            .consume = consume_item,
                            .ctx = c};
    rc = pack_pipeline_run(&pc);
done:
    if (slots)
        for (unsigned i = 0; i < window; i++) {
            free(slots[i].out);
            free(slots[i].deq);
        }
    if (scratch)
        for (unsigned i = 0; i < threads; i++) free(scratch[i]);
    free(slots);
    free(slot_ptrs);
    free(scratch);
    free(c->nr);
    c->nr = NULL;
    return rc;
}

static const char *dtype_word(hz_dtype d) {
    return d == HZ_DTYPE_F32 ? "f32" : d == HZ_DTYPE_F16 ? "f16" : "bf16";
}

/* A routed expert's tensor of a layer and expert the config has (others are reported as ignored). */
static int is_expert_name(const char *name, const hz_model_config *cfg) {
    unsigned l, e;
    char proj[16];
    int off = 0;
    if (sscanf(name, "model.layers.%u.mlp.experts.%u.%15[a-z_].weight%n", &l, &e, proj, &off) != 3 ||
        off != (int)strlen(name) || l >= cfg->layers || e >= cfg->experts)
        return 0;
    return !strcmp(proj, "gate_proj") || !strcmp(proj, "up_proj") || !strcmp(proj, "down_proj");
}

/* `path` spelt one way: its directory resolved (symlinks, "." and "..") and its last component, so that
 * two spellings of one file compare equal whether or not it exists yet. NULL when the directory does not
 * resolve or the last component is empty, "." or ".." (creating the file will fail and say why). */
static char *canonical_path(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) return NULL;
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *real = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!real) return NULL;
    size_t n = strlen(real) + strlen(base) + 2;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s/%s", strcmp(real, "/") ? real : "", base);
    free(real);
    return out;
}

/* Whether paths a and b name one file: the same resolved name (canonical_path), whether or not it exists
 * yet, or, both existing, the same inode (a hard link, or a symlink followed). */
static int same_file(const char *a, const char *b) {
    char *ca = canonical_path(a), *cb = canonical_path(b);
    int same = ca && cb && !strcmp(ca, cb);
    free(ca);
    free(cb);
    struct stat sa, sb;
    return same || (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

/* Refuses an output path that names one of the checkpoint's files (its shards, config.json, the shard
 * index), or the other output, however spelt: the rename at the end would replace that file. */
static int check_outputs(const char *model_dir, const hz_st_set *set, const char *out, const char *export_path) {
    if (export_path && strcmp(out, export_path) == 0)
        return hz_error(HZ_EINVAL, "the artifact and the export are both %s", out);
    if (export_path && same_file(out, export_path))
        return hz_error(HZ_EINVAL, "the artifact %s and the export %s are the same file", out, export_path);
    char meta[2][4096];
    snprintf(meta[0], sizeof meta[0], "%s/config.json", model_dir);
    snprintf(meta[1], sizeof meta[1], "%s/model.safetensors.index.json", model_dir);
    for (uint32_t i = 0; i < set->n_files + 2u; i++) {
        const char *in = i < set->n_files ? set->paths[i] : meta[i - set->n_files];
        if (same_file(out, in))
            return hz_error(HZ_EINVAL, "the artifact path %s is the checkpoint's file %s", out, in);
        if (export_path && same_file(export_path, in))
            return hz_error(HZ_EINVAL, "the export path %s is the checkpoint's file %s", export_path, in);
    }
    return HZ_OK;
}

static int run(const char *model_dir, const char *out, const char *export_path, pack_ctx *c) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    int rc = hz_hfconfig_load(path, &c->cfg);
    if (rc) return rc;
    if ((rc = hz_st_open(model_dir, &c->set))) return rc;
    if ((rc = check_outputs(model_dir, c->set, out, export_path))) return rc;
    c->fds = calloc(c->set->n_files, sizeof *c->fds);
    if (!c->fds) return hz_error(HZ_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < c->set->n_files; i++) c->fds[i] = -1;
    for (uint32_t i = 0; i < c->set->n_files; i++) {
        if ((rc = hz_file_open_regular(c->set->paths[i], &c->fds[i], NULL))) return rc;
    }

    hz_tensor_spec *specs = NULL;
    uint32_t n_specs = 0;
    if ((rc = hz_arch_nonrouted_tensors(&c->cfg, &specs, &n_specs))) return rc;

    /* the source dtype is the dtype holding most of the checkpoint's bytes */
    uint64_t by_dtype[3] = {0, 0, 0};
    for (uint32_t i = 0; i < c->set->n_tensors; i++) {
        const hz_st_tensor *t = &c->set->tensors[i];
        if ((unsigned)t->dtype < 3) by_dtype[t->dtype] += t->nbytes;
        c->total_bytes += t->nbytes;
        int known = is_expert_name(t->name, &c->cfg);
        for (uint32_t k = 0; k < n_specs && !known; k++) known = !strcmp(specs[k].name, t->name);
        if (!known && !c->quiet)
            fprintf(stderr, "hz-pack: warning: ignoring tensor '%s' (not used by %s)\n", t->name,
                    hz_arch_name(c->cfg.arch));
    }
    hz_dtype src = HZ_DTYPE_BF16;
    if (by_dtype[HZ_DTYPE_F16] > by_dtype[src]) src = HZ_DTYPE_F16;
    if (by_dtype[HZ_DTYPE_F32] > by_dtype[src]) src = HZ_DTYPE_F32;

    /* before anything is created or sized from the expert width (the export's header declares it) */
    if ((rc = check_experts(c)) || (rc = expert_sizes(c))) goto done;

    char source_id[HZ_IDENTITY_HEX_BYTES];
    if ((rc = hz_source_identity(c->set, source_id))) goto done;

    if (export_path) {
        uint64_t n_exp = (uint64_t)c->cfg.layers * c->cfg.experts * 3;
        uint64_t n_decl = n_specs + n_exp;
        hz_st_decl *decls = calloc(n_decl, sizeof *decls);
        char (*names)[HZ_TENSOR_NAME_MAX] = calloc(n_exp ? n_exp : 1, HZ_TENSOR_NAME_MAX);
        if (!decls || !names) {
            free(decls);
            free(names);
            rc = hz_error(HZ_ENOMEM, "out of memory");
            goto done;
        }
        for (uint32_t i = 0; i < n_specs; i++) {
            decls[i].name = specs[i].name;
            decls[i].dtype = HZ_DTYPE_F16;
            decls[i].ndim = specs[i].ndim;
            decls[i].shape[0] = specs[i].shape[0];
            decls[i].shape[1] = specs[i].shape[1];
        }
        uint64_t k = 0;
        for (uint32_t l = 0; l < c->cfg.layers; l++)
            for (uint32_t e = 0; e < c->cfg.experts; e++)
                for (int p = 0; p < 3; p++, k++) {
                    hz_expert_tensor_name(names[k], l, e, p);
                    hz_st_decl *d = &decls[n_specs + k];
                    d->name = names[k];
                    d->dtype = HZ_DTYPE_F32;
                    d->ndim = 2;
                    d->shape[0] = p < 2 ? c->cfg.expert_inter : c->cfg.hidden;
                    d->shape[1] = p < 2 ? c->cfg.hidden : c->cfg.expert_inter;
                }
        rc = hz_st_writer_create(export_path, decls, (uint32_t)n_decl, &c->ew);
        free(decls);
        free(names);
        if (rc) goto done;
    }

    if ((rc = hz_artifact_writer_create(out, &c->cfg, dtype_word(src), source_id, &c->aw))) goto done;
    c->specs = specs;
    if ((rc = convert(c, n_specs))) goto done;
    /* Both outputs are completed and synced first, then renamed into place back to back, the export
     * before the artifact: a failure before the renames leaves both paths as they were. */
    char identity[HZ_IDENTITY_HEX_BYTES];
    hz_outfile art = {.fd = -1}, xp = {.fd = -1};
    rc = hz_artifact_writer_finish_pending(c->aw, identity, &art);
    c->aw = NULL;
    if (!rc && c->ew) rc = hz_st_writer_finish_pending(c->ew, &xp);
    c->ew = NULL;
    if (!rc && export_path) rc = hz_outfile_commit(&xp);
    if (!rc) {
        rc = hz_outfile_commit(&art);
        if (rc && export_path)
            (void)hz_error_prefix(rc, "the export %s is in place but the artifact %s is not", export_path, out);
    }
    hz_outfile_abort(&xp);
    hz_outfile_abort(&art);
    if (rc) goto done;
    struct stat st;
    uint64_t bytes = stat(out, &st) == 0 ? (uint64_t)st.st_size : 0;
    show_progress(c, "done", 1);
    if (c->progress) fputc('\n', stderr);
    double el = hz_now_seconds() - c->t0;
    if (!c->quiet)
        printf("hz-pack: %s -> %s: %s, %u layers x %u experts, %llu bytes, identity %s, %.1f s "
               "(%.1f MB/s, %u threads)%s%s\n",
               model_dir, out, hz_arch_name(c->cfg.arch), c->cfg.layers, c->cfg.experts,
               (unsigned long long)bytes, identity, el,
               el > 0 ? (double)c->total_bytes / el / 1e6 : 0.0, c->threads,
               export_path ? ", exported " : "",
               export_path ? export_path : "");
done:
    free(specs);
    return rc;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {{"export-dequantized", required_argument, NULL, 'x'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"progress", no_argument, NULL, 'p'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *export_path = NULL;
    int quiet = 0, force_progress = 0, ch;
    unsigned threads = 0; /* 0: one per online CPU */
    while ((ch = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
        switch (ch) {
        case 'x':
            export_path = optarg;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'p':
            force_progress = 1;
            break;
        case 't': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-' || v < 1 || v > MAX_THREADS) {
                fprintf(stderr, "hz-pack: --threads takes a number from 1 to %u, not '%s'\n",
                        MAX_THREADS, optarg);
                return 2;
            }
            threads = (unsigned)v;
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
    if (optind != argc - 2) {
        usage(stderr);
        return 2;
    }
    pack_ctx c;
    memset(&c, 0, sizeof c);
    c.quiet = quiet;
    if (!threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1u : n > (long)MAX_THREADS ? MAX_THREADS : (unsigned)n;
    }
    c.threads = threads;
    c.progress = force_progress || (!quiet && isatty(2));
    c.t0 = hz_now_seconds();
    int rc = run(argv[optind], argv[optind + 1], export_path, &c);
    if (rc) {
        if (c.progress) fputc('\n', stderr);
        /* keep the message: the cleanup below may not touch it, but copy it to be safe */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hz_last_error_message());
        hz_artifact_writer_abort(c.aw);
        hz_st_writer_abort(c.ew);
        fprintf(stderr, "hz-pack: %s: %s\n", hz_status_name(rc), msg);
    }
    if (c.fds)
        for (uint32_t i = 0; i < c.set->n_files; i++)
            if (c.fds[i] >= 0) close(c.fds[i]);
    free(c.fds);
    hz_st_close(c.set);
    return rc ? 1 : 0;
}
