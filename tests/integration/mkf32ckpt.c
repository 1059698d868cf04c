/* mkf32ckpt SRC_DIR DST_DIR TENSOR VALUE: copies a checkpoint as one FP32 model.safetensors and sets
 * element 0 of TENSOR to VALUE. e2e.sh uses it to feed hz-pack an FP32 checkpoint with a value outside
 * the FP16 range (it must fail naming the tensor, never clamp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "format/safetensors.h"

static int fail(const char *what) {
    fprintf(stderr, "mkf32ckpt: %s: %s\n", what, hz_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: mkf32ckpt SRC_DIR DST_DIR TENSOR VALUE\n");
        return 2;
    }
    hz_st_set *src = NULL;
    if (hz_st_open(argv[1], &src)) return fail(argv[1]);
    mkdir(argv[2], 0755);
    char path[4096];
    /* config.json copied verbatim */
    snprintf(path, sizeof path, "%s/config.json", argv[1]);
    FILE *in = fopen(path, "rb");
    snprintf(path, sizeof path, "%s/config.json", argv[2]);
    FILE *out = fopen(path, "wb");
    if (!in || !out) return fail("config.json");
    int ch;
    while ((ch = fgetc(in)) != EOF) fputc(ch, out);
    fclose(in);
    fclose(out);

    hz_st_decl *d = calloc(src->n_tensors, sizeof *d);
    if (!d) return 1;
    for (uint32_t i = 0; i < src->n_tensors; i++) {
        d[i].name = src->tensors[i].name;
        d[i].dtype = HZ_DTYPE_F32;
        d[i].ndim = src->tensors[i].ndim;
        memcpy(d[i].shape, src->tensors[i].shape, sizeof d[i].shape);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", argv[2]);
    hz_st_writer *w = NULL;
    if (hz_st_writer_create(path, d, src->n_tensors, &w)) return fail(path);
    int found = 0;
    for (uint32_t i = 0; i < src->n_tensors; i++) {
        const hz_st_tensor *t = &src->tensors[i];
        float *v = malloc(t->numel * sizeof(float));
        if (!v || hz_st_read_f32(src, t, v)) return fail(t->name);
        if (!strcmp(t->name, argv[3])) {
            v[0] = strtof(argv[4], NULL);
            found = 1;
        }
        if (hz_st_writer_write(w, v, t->numel * sizeof(float))) return fail(t->name);
        free(v);
    }
    if (hz_st_writer_finish(w)) return fail(path);
    free(d);
    hz_st_close(src);
    if (!found) {
        fprintf(stderr, "mkf32ckpt: no tensor '%s'\n", argv[3]);
        return 1;
    }
    return 0;
}
