/* End-to-end checker used by e2e.sh:
 *
 *   e2e_check ARTIFACT IDENTITY [EXPORT.safetensors SOURCE_DIR]
 *
 * Opens ARTIFACT as a host backing (the public call), checks its identity equals IDENTITY (what
 * hz-inspect printed) and prints the describe JSON. With an export, checks that every exported value is
 * exactly what the backing holds (non-routed: the same FP16 bits; routed: code * scale of the backing's
 * blob) and that both are faithful to the source checkpoint (FP16 rounding of the source; INT4 error
 * within half a block scale, bounded here by absmax(row) / 14). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backing/backing.h"
#include "core/fp16.h"
#include "format/qpack.h"
#include "format/safetensors.h"

static int fail(const char *what) {
    fprintf(stderr, "e2e_check: %s: %s\n", what, hz_last_error_message());
    return 1;
}

static void dequant(const uint8_t *blob, const hz_qmat_shape *sh, uint64_t q_off, uint64_t s_off,
                    float *dst) {
    for (uint32_t r = 0; r < sh->rows; r++)
        hz_qpack_dequantize_row(blob + q_off + (uint64_t)r * (sh->kp / 2),
                                (const hz_f16 *)(blob + s_off) + (uint64_t)r * sh->nblocks, sh->k,
                                dst + (uint64_t)r * sh->k);
}

static int check_export(hz_host_backing *b, const char *export_path, const char *src_dir) {
    hz_st_set *ex = NULL, *src = NULL;
    if (hz_st_open(export_path, &ex)) return fail(export_path);
    if (hz_st_open(src_dir, &src)) return fail(src_dir);
    const hz_expert_layout *L = hz_backing_expert_layout(b);
    int bad = 0;
    uint32_t n_routed = 0, n_plain = 0;
    for (uint32_t i = 0; i < ex->n_tensors && !bad; i++) {
        const hz_st_tensor *t = &ex->tensors[i];
        const hz_st_tensor *s = hz_st_find(src, t->name);
        if (!s || s->numel != t->numel) {
            fprintf(stderr, "e2e_check: exported tensor '%s' has no source twin\n", t->name);
            return 1;
        }
        float *got = malloc(t->numel * sizeof(float)), *orig = malloc(t->numel * sizeof(float));
        float *want = malloc(t->numel * sizeof(float));
        if (!got || !orig || !want || hz_st_read_f32(ex, t, got) || hz_st_read_f32(src, s, orig))
            return fail(t->name);
        unsigned l, e;
        char proj[16];
        int off = 0;
        if (sscanf(t->name, "model.layers.%u.mlp.experts.%u.%15[a-z_].weight%n", &l, &e, proj, &off) == 3 &&
            off == (int)strlen(t->name)) {
            n_routed++;
            if (t->dtype != HZ_DTYPE_F32) bad = fprintf(stderr, "'%s' is not F32\n", t->name);
            const uint8_t *blob = hz_backing_expert_blob(b, l, e);
            const hz_qmat_shape *sh = !strcmp(proj, "gate_proj") ? &L->gate
                                      : !strcmp(proj, "up_proj") ? &L->up
                                                                 : &L->down;
            uint64_t qo = sh == &L->gate ? L->gate_q : sh == &L->up ? L->up_q : L->down_q;
            uint64_t so = sh == &L->gate ? L->gate_s : sh == &L->up ? L->up_s : L->down_s;
            dequant(blob, sh, qo, so, want);
            if (memcmp(got, want, t->numel * sizeof(float)) != 0)
                bad = fprintf(stderr, "'%s': export differs from the backing's blob\n", t->name);
            for (uint32_t r = 0; r < sh->rows && !bad; r++) {
                float amax = 0;
                for (uint32_t k = 0; k < sh->k; k++) amax = fmaxf(amax, fabsf(orig[r * sh->k + k]));
                for (uint32_t k = 0; k < sh->k && !bad; k++) {
                    float err = fabsf(got[r * sh->k + k] - orig[r * sh->k + k]);
                    if (err > amax / 14.0f * 1.01f + 1e-7f)
                        bad = fprintf(stderr, "'%s' row %u col %u: INT4 error %g above %g\n", t->name, r,
                                      k, (double)err, (double)(amax / 14.0f));
                }
            }
        } else {
            n_plain++;
            const hz_backing_tensor *bt = hz_backing_find_tensor(b, t->name);
            if (!bt || bt->numel != t->numel || t->dtype != HZ_DTYPE_F16) {
                bad = fprintf(stderr, "'%s': missing from the backing or not F16\n", t->name);
            } else {
                for (uint64_t k = 0; k < t->numel && !bad; k++) {
                    if (hz_f32_to_f16(got[k]) != bt->data[k])
                        bad = fprintf(stderr, "'%s'[%llu]: export differs from the backing\n", t->name,
                                      (unsigned long long)k);
                    else if (bt->data[k] != hz_f32_to_f16(orig[k]))
                        bad = fprintf(stderr, "'%s'[%llu]: backing is not the FP16 rounding of the source\n",
                                      t->name, (unsigned long long)k);
                }
            }
        }
        free(got);
        free(orig);
        free(want);
    }
    const hz_model_config *cfg = hz_backing_config(b);
    if (!bad && n_routed != cfg->layers * cfg->experts * 3) {
        fprintf(stderr, "e2e_check: %u routed tensors exported, expected %u\n", n_routed,
                cfg->layers * cfg->experts * 3);
        bad = 1;
    }
    if (!bad) printf("e2e_check: export matches: %u non-routed F16, %u routed F32\n", n_plain, n_routed);
    hz_st_close(ex);
    hz_st_close(src);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: e2e_check ARTIFACT IDENTITY [EXPORT.safetensors SOURCE_DIR]\n");
        return 2;
    }
    hz_host_backing *b = NULL;
    if (hz_host_backing_open(argv[1], NULL, &b)) return fail(argv[1]);
    char *json = NULL;
    if (hz_host_backing_describe_json(b, &json)) return fail("describe");
    printf("%s\n", json);
    hz_free(json);
    if (strcmp(hz_host_backing_identity(b), argv[2]) != 0) {
        fprintf(stderr, "e2e_check: backing identity %s != %s\n", hz_host_backing_identity(b), argv[2]);
        return 1;
    }
    int rc = argc == 5 ? check_export(b, argv[3], argv[4]) : 0;
    if (hz_host_backing_close(b)) return fail("close");
    return rc;
}
