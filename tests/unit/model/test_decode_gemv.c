/* The decode GEMV (hz_decode_gemv, cuda/model/decode_ops.cu) against the host, bit for bit (suite 'gpu':
 * needs a CUDA device, else it exits 77, meson's "skipped").
 *
 * The host repeats the kernel's sums in the kernel's order: lane l of a row's warp adds, value by value
 * with fmaf, the 16-byte chunks l, l + 32, l + 64, ... of the row; the 32 lane sums then meet as the
 * warp's xor butterfly adds them (offsets 16, 8, 4, 2, 1); the bias is added and the sum rounded to FP16
 * (or kept FP32). So every output must be bit-identical whichever warp took the row: a row read from
 * the wrong place or written to the wrong output fails. The shapes cover fewer rows than the grid's
 * warps, a second pass over the rows for some warps only, several passes, several segments with a bias,
 * rows that leave a partial batch, wide rows, a row of 257 chunks (a second batch of one), a width that
 * is not a multiple of 8 (the scalar path), and an argmax tail over rows repeated so that every value
 * occurs at least twice (the lowest row must win). Outputs start poisoned. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/core.h"
#include "core/fp16.h"
#include "horizon/horizon.h"

#include "../../../cuda/model/decode_ops.cuh"
#include "../../test_fail.h"
#include "decode_test_dev.h"
#include "gemv_host_sum.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float urand(void) { return test_urand(&g_rng); }

#define MAX_SEGS 3

typedef struct {
    const char *name;
    uint32_t in;
    uint32_t nseg;
    int64_t rows[MAX_SEGS]; /* >= 0: that many rows; -k: the grid's warps + extra_blocks x its blocks + k */
    uint32_t extra_blocks;
    int bias, f32, argmax, repeat;
} shape;

static void *upload(const void *h, size_t n) {
    void *d = NULL;
    if (cudaMalloc(&d, n) != cudaSuccess) return NULL;
    if (cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

static void check_shape(const shape *sh, const hz_decode_dev *dev, cudaStream_t stream) {
    const uint32_t in = sh->in, warps = dev->gemv_grid * 8u;
    uint32_t rows[MAX_SEGS], total = 0;
    for (uint32_t s = 0; s < sh->nseg; s++) {
        rows[s] = sh->rows[s] >= 0 ? (uint32_t)sh->rows[s]
                                   : warps + sh->extra_blocks * dev->gemv_grid + (uint32_t)(-sh->rows[s]);
        total += rows[s];
    }
    uint16_t *w = malloc((size_t)total * in * 2u), *x = malloc((size_t)in * 2u), *b = malloc((size_t)total * 2u);
    void *out_h = malloc((size_t)total * 4u);
    void *dw = NULL, *dx = NULL, *db = NULL, *dy = NULL, *tail = NULL;
    int32_t *darg = NULL, arg = -1;
    int ok = w && x && b && out_h;
    if (ok) {
        const float scale = 4.0f / sqrtf((float)in);
        for (size_t i = 0; i < (size_t)total * in; i++) w[i] = hz_f32_to_f16(urand() * scale);
        for (uint32_t i = 0; i < in; i++) x[i] = hz_f32_to_f16(urand());
        for (uint32_t i = 0; i < total; i++) b[i] = hz_f32_to_f16(urand() * 0.25f);
        if (sh->repeat) /* rows repeat with period `repeat`: each value's first row is the lowest */
            for (uint32_t r = sh->repeat; r < total; r++)
                memcpy(w + (size_t)r * in, w + (size_t)(r % sh->repeat) * in, (size_t)in * 2u);
        dw = upload(w, (size_t)total * in * 2u);
        dx = upload(x, (size_t)in * 2u);
        db = upload(b, (size_t)total * 2u);
        ok = dw && dx && db && cudaMalloc(&dy, (size_t)total * 4u) == cudaSuccess &&
             cudaMemset(dy, 0xff, (size_t)total * 4u) == cudaSuccess &&
             cudaMalloc(&tail, hz_decode_tail_bytes(dev)) == cudaSuccess &&
             cudaMemset(tail, 0, hz_decode_tail_bytes(dev)) == cudaSuccess &&
             cudaMalloc((void **)&darg, 4) == cudaSuccess && cudaMemset(darg, 0xff, 4) == cudaSuccess;
    }
    if (!ok) {
        FAILF("%s: setting up", sh->name);
        goto out;
    }
    hz_dgemv_args a;
    memset(&a, 0, sizeof a);
    const size_t osz = sh->f32 ? 4u : 2u;
    for (uint32_t s = 0, r0 = 0; s < sh->nseg; r0 += rows[s], s++)
        a.seg[s] = (hz_mgemv_seg){(const uint16_t *)dw + (size_t)r0 * in, sh->bias ? (const uint16_t *)db + r0 : NULL,
                                  (char *)dy + (size_t)r0 * osz, rows[s], (uint32_t)sh->f32};
    a.nseg = sh->nseg;
    a.in = in;
    a.x_mode = HZ_DGEMV_X_PLAIN;
    a.x = dx;
    if (sh->argmax) {
        a.tail = HZ_DGEMV_TAIL_ARGMAX;
        a.argmax_out = darg;
        a.tail_scratch = tail;
    }
    hz_klaunch kl = {stream, 0};
    int st = hz_decode_gemv(&a, dev, &kl);
    if (st) {
        FAILF("%s: %s", sh->name, hz_last_error_message());
        goto out;
    }
    cudaError_t ce = cudaStreamSynchronize(stream);
    if (ce == cudaSuccess) ce = cudaMemcpy(out_h, dy, (size_t)total * osz, cudaMemcpyDeviceToHost);
    if (ce == cudaSuccess) ce = cudaMemcpy(&arg, darg, 4, cudaMemcpyDeviceToHost);
    if (ce != cudaSuccess) {
        FAILF("%s: running: %s", sh->name, cudaGetErrorString(ce));
        goto out;
    }
    uint32_t bad = 0, best_i = 0;
    float best = -INFINITY;
    for (uint32_t r = 0; r < total; r++) {
        const float sum = gemv_row_sum(w + (size_t)r * in, x, in);
        const float v = sum + (sh->bias ? hz_f16_to_f32(b[r]) : 0.0f);
        int same;
        if (sh->f32) {
            const float got = ((const float *)out_h)[r];
            same = memcmp(&got, &v, 4) == 0;
            if (!same && bad < 3) FAILF("%s: row %u: %.9g, the host %.9g", sh->name, r, got, v);
        } else {
            const uint16_t got = ((const uint16_t *)out_h)[r], want = hz_f32_to_f16(v);
            same = got == want;
            if (!same && bad < 3) FAILF("%s: row %u: 0x%04x, the host 0x%04x", sh->name, r, got, want);
        }
        bad += !same;
        if (r < rows[0] && v > best) { /* strict: the first row of the largest value */
            best = v;
            best_i = r;
        }
    }
    if (bad) FAILF("%s: %u of %u rows differ", sh->name, bad, total);
    if (sh->argmax && arg != (int32_t)best_i) FAILF("%s: argmax %d, the host %u", sh->name, arg, best_i);
    if (!bad && (!sh->argmax || arg == (int32_t)best_i))
        printf("decode gemv: %-34s in %5u, %6u rows in %u segment(s): bit-identical%s\n", sh->name, in, total,
               sh->nseg, sh->argmax ? ", argmax" : "");
out:
    cudaFree(dw), cudaFree(dx), cudaFree(db), cudaFree(dy), cudaFree(tail), cudaFree(darg);
    free(w), free(x), free(b), free(out_h);
}

int main(void) {
    cudaStream_t stream;
    hz_decode_dev dev;
    const int ready = decode_test_device("decode_gemv", 8192, &stream, &dev);
    if (ready) return ready;
    printf("decode gemv: %u SMs, a grid of at most %u blocks (%u warps)\n", dev.sms, dev.gemv_grid, dev.gemv_grid * 8u);
    static const shape shapes[] = {
        {"fewer rows than warps", 2048, 1, {1000}, 0, 0, 0, 0, 0},
        {"q/k/v with bias", 2048, 3, {2048, 2048, 2048}, 0, 1, 0, 0, 0},
        {"a second row for some warps", 2048, 1, {-100}, 0, 0, 0, 0, 0},
        {"several passes", 2048, 2, {-777, 3000}, 4, 1, 0, 0, 0},
        {"partial batch", 1024, 1, {-300}, 0, 0, 0, 0, 0},
        {"wide rows", 5632, 1, {-500}, 0, 0, 0, 0, 0},
        {"a width of 257 chunks", 2056, 1, {-50}, 1, 0, 0, 0, 0},
        {"scalar path", 2050, 1, {3000}, 0, 1, 0, 0, 0},
        {"FP32 rows, argmax over repeats", 2048, 1, {20000}, 0, 0, 1, 1, 5003},
        {"FP32 argmax, two segments", 2048, 2, {-2000, 700}, 2, 1, 1, 1, 977},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i], &dev, stream);
    cudaStreamDestroy(stream);
    if (g_failures) {
        printf("decode_gemv: %d failure(s)\n", g_failures);
        return 1;
    }
    printf("decode_gemv: OK\n");
    return 0;
}
