/* The router GEMV run as one thread-block cluster (hz_decode_router_cluster, cuda/model/decode_router.cu)
 * against the two kernels it replaces, the decode GEMV without its tail followed by hz_model_route
 * (suite 'gpu': needs a CUDA device that launches clusters, else it says so and passes nothing off as
 * checked: it exits 77, meson's "skipped").
 *
 * For router shapes that cover one row per block (8 experts: a cluster of 8 blocks with one row each),
 * OLMoE-1B-7B's 64 x 2048, rows that do not divide by the 8 blocks, several rows per warp (256), a
 * width that is not a multiple of 8 values (the scalar path), with and without the device row table,
 * top-k renormalised or not, with and without programmatic dependent launch, and with router rows repeated so
 * that the logits tie in groups (the top-k then rests on the lowest-id rule alone), the test checks that the
 * logits, h_out, x_out, the chosen ids, weights and row addresses are bit-identical, that the
 * accumulators were zeroed, and that the ids and weights are those the host's router (forward.c's
 * order: the K largest logits with ties to the lower id, then softmax) picks from the same logits. Inputs are fresh random values per shape; outputs start poisoned. It also
 * checks that bad arguments come back as HZ_EINVAL naming the router cluster, and a device without
 * clusters as HZ_EUNSUPPORTED. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/core.h"
#include "core/fp16.h"
#include "horizon/horizon.h"

#include "../../../cuda/model/decode_ops.cuh"
#include "../../../cuda/model/model_ops.cuh"
#include "../../test_fail.h"
#include "decode_test_dev.h"


static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float urand(void) { return test_urand(&g_rng); }

/* One run's outputs on the device (the two runs side by side). */
typedef struct {
    uint16_t *y, *h_out, *x_out;
    float *zero, *w_out;
    uint32_t *ids;
    const void **rows;
    void *tail;
} bufs;

static int dev_alloc(void **p, size_t n) {
    if (cudaMalloc(p, n) != cudaSuccess) {
        FAILF("cudaMalloc of %zu bytes", n);
        return 1;
    }
    return 0;
}

static void *dev_f16(uint32_t n, float scale, float base) {
    uint16_t *h = malloc((size_t)n * 2u);
    void *d = NULL;
    if (!h) return NULL;
    for (uint32_t i = 0; i < n; i++) h[i] = hz_f32_to_f16(base + scale * urand());
    if (!dev_alloc(&d, (size_t)n * 2u) && cudaMemcpy(d, h, (size_t)n * 2u, cudaMemcpyHostToDevice) != cudaSuccess)
        FAILF("cudaMemcpy");
    free(h);
    return d;
}

/* The router on the host from the device's FP16 logits, in forward.c's order: the K largest logits (ties
 * to the lower id), softmax in FP32 with the sum added in 32 lanes that meet by xor butterflies
 * (doc/numerics.md), the chosen experts' probabilities, optionally renormalised in rank order; ids
 * ascending with their weights (K <= 64). */
static void host_route(const uint16_t *lg, uint32_t E, uint32_t K, int norm, uint32_t *ids, float *w) {
    float mx = -INFINITY, p[256], sel[64], lanes[32] = {0}, next[32];
    uint32_t sid[64];
    for (uint32_t k = 0; k < K; k++) {
        uint32_t best = E;
        for (uint32_t e = 0; e < E; e++) {
            int taken = 0;
            for (uint32_t j = 0; j < k; j++) taken |= sid[j] == e;
            if (!taken && (best == E || hz_f16_to_f32(lg[e]) > hz_f16_to_f32(lg[best]))) best = e;
        }
        sid[k] = best;
    }
    for (uint32_t e = 0; e < E; e++) mx = fmaxf(mx, hz_f16_to_f32(lg[e]));
    for (uint32_t e = 0; e < E; e++) lanes[e % 32u] += p[e] = expf(hz_f16_to_f32(lg[e]) - mx);
    for (uint32_t d = 16; d > 0; d >>= 1) {
        for (uint32_t l = 0; l < 32; l++) next[l] = lanes[l] + lanes[l ^ d];
        memcpy(lanes, next, sizeof lanes);
    }
    for (uint32_t e = 0; e < E; e++) p[e] *= 1.0f / lanes[0];
    for (uint32_t k = 0; k < K; k++) sel[k] = p[sid[k]];
    if (norm) {
        float s = 0.0f;
        for (uint32_t k = 0; k < K; k++) s += sel[k];
        for (uint32_t k = 0; k < K; k++) sel[k] /= s;
    }
    for (uint32_t k = 0; k < K; k++) { /* by id, as the executor wants them */
        uint32_t at = 0;
        for (uint32_t j = 0; j < K; j++) at += sid[j] < sid[k];
        ids[at] = sid[k];
        w[at] = sel[k];
    }
}

typedef struct {
    uint32_t E, in, K;
    int table, norm_topk, pdl;
    uint32_t ties; /* > 0: router row e is row e % ties, so the logits tie in groups (exactly: same row, same adds) */
} shape;

/* Copies n bytes of two device buffers back and compares them; names the first difference. */
static int same(const char *what, const shape *sh, const void *a, const void *b, size_t n) {
    unsigned char *ha = malloc(n), *hb = malloc(n);
    int ok = ha && hb && cudaMemcpy(ha, a, n, cudaMemcpyDeviceToHost) == cudaSuccess &&
             cudaMemcpy(hb, b, n, cudaMemcpyDeviceToHost) == cudaSuccess;
    if (!ok) FAILF("E %u in %u: copying %s back", sh->E, sh->in, what);
    else if (memcmp(ha, hb, n) != 0) {
        size_t i = 0;
        while (ha[i] == hb[i]) i++;
        FAILF("E %u in %u top-%u table %d norm %d pdl %d: %s differs at byte %zu (%02x against %02x)", sh->E, sh->in,
              sh->K, sh->table, sh->norm_topk, sh->pdl, what, i, ha[i], hb[i]);
        ok = 0;
    }
    free(ha);
    free(hb);
    return ok;
}

static void check_shape(const shape *sh, const hz_decode_dev *dev, cudaStream_t stream) {
    const uint32_t E = sh->E, in = sh->in, K = sh->K;
    uint16_t *w = dev_f16(E * in, 8.0f / sqrtf((float)in), 0.0f);
    uint16_t *h_in = dev_f16(in, 1.0f, 0.0f), *dlt = dev_f16(in, 0.5f, 0.0f), *norm_w = dev_f16(in, 0.1f, 1.0f);
    const void **table_h = malloc(E * sizeof *table_h);
    bufs r[2] = {{0}};
    void *table = NULL;
    int ok = w && h_in && dlt && norm_w && table_h && !dev_alloc(&table, E * sizeof(void *));
    for (uint32_t e = sh->ties; ok && sh->ties && e < E; e++)
        ok = cudaMemcpy(w + (size_t)e * in, w + (size_t)(e % sh->ties) * in, in * 2u, cudaMemcpyDeviceToDevice) ==
             cudaSuccess;
    for (uint32_t e = 0; ok && e < E; e++) table_h[e] = (const void *)(uintptr_t)(0x10000u + 4096u * (e * 7u % E));
    if (ok) ok = cudaMemcpy(table, table_h, E * sizeof(void *), cudaMemcpyHostToDevice) == cudaSuccess;
    for (int k = 0; k < 2 && ok; k++) {
        ok = !dev_alloc((void **)&r[k].y, E * 2u) && !dev_alloc((void **)&r[k].h_out, in * 2u) &&
             !dev_alloc((void **)&r[k].x_out, in * 2u) && !dev_alloc((void **)&r[k].zero, in * 4u) &&
             !dev_alloc((void **)&r[k].w_out, K * 4u) && !dev_alloc((void **)&r[k].ids, K * 4u) &&
             !dev_alloc((void **)&r[k].rows, K * sizeof(void *)) &&
             !dev_alloc(&r[k].tail, hz_decode_tail_bytes(dev));
        /* poison: NaN halves and floats, ids past E; the tail scratch must start at zero */
        ok = ok && cudaMemset(r[k].y, 0xff, E * 2u) == cudaSuccess && cudaMemset(r[k].h_out, 0xff, in * 2u) == cudaSuccess &&
             cudaMemset(r[k].x_out, 0xff, in * 2u) == cudaSuccess && cudaMemset(r[k].zero, 0xff, in * 4u) == cudaSuccess &&
             cudaMemset(r[k].w_out, 0xff, K * 4u) == cudaSuccess && cudaMemset(r[k].ids, 0xff, K * 4u) == cudaSuccess &&
             cudaMemset(r[k].rows, 0xff, K * sizeof(void *)) == cudaSuccess &&
             cudaMemset(r[k].tail, 0, hz_decode_tail_bytes(dev)) == cudaSuccess;
    }
    if (!ok) {
        FAILF("E %u in %u: setting up", E, in);
        goto out;
    }
    hz_klaunch kl = {stream, sh->pdl};
    for (int k = 0; k < 2; k++) {
        hz_dgemv_args a;
        memset(&a, 0, sizeof a);
        a.seg[0] = (hz_mgemv_seg){w, NULL, r[k].y, E, 0};
        a.nseg = 1;
        a.in = in;
        a.x_mode = HZ_DGEMV_X_RESNORM;
        a.h_in = h_in;
        a.d = dlt;
        a.norm_w = norm_w;
        a.eps = 1e-5f;
        a.h_out = r[k].h_out;
        a.x_out = r[k].x_out;
        a.zero = r[k].zero;
        a.zero_n = in;
        a.tail = HZ_DGEMV_TAIL_ROUTE;
        a.top_k = K;
        a.norm_topk = sh->norm_topk;
        a.ids_out = r[k].ids;
        a.w_out = r[k].w_out;
        a.table = sh->table ? table : NULL;
        a.rows_out = sh->table ? r[k].rows : NULL;
        a.tail_scratch = r[k].tail;
        int st;
        if (k == 0) { /* the two kernels */
            a.tail = HZ_DGEMV_TAIL_NONE;
            st = hz_decode_gemv(&a, dev, &kl);
            if (!st)
                st = hz_model_route(r[k].y, E, K, sh->norm_topk, r[k].ids, r[k].w_out, a.table, a.rows_out, sh->pdl,
                                    stream);
        } else {
            st = hz_decode_router_cluster(&a, dev, &kl);
        }
        if (st) {
            FAILF("E %u in %u: %s: %s", E, in, k ? "router cluster" : "GEMV + route", hz_last_error_message());
            goto out;
        }
    }
    cudaError_t ce = cudaStreamSynchronize(stream);
    if (ce != cudaSuccess) {
        FAILF("E %u in %u: running: %s", E, in, cudaGetErrorString(ce));
        goto out;
    }
    ok = same("logits", sh, r[0].y, r[1].y, E * 2u) & same("h_out", sh, r[0].h_out, r[1].h_out, in * 2u) &
         same("x_out", sh, r[0].x_out, r[1].x_out, in * 2u) & same("ids", sh, r[0].ids, r[1].ids, K * 4u) &
         same("weights", sh, r[0].w_out, r[1].w_out, K * 4u) &
         (!sh->table || same("rows", sh, r[0].rows, r[1].rows, K * sizeof(void *)));
    float *z = malloc(in * 4u), *wk = malloc(K * 4u);
    uint32_t *ids = malloc(K * 4u);
    uint16_t *lg = malloc(E * 2u);
    if (z && ids && wk && lg && cudaMemcpy(z, r[1].zero, in * 4u, cudaMemcpyDeviceToHost) == cudaSuccess &&
        cudaMemcpy(ids, r[1].ids, K * 4u, cudaMemcpyDeviceToHost) == cudaSuccess &&
        cudaMemcpy(wk, r[1].w_out, K * 4u, cudaMemcpyDeviceToHost) == cudaSuccess &&
        cudaMemcpy(lg, r[1].y, E * 2u, cudaMemcpyDeviceToHost) == cudaSuccess) {
        for (uint32_t i = 0; i < in; i++)
            if (z[i] != 0.0f) {
                FAILF("E %u in %u: accumulator %u not zeroed (%g)", E, in, i, z[i]);
                ok = 0;
                break;
            }
        uint32_t want[64];
        float want_w[64];
        host_route(lg, E, K, sh->norm_topk, want, want_w);
        for (uint32_t k = 0; k < K; k++) /* the host's selection from the same logits */
            if (ids[k] != want[k] || !(fabsf(wk[k] - want_w[k]) <= 1e-6f * fabsf(want_w[k]))) {
                FAILF("E %u in %u: slot %u holds expert %u weight %.9g, the host chose %u weight %.9g", E, in, k,
                      ids[k], wk[k], want[k], want_w[k]);
                ok = 0;
                break;
            }
    } else {
        FAILF("E %u in %u: copying the accumulators back", E, in);
        ok = 0;
    }
    free(z);
    free(wk);
    free(ids);
    free(lg);
    if (ok)
        printf("router cluster: E %3u in %4u top-%u table %d norm %d pdl %d%s: logits, h, x, ids, weights%s "
               "bit-identical to GEMV + route\n",
               E, in, K, sh->table, sh->norm_topk, sh->pdl, sh->ties ? " (tied logits)" : "", sh->table ? ", rows" : "");
out:
    for (int k = 0; k < 2; k++) {
        cudaFree(r[k].y), cudaFree(r[k].h_out), cudaFree(r[k].x_out), cudaFree(r[k].zero);
        cudaFree(r[k].w_out), cudaFree(r[k].ids), cudaFree(r[k].rows), cudaFree(r[k].tail);
    }
    cudaFree(w), cudaFree(h_in), cudaFree(dlt), cudaFree(norm_w), cudaFree(table);
    free(table_h);
}

/* Bad arguments: HZ_EINVAL naming the router cluster; no clusters: HZ_EUNSUPPORTED. Nothing runs. */
static void check_refusals(const hz_decode_dev *dev, cudaStream_t stream) {
    static uint16_t dummy[16];
    hz_klaunch kl = {stream, 1};
    hz_dgemv_args good;
    memset(&good, 0, sizeof good);
    good.seg[0] = (hz_mgemv_seg){dummy, NULL, dummy, 8, 0};
    good.nseg = 1;
    good.in = 8;
    good.x_mode = HZ_DGEMV_X_RESNORM;
    good.h_in = dummy;
    good.norm_w = dummy;
    good.tail = HZ_DGEMV_TAIL_ROUTE;
    good.top_k = 2;
    good.ids_out = (uint32_t *)dummy;
    good.w_out = (float *)dummy;
    good.tail_scratch = dummy;
    hz_dgemv_args bad[5];
    const char *what[5] = {"two segments", "300 rows", "no router tail", "ready flags", "plain x"};
    for (int i = 0; i < 5; i++) bad[i] = good;
    bad[0].seg[1] = good.seg[0], bad[0].nseg = 2;
    bad[1].seg[0].rows = 300;
    bad[2].tail = HZ_DGEMV_TAIL_NONE;
    bad[3].ready = (uint32_t *)dummy, bad[3].step = (const hz_dstep *)dummy;
    bad[4].x_mode = HZ_DGEMV_X_PLAIN, bad[4].x = dummy;
    int all = 1;
    for (int i = 0; i < 5; i++) {
        int st = hz_decode_router_cluster(&bad[i], dev, &kl);
        if (st != HZ_EINVAL || !strstr(hz_last_error_message(), "router cluster")) {
            FAILF("router cluster with %s: %s (%s), expected HZ_EINVAL naming the router cluster", what[i],
                  hz_status_name(st), hz_last_error_message());
            all = 0;
        }
    }
    hz_decode_dev none = *dev;
    none.clusters = 0;
    int st = hz_decode_router_cluster(&good, &none, &kl);
    if (st != HZ_EUNSUPPORTED) {
        FAILF("router cluster without clusters: %s, expected HZ_EUNSUPPORTED", hz_status_name(st));
        all = 0;
    }
    if (all) printf("router cluster: bad arguments refused (HZ_EINVAL), no clusters refused (HZ_EUNSUPPORTED)\n");
}

/* The router cluster's one-warp routing (E <= 64) against the block routing it replaced, on crafted
 * FP16 logits: every logit tied, +0 against -0 (equal: the lower id wins), -inf entries, subnormals,
 * a few values repeated many times, distinct values; top-1, 2, 8 and all of them; with and without the
 * renormalisation. Both must write the same ids and weight bits, and agree with the host's router. */
static void craft(uint32_t kind, uint32_t E, uint32_t seed, uint16_t *lg) {
    uint32_t r = seed * 2654435761u + 12345u;
    for (uint32_t e = 0; e < E; e++) {
        r = r * 1664525u + 1013904223u;
        const float u = (float)(r >> 8) / 16777216.0f; /* [0, 1) */
        switch (kind) {
        case 0: lg[e] = 0x3c00u; break;                                          /* all 1.0 */
        case 1: lg[e] = (e % 2u) ? 0x8000u : 0x0000u; break;                     /* -0 and +0 */
        case 2: lg[e] = (e % 2u) ? hz_f32_to_f16(8.0f * u - 4.0f) : 0xfc00u; break; /* -inf and finite */
        case 3: lg[e] = (uint16_t)((e % 3u == 0 ? 0x8000u : 0u) | (1u + (r >> 28))); break; /* subnormals */
        case 4: lg[e] = hz_f32_to_f16((float)(r >> 29) * 0.25f - 1.0f); break;  /* eight values, repeated */
        default: lg[e] = hz_f32_to_f16(16.0f * u - 8.0f); break;                 /* mostly distinct */
        }
    }
    if (kind == 1) { /* a few larger ones, the rest tied at zero of either sign */
        lg[E - 1] = 0x3800u;
        lg[E / 2u] = 0x3800u;
        lg[1] = 0x3400u;
    }
}

static void check_crafted(cudaStream_t stream) {
    static const uint32_t Es[] = {8, 33, 60, 64};
    uint16_t *dlg = NULL;
    uint32_t *dids[2] = {NULL, NULL};
    float *dw[2] = {NULL, NULL};
    int ok = !dev_alloc((void **)&dlg, 64u * 2u);
    for (int v = 0; v < 2 && ok; v++) ok = !dev_alloc((void **)&dids[v], 64u * 4u) && !dev_alloc((void **)&dw[v], 64u * 4u);
    if (!ok) FAILF("crafted logits: device buffers");
    int runs = 0;
    for (uint32_t ei = 0; ok && ei < sizeof Es / sizeof Es[0]; ei++)
        for (uint32_t kind = 0; ok && kind < 6; kind++)
            for (uint32_t ki = 0; ok && ki < 4; ki++)
                for (int norm = 0; ok && norm < 2; norm++) {
                    const uint32_t E = Es[ei], K = ki == 3 ? E : (ki == 2 ? 8u : ki + 1u);
                    if (K > E) continue;
                    uint16_t lg[64];
                    craft(kind, E, ei * 7u + kind, lg);
                    uint32_t ids[2][64];
                    float w[2][64];
                    ok = cudaMemcpy(dlg, lg, E * 2u, cudaMemcpyHostToDevice) == cudaSuccess;
                    for (int v = 0; v < 2 && ok; v++) {
                        ok = cudaMemset(dids[v], 0xff, 64u * 4u) == cudaSuccess && cudaMemset(dw[v], 0xff, 64u * 4u) == cudaSuccess;
                        if (ok && hz_decode_route_logits(dlg, E, K, norm, v, dids[v], dw[v], stream) != HZ_OK) {
                            FAILF("crafted logits: %s", hz_last_error_message());
                            ok = 0;
                        }
                        ok = ok && cudaStreamSynchronize(stream) == cudaSuccess &&
                             cudaMemcpy(ids[v], dids[v], K * 4u, cudaMemcpyDeviceToHost) == cudaSuccess &&
                             cudaMemcpy(w[v], dw[v], K * 4u, cudaMemcpyDeviceToHost) == cudaSuccess;
                    }
                    if (!ok) {
                        FAILF("crafted logits: E %u kind %u: device call", E, kind);
                        break;
                    }
                    runs++;
                    if (memcmp(ids[0], ids[1], K * 4u) != 0 || memcmp(w[0], w[1], K * 4u) != 0) {
                        FAILF("crafted logits E %u kind %u top-%u norm %d: the warp and the block differ (first ids %u / %u, "
                              "weights %.9g / %.9g)", E, kind, K, norm, ids[1][0], ids[0][0], w[1][0], w[0][0]);
                        continue;
                    }
                    uint32_t want[64];
                    float want_w[64];
                    host_route(lg, E, K, norm, want, want_w);
                    for (uint32_t k = 0; k < K; k++)
                        if (ids[1][k] != want[k] || !(fabsf(w[1][k] - want_w[k]) <= 1e-6f * fabsf(want_w[k]))) {
                            FAILF("crafted logits E %u kind %u top-%u norm %d: slot %u holds expert %u weight %.9g, the host "
                                  "chose %u weight %.9g", E, kind, K, norm, k, ids[1][k], w[1][k], want[k], want_w[k]);
                            break;
                        }
                }
    if (ok && runs < 150) FAILF("crafted logits: only %d runs", runs);
    cudaFree(dlg);
    for (int v = 0; v < 2; v++) {
        cudaFree(dids[v]);
        cudaFree(dw[v]);
    }
    if (hz_decode_route_logits(dlg, 65, 8, 0, 1, dids[0], dw[0], stream) != HZ_EINVAL)
        FAILF("crafted logits: 65 experts for one warp were not refused");
}

int main(void) {
    cudaStream_t stream;
    hz_decode_dev dev;
    const int ready = decode_test_device("router_cluster", 4096, &stream, &dev);
    if (ready) return ready;
    if (!dev.clusters) {
        printf("router_cluster: this device or build cannot launch clusters: skipped\n");
        return 77;
    }
    static const shape shapes[] = {
        {8, 256, 2, 1, 0, 1, 0},    /* tiny OLMoE: 8 blocks of one row each */
        {64, 2048, 8, 1, 0, 1, 0},  /* OLMoE-1B-7B */
        {64, 2048, 8, 0, 1, 0, 0},  /* no table, renormalised, no PDL */
        {60, 2048, 4, 1, 0, 1, 0},  /* Qwen1.5-MoE's 60 experts: runs of 8, the last of 4 */
        {100, 1000, 6, 1, 1, 1, 0}, /* runs of 13; a width that leaves a partial batch */
        {256, 512, 8, 1, 0, 1, 0},  /* four rows per warp */
        {33, 2050, 3, 1, 0, 1, 0},  /* a width that is not a multiple of 8: the scalar path */
        {3, 64, 1, 0, 0, 0, 0},     /* fewer rows than 8: a cluster of 3 */
        /* tied logits (rows repeated): the K come from the best group, lowest ids first */
        {64, 2048, 8, 1, 0, 1, 3},  /* OLMoE: three values, 21 or 22 experts each */
        {60, 2048, 4, 0, 1, 1, 1},  /* all tied, renormalised: four equal weights */
        {33, 2050, 3, 1, 0, 1, 5},  /* the scalar sum (E not a multiple of 4) */
        {256, 512, 8, 1, 1, 1, 16}, /* sixteen experts per value */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i], &dev, stream);
    check_refusals(&dev, stream);
    check_crafted(stream);
    cudaStreamDestroy(stream);
    if (g_failures) {
        printf("router_cluster: %d failure(s)\n", g_failures);
        return 1;
    }
    printf("router_cluster: OK\n");
    return 0;
}
