/* hz-pack: converts a Hugging Face checkpoint directory into a Horizon artifact (.hzq).
 *
 * Non-routed tensors become FP16 (a value outside FP16 range is an error naming the tensor, never
 * clamped); each routed expert is quantized to one INT4 blob. Tensors stream through in chunks, so the
 * memory needed is one expert plus a small buffer, whatever the model size. --export-dequantized
 * writes the exact values Horizon computes with, for reference implementations. */
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

#define CHUNK_BYTES (8u << 20)

typedef struct pack_ctx {
    hz_st_set *set;
    int *fds;
    hz_model_config cfg;
    hz_artifact_writer *aw;
    hz_st_writer *ew; /* export, or NULL */
    int progress, quiet;
    double t0, last_print;
    uint64_t done_bytes, total_bytes;
} pack_ctx;

static void usage(FILE *f) {
    fprintf(f, "usage: hz-pack MODEL_DIR OUT.hzq [--export-dequantized OUT.safetensors] [--quiet]\n"
               "               [--progress]\n"
               "Converts a Hugging Face MoE checkpoint (OLMoE, Qwen1.5-MoE) to a Horizon artifact.\n");
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

/* Raw bytes of a tensor's [from, from + n) range. */
static int read_range(pack_ctx *c, const hz_st_tensor *t, uint64_t from, void *dst, uint64_t n) {
    uint8_t *p = dst;
    uint64_t off = t->offset + from;
    const char *path = c->set->paths[t->file];
    while (n > 0) {
        ssize_t r = pread(c->fds[t->file], p, n > (1u << 30) ? (1u << 30) : (size_t)n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return hz_error(HZ_EIO, "%s: read failed: %s", path, strerror(errno));
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

static int check_shape(const hz_st_tensor *t, uint32_t ndim, uint64_t d0, uint64_t d1) {
    if (t->ndim != ndim || t->shape[0] != d0 || (ndim > 1 && t->shape[1] != d1))
        return hz_error(HZ_EFORMAT, "tensor '%s': shape [%llu%s%llu] in the checkpoint, the config "
                                    "needs [%llu%s%llu]",
                        t->name, (unsigned long long)t->shape[0], t->ndim > 1 ? ", " : "",
                        t->ndim > 1 ? (unsigned long long)t->shape[1] : 0ull,
                        (unsigned long long)d0, ndim > 1 ? ", " : "", ndim > 1 ? (unsigned long long)d1 : 0ull);
    return HZ_OK;
}

static int pack_nonrouted(pack_ctx *c, const hz_tensor_spec *s, uint8_t *raw, hz_f16 *half) {
    const hz_st_tensor *t = hz_st_find(c->set, s->name);
    if (!t) return hz_error(HZ_EFORMAT, "tensor '%s' is missing from the checkpoint", s->name);
    int rc = check_shape(t, s->ndim, s->shape[0], s->shape[1]);
    if (rc) return rc;
    if ((rc = hz_artifact_writer_begin_tensor(c->aw, s->name, s->ndim, s->shape))) return rc;
    unsigned es = hz_dtype_size(t->dtype);
    uint64_t per = CHUNK_BYTES / 4; /* elements per chunk: raw fits CHUNK_BYTES even for f32 */
    for (uint64_t at = 0; at < t->numel;) {
        uint64_t m = t->numel - at < per ? t->numel - at : per;
        if ((rc = read_range(c, t, at * es, raw, m * es))) return rc;
        for (uint64_t j = 0; j < m; j++) {
            float v = elem_f32(raw, t->dtype, j);
            if (!hz_f16_fits(v))
                return hz_error(HZ_ERANGE,
                                "tensor '%s': element %llu is %g, outside the FP16 range (+-65504); "
                                "Horizon stores non-routed tensors as FP16 and does not clamp",
                                s->name, (unsigned long long)(at + j), (double)v);
            half[j] = hz_f32_to_f16(v);
        }
        if ((rc = hz_artifact_writer_write(c->aw, half, m * 2))) return rc;
        if (c->ew && (rc = hz_st_writer_write(c->ew, half, m * 2))) return rc;
        at += m;
        c->done_bytes += m * es;
        show_progress(c, "non-routed tensors", 0);
    }
    return hz_artifact_writer_end_tensor(c->aw);
}

/* Dequantizes one projection of a blob to rows x k FP32 (exactly code * scale). */
static void dequant_proj(const uint8_t *blob, const hz_qmat_shape *sh, uint64_t q_off, uint64_t s_off,
                         float *dst) {
    const uint8_t *q = blob + q_off;
    const hz_f16 *s = (const hz_f16 *)(blob + s_off);
    for (uint32_t r = 0; r < sh->rows; r++)
        hz_qpack_dequantize_row(q + (uint64_t)r * (sh->kp / 2), s + (uint64_t)r * sh->nblocks, sh->k,
                                dst + (uint64_t)r * sh->k);
}

static int pack_experts(pack_ctx *c) {
    hz_expert_layout L;
    hz_expert_layout_init(&L, c->cfg.hidden, c->cfg.expert_inter);
    uint64_t n = (uint64_t)c->cfg.hidden * c->cfg.expert_inter;
    float *proj[3];
    proj[0] = malloc(n * sizeof(float));
    proj[1] = malloc(n * sizeof(float));
    proj[2] = malloc(n * sizeof(float));
    uint8_t *blob = malloc(L.blob_bytes);
    int rc = HZ_OK;
    if (!proj[0] || !proj[1] || !proj[2] || !blob) {
        rc = hz_error(HZ_ENOMEM, "out of memory for one expert");
        goto done;
    }
    for (uint32_t l = 0; l < c->cfg.layers && !rc; l++) {
        char stage[48];
        snprintf(stage, sizeof stage, "layer %u/%u", l + 1, c->cfg.layers);
        for (uint32_t e = 0; e < c->cfg.experts && !rc; e++) {
            for (int p = 0; p < 3 && !rc; p++) {
                char name[HZ_TENSOR_NAME_MAX];
                hz_expert_tensor_name(name, l, e, p);
                const hz_st_tensor *t = hz_st_find(c->set, name);
                if (!t) {
                    rc = hz_error(HZ_EFORMAT, "tensor '%s' is missing from the checkpoint", name);
                    break;
                }
                rc = p < 2 ? check_shape(t, 2, c->cfg.expert_inter, c->cfg.hidden)
                           : check_shape(t, 2, c->cfg.hidden, c->cfg.expert_inter);
                if (!rc) rc = hz_st_read_f32(c->set, t, proj[p]);
                c->done_bytes += t->nbytes;
            }
            if (rc) break;
            char what[64];
            snprintf(what, sizeof what, "layer %u expert %u", l, e);
            if ((rc = hz_expert_pack(&L, proj[0], proj[1], proj[2], blob, what))) break;
            if ((rc = hz_artifact_writer_add_expert(c->aw, l, e, blob))) break;
            if (c->ew) {
                dequant_proj(blob, &L.gate, L.gate_q, L.gate_s, proj[0]);
                dequant_proj(blob, &L.up, L.up_q, L.up_s, proj[1]);
                dequant_proj(blob, &L.down, L.down_q, L.down_s, proj[2]);
                for (int p = 0; p < 3 && !rc; p++) rc = hz_st_writer_write(c->ew, proj[p], n * 4);
            }
            show_progress(c, stage, 0);
        }
    }
done:
    free(proj[0]);
    free(proj[1]);
    free(proj[2]);
    free(blob);
    return rc;
}

static const char *dtype_word(hz_dtype d) {
    return d == HZ_DTYPE_F32 ? "f32" : d == HZ_DTYPE_F16 ? "f16" : "bf16";
}

static int is_expert_name(const char *name) {
    unsigned l, e;
    char proj[16];
    int off = 0;
    if (sscanf(name, "model.layers.%u.mlp.experts.%u.%15[a-z_].weight%n", &l, &e, proj, &off) != 3 ||
        off != (int)strlen(name))
        return 0;
    return !strcmp(proj, "gate_proj") || !strcmp(proj, "up_proj") || !strcmp(proj, "down_proj");
}

static int run(const char *model_dir, const char *out, const char *export_path, pack_ctx *c) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    int rc = hz_hfconfig_load(path, &c->cfg);
    if (rc) return rc;
    if ((rc = hz_st_open(model_dir, &c->set))) return rc;
    c->fds = calloc(c->set->n_files, sizeof *c->fds);
    if (!c->fds) return hz_error(HZ_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < c->set->n_files; i++) c->fds[i] = -1;
    for (uint32_t i = 0; i < c->set->n_files; i++) {
        c->fds[i] = open(c->set->paths[i], O_RDONLY | O_CLOEXEC);
        if (c->fds[i] < 0) return hz_error(HZ_EIO, "%s: cannot open: %s", c->set->paths[i], strerror(errno));
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
        int known = is_expert_name(t->name);
        for (uint32_t k = 0; k < n_specs && !known; k++) known = !strcmp(specs[k].name, t->name);
        if (!known && !c->quiet)
            fprintf(stderr, "hz-pack: warning: ignoring tensor '%s' (not used by %s)\n", t->name,
                    hz_arch_name(c->cfg.arch));
    }
    hz_dtype src = HZ_DTYPE_BF16;
    if (by_dtype[HZ_DTYPE_F16] > by_dtype[src]) src = HZ_DTYPE_F16;
    if (by_dtype[HZ_DTYPE_F32] > by_dtype[src]) src = HZ_DTYPE_F32;

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
    uint8_t *raw = malloc(CHUNK_BYTES);
    hz_f16 *half = malloc(CHUNK_BYTES / 2);
    if (!raw || !half) rc = hz_error(HZ_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n_specs && !rc; i++) rc = pack_nonrouted(c, &specs[i], raw, half);
    free(raw);
    free(half);
    if (!rc) rc = pack_experts(c);
    if (rc) goto done;
    char identity[HZ_IDENTITY_HEX_BYTES];
    rc = hz_artifact_writer_finish(c->aw, identity);
    c->aw = NULL;
    if (rc) goto done;
    struct stat st;
    uint64_t bytes = stat(out, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (c->ew) {
        rc = hz_st_writer_finish(c->ew);
        c->ew = NULL;
        if (rc) goto done;
    }
    show_progress(c, "done", 1);
    if (c->progress) fputc('\n', stderr);
    double el = hz_now_seconds() - c->t0;
    if (!c->quiet)
        printf("hz-pack: %s -> %s: %s, %u layers x %u experts, %llu bytes, identity %s, %.1f s "
               "(%.1f MB/s)%s%s\n",
               model_dir, out, hz_arch_name(c->cfg.arch), c->cfg.layers, c->cfg.experts,
               (unsigned long long)bytes, identity, el,
               el > 0 ? (double)c->total_bytes / el / 1e6 : 0.0, export_path ? ", exported " : "",
               export_path ? export_path : "");
done:
    free(specs);
    return rc;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {{"export-dequantized", required_argument, NULL, 'x'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"progress", no_argument, NULL, 'p'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *export_path = NULL;
    int quiet = 0, force_progress = 0, ch;
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
