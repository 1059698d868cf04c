/* GPU checks (suite 'gpu'; needs a CUDA device):
 *
 *  1. The cuda backend: allocations, copies across the two queues ordered by an event, event query /
 *     wait, mem_info, an allocation failure reported with the CUDA call in the message, and (with
 *     --lost, a separate run because it kills the CUDA context) a sticky error marking the device lost.
 *  2. The W4A16 executors against a CPU reference written from the numerics (w4a16_ref.c), on fresh
 *     random experts, activations and routing for every trial, with NaN-poisoned outputs and scratch
 *     before every launch: scalar and grouped, blob addresses from the host or from a device array,
 *     grouped (tensor-core and CUDA-core expansion) with and without programmatic dependent launch,
 *     and with an FP32 accumulator in/out.
 *
 * Tolerance. GPU and CPU compute the same quantities and differ only in the summation order inside
 * the dot products (and FMA contraction, tensor-core accumulation, expf within 2 ulp). Relative to
 * the sum of the magnitudes of the terms that is about sqrt(K) * 2^-24 (~3e-6) and below K * 2^-24 in
 * the worst case. Two roundings to FP16 follow, and they set the bounds:
 *  - a_i = fp16(silu(g) * u): a tiny difference can move a_i across a rounding boundary (1 ulp), and
 *    where g or u cancel to almost zero their relative error is large while the absolute one stays
 *    ~1e-6 of the typical magnitude. Bound: |a_gpu - a_ref| <= ulp16(a_ref) + 2^-13 * rms(a_ref).
 *  - out_j = fp16(s_j): 1 ulp from the final rounding, plus the pre-rounding difference, which is
 *    dominated by the a_i that moved by one FP16 ulp (2^-11 relative each, ~0.5% of them, summed
 *    through the down rows: measured ~1e-4 of rms(out)). Bound:
 *        |out_gpu - out_ref| <= ulp16(out_ref) + 2^-11 * rms(out_ref)       (2^-11 = 4.9e-4)
 *    i.e. one FP16 ulp of the value plus half an ulp of the typical magnitude; the FP32 accumulator
 *    (no final rounding) gets the same 2^-11 * rms term.
 * The test prints the worst ratio error / bound (must be <= 1), the max relative error (denominator
 * floored at rms/16 so values that cancel to ~0 stay meaningful) and the max distance in FP16 ulps.
 * A wrong nibble, scale, row or expert gives errors of order 1: ratios in the thousands.
 *
 * Environment: HZ_GPU_TEST_NO_FAULTS=1 skips the deliberate failures (used under compute-sanitizer,
 * which reports failed API calls even when they are intended); HZ_GPU_TEST_TRIALS=N sets the trials
 * per shape (fewer under the sanitizer); HZ_GPU_TEST_SEED=S changes the random seed (printed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "format/qpack.h"
#include "gpu_fault.cuh"
#include "w4a16_grouped.cuh"
#include "w4a16_ref.h"
#include "w4a16_scalar.cuh"

static int g_failures;

#define FAIL(...)                                                                                              \
    do {                                                                                                       \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                   \
        fprintf(stderr, __VA_ARGS__);                                                                          \
        fprintf(stderr, "\n");                                                                                 \
        g_failures++;                                                                                          \
    } while (0)

#define CUDA_OK(call)                                                                                          \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) {                                                                               \
            FAIL("%s: %s", #call, cudaGetErrorString(e_));                                                     \
            return -1;                                                                                         \
        }                                                                                                      \
    } while (0)

#define HZ_OK_(call)                                                                                           \
    do {                                                                                                       \
        int s_ = (call);                                                                                       \
        if (s_ != HZ_OK) {                                                                                     \
            FAIL("%s: %s: %s", #call, hz_status_name(s_), hz_last_error_message());                           \
            return -1;                                                                                         \
        }                                                                                                      \
    } while (0)

/* ---- random numbers (splitmix64; Box-Muller) ---------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static uint64_t rng_u64(void) {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng_u64() >> 11) * (1.0 / 9007199254740992.0); }
static float rng_normal(void) {
    double u1 = rng_unit(), u2 = rng_unit();
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---- backend checks ------------------------------------------------------------------------------- */

static int test_backend(int with_faults) {
    hz_backend *be = NULL;
    HZ_OK_(hz_backend_cuda_create(0, &be));
    int rc = 0;
    if (strcmp(be->name, "cuda:0") != 0 || strcmp(be->ops->kind, "cuda") != 0 ||
        be->ops->version != HZ_BACKEND_INTERFACE_VERSION)
        FAIL("backend identity: name '%s' kind '%s'", be->name, be->ops->kind);
    if (!be->ops->native_queue(be, HZ_QUEUE_COMPUTE) || !be->ops->native_queue(be, HZ_QUEUE_COPY) ||
        be->ops->native_queue(be, HZ_QUEUE_COMPUTE) == be->ops->native_queue(be, HZ_QUEUE_COPY))
        FAIL("native queues must be two distinct streams");

    const uint64_t bytes = 3u << 20;
    void *d0 = NULL, *d1 = NULL, *h0 = NULL, *h1 = NULL;
    hz_bevent *ev = NULL, *ev2 = NULL;
    if (be->ops->mem_alloc(be, bytes, &d0) || be->ops->mem_alloc(be, bytes, &d1) ||
        be->ops->pinned_alloc(be, bytes, &h0) || be->ops->pinned_alloc(be, bytes, &h1) ||
        be->ops->event_create(be, &ev) || be->ops->event_create(be, &ev2)) {
        FAIL("allocation: %s", hz_last_error_message());
        rc = -1;
        goto out;
    }
    for (uint64_t i = 0; i < bytes; i++) ((uint8_t *)h0)[i] = (uint8_t)(rng_u64() >> 56);
    memset(h1, 0, bytes);
    /* h0 -> d0 on the copy queue; the compute queue waits for it, then d0 -> d1 -> h1. */
    if (be->ops->copy_h2d(be, HZ_QUEUE_COPY, d0, h0, bytes) || be->ops->event_record(be, ev, HZ_QUEUE_COPY) ||
        be->ops->queue_wait_event(be, HZ_QUEUE_COMPUTE, ev) ||
        be->ops->copy_d2d(be, HZ_QUEUE_COMPUTE, d1, d0, bytes) ||
        be->ops->copy_d2h(be, HZ_QUEUE_COMPUTE, h1, d1, bytes) || be->ops->event_record(be, ev2, HZ_QUEUE_COMPUTE) ||
        be->ops->event_wait(be, ev2)) {
        FAIL("copy chain: %s", hz_last_error_message());
        rc = -1;
        goto out;
    }
    if (be->ops->event_query(be, ev2) != HZ_OK) FAIL("event_query after event_wait is not HZ_OK");
    if (memcmp(h0, h1, bytes) != 0) FAIL("h2d -> d2d -> d2h round trip changed the bytes");
    if (be->ops->memset(be, HZ_QUEUE_COPY, d0, 0x5a, bytes) || be->ops->queue_sync(be, HZ_QUEUE_COPY) ||
        be->ops->copy_d2h(be, HZ_QUEUE_COPY, h1, d0, bytes) || be->ops->queue_sync(be, HZ_QUEUE_COPY))
        FAIL("memset / queue_sync: %s", hz_last_error_message());
    else if (((uint8_t *)h1)[0] != 0x5a || ((uint8_t *)h1)[bytes - 1] != 0x5a)
        FAIL("memset did not reach the device buffer");
    uint64_t fr = 0, tot = 0;
    if (be->ops->mem_info(be, &fr, &tot) || tot == 0 || fr > tot)
        FAIL("mem_info: free %llu total %llu: %s", (unsigned long long)fr, (unsigned long long)tot,
             hz_last_error_message());
    else
        printf("backend: %s, %.1f GiB free of %.1f GiB\n", be->name, fr / 1073741824.0, tot / 1073741824.0);
    if (be->ops->copy_h2d(be, (hz_queue)7, d0, h0, 16) != HZ_EINVAL) FAIL("bad queue accepted");

    if (with_faults) {
        /* An allocation no device can satisfy: HZ_ENOMEM naming cudaMalloc; the device stays usable. */
        void *huge = NULL;
        int st = be->ops->mem_alloc(be, (uint64_t)1 << 52, &huge);
        if (st != HZ_ENOMEM || !strstr(hz_last_error_message(), "cudaMalloc") || huge)
            FAIL("huge mem_alloc: %s '%s'", hz_status_name(st), hz_last_error_message());
        else
            printf("backend: huge allocation refused as expected: %s\n", hz_last_error_message());
        if (be->ops->mem_info(be, &fr, &tot) != HZ_OK) FAIL("device unusable after a failed allocation");
    }
out:
    be->ops->event_destroy(be, ev);
    be->ops->event_destroy(be, ev2);
    be->ops->mem_free(be, d0);
    be->ops->mem_free(be, d1);
    be->ops->pinned_free(be, h0);
    be->ops->pinned_free(be, h1);
    be->ops->destroy(be);
    return rc;
}

/* A sticky error must mark the backend lost and make later calls fail fast. Kills the context. */
static int test_backend_lost(void) {
    hz_backend *be = NULL;
    HZ_OK_(hz_backend_cuda_create(0, &be));
    int e = hz_test_launch_illegal_write(be->ops->native_queue(be, HZ_QUEUE_COMPUTE));
    if (e != 0) FAIL("fault kernel launch error %d", e);
    int st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    printf("lost: queue_sync after the illegal write: %s '%s'\n", hz_status_name(st), hz_last_error_message());
    if (st != HZ_EDEVICE || !strstr(hz_last_error_message(), "cudaStreamSynchronize")) FAIL("sticky error not reported");
    void *p = NULL;
    st = be->ops->mem_alloc(be, 4096, &p);
    printf("lost: mem_alloc afterwards: %s '%s'\n", hz_status_name(st), hz_last_error_message());
    if (st != HZ_EDEVICE || !strstr(hz_last_error_message(), "lost")) FAIL("lost device not refused fast");
    be->ops->destroy(be); /* must not hang or abort on a dead context */
    return 0;
}

/* ---- executor checks ---------------------------------------------------------------------------- */

typedef struct shape_case {
    const char *name;
    uint32_t hidden, inter;
    uint32_t pool; /* experts materialised (the routed ones are drawn from these) */
    uint32_t n;    /* routed experts per token */
    int trials;
} shape_case;

static double ulp16(double v) {
    v = fabs(v);
    if (v < 6.103515625e-05) return 5.9604644775390625e-08; /* subnormal spacing */
    int ex;
    frexp(v, &ex); /* v = m * 2^ex, m in [0.5, 1) */
    return ldexp(1.0, ex - 11);
}

typedef struct err_stats {
    double ratio_y, ratio_a; /* worst |error| / bound (pass: <= 1) */
    double max_rel, max_ulp_y, max_ulp_a;
    uint64_t a_diff; /* intermediate values not bit-identical */
} err_stats;

static double rms16(const hz_f16 *v, uint64_t n) {
    double ss = 0;
    for (uint64_t i = 0; i < n; i++) {
        double r = hz_f16_to_f32(v[i]);
        ss += r * r;
    }
    return sqrt(ss / (double)n);
}

static void upd(double *worst, double v) {
    if (!(v <= *worst)) *worst = v; /* NaN-sticky */
}

static void compare(const hz_expert_layout *l, uint32_t n, const hz_f16 *y, const hz_f16 *yref, const hz_f16 *a,
                    const hz_f16 *aref, err_stats *st, int *bad) {
    const uint32_t H = l->hidden;
    const double rms_y = rms16(yref, H);
    memset(st, 0, sizeof *st);
    for (uint32_t j = 0; j < H; j++) {
        double g = hz_f16_to_f32(y[j]), r = hz_f16_to_f32(yref[j]);
        double d = isfinite(g) ? fabs(g - r) : INFINITY;
        upd(&st->ratio_y, d / (ulp16(r) + ldexp(rms_y, -11)));
        upd(&st->max_rel, d / fmax(fabs(r), rms_y / 16.0));
        upd(&st->max_ulp_y, d / ulp16(r));
    }
    if (a && aref) {
        const uint64_t na = (uint64_t)n * l->down.kp;
        const double rms_a = rms16(aref, na);
        for (uint64_t i = 0; i < na; i++) {
            if (a[i] == aref[i]) continue;
            st->a_diff++;
            double g = hz_f16_to_f32(a[i]), r = hz_f16_to_f32(aref[i]);
            double d = isfinite(g) ? fabs(g - r) : INFINITY;
            upd(&st->ratio_a, d / (ulp16(r) + ldexp(rms_a, -13)));
            upd(&st->max_ulp_a, d / ulp16(r));
        }
    }
    *bad = !(st->ratio_y <= 1.0) || !(st->ratio_a <= 1.0);
}

/* "grouped" variants without a suffix run the sm_90 bulk-copy path where the shape allows it (one
 * cooperative kernel); "-2pass" its two-kernel form; "-reg" forces the register-streaming tensor-core
 * kernels, "-cc" the CUDA-core ones. */
enum { V_SCALAR, V_SCALAR_DEV, V_GROUPED, V_GROUPED_PDL, V_GROUPED_DEV_PDL, V_GROUPED_ACC, V_GROUPED_CC,
       V_GROUPED_CC_PDL, V_GROUPED_REG, V_GROUPED_REG_PDL, V_GROUPED_2P_PDL, V_GROUPED_2P_DEV, V_GROUPED_2P_ACC_H,
       V_COUNT };
static const char *const kVariant[V_COUNT] = {"scalar",     "scalar/devptrs", "grouped",        "grouped/pdl",
                                              "grouped/devptrs/pdl", "grouped/acc", "grouped-cc",  "grouped-cc/pdl",
                                              "grouped-reg", "grouped-reg/pdl", "grouped-2pass/pdl",
                                              "grouped-2pass/devptrs", "grouped-2pass/acc/h"};

static int run_case(const shape_case *sc) {
    hz_expert_layout l;
    hz_expert_layout_init(&l, sc->hidden, sc->inter);
    const uint32_t H = sc->hidden, I = sc->inter, P = sc->pool, n = sc->n;
    const uint64_t bb = l.blob_bytes;
    printf("case %s: hidden %u inter %u (kp %u / %u), %u of %u experts, blob %llu bytes\n", sc->name, H, I,
           l.gate.kp, l.down.kp, n, P, (unsigned long long)bb);

    int rc = -1;
    uint8_t *hblobs = aligned_alloc(256, (size_t)(P * bb));
    float *wg = malloc(sizeof(float) * (size_t)I * H), *wu = malloc(sizeof(float) * (size_t)I * H);
    float *wd = malloc(sizeof(float) * (size_t)H * I);
    hz_f16 *x = malloc(2u * H), *y = malloc(2u * H), *yref = malloc(2u * H);
    hz_f16 *a = malloc(2u * (size_t)n * l.down.kp), *aref = malloc(2u * (size_t)n * l.down.kp);
    float *acc0 = malloc(4u * H), *accref = malloc(4u * H), *accg = malloc(4u * H);
    uint8_t *dpool = NULL, *dscratch = NULL;
    void *dx = NULL, *dy = NULL, *dw = NULL, *dptrs = NULL, *dacc = NULL, *dhin = NULL, *dhout = NULL;
    hz_f16 *hin = malloc(2u * H), *hout = malloc(2u * H);
    if (!hblobs || !wg || !wu || !wd || !x || !y || !yref || !a || !aref || !acc0 || !accref || !accg || !hin ||
        !hout) {
        FAIL("host allocation");
        goto out;
    }
    /* Experts: N(0, 1/K) weights so activations stay O(1); every expert gets one all-zero block (scale
     * 0) and one row 8x larger (a wide scale range) to exercise the edge cases. */
    for (uint32_t p = 0; p < P; p++) {
        const float sg = 1.0f / sqrtf((float)H), sd = 1.0f / sqrtf((float)I);
        for (uint64_t i = 0; i < (uint64_t)I * H; i++) {
            wg[i] = rng_normal() * sg;
            wu[i] = rng_normal() * sg;
            wd[i] = rng_normal() * sd;
        }
        uint32_t zr = (uint32_t)(rng_u64() % I), zb = (uint32_t)(rng_u64() % l.gate.nblocks);
        for (uint32_t k = zb * HZ_QBLOCK; k < H && k < (zb + 1) * HZ_QBLOCK; k++) wg[(uint64_t)zr * H + k] = 0.0f;
        uint32_t br = (uint32_t)(rng_u64() % H);
        for (uint32_t k = 0; k < I; k++) wd[(uint64_t)br * I + k] *= 8.0f;
        char what[64];
        snprintf(what, sizeof what, "%s expert %u", sc->name, p);
        int st = hz_expert_pack(&l, wg, wu, wd, hblobs + p * bb, what);
        if (st != HZ_OK) {
            FAIL("hz_expert_pack: %s", hz_last_error_message());
            goto out;
        }
    }
    const uint64_t scratch_bytes = hz_w4a16_scalar_scratch_bytes(&l, n) > hz_w4a16_grouped_scratch_bytes(&l, n)
                                       ? hz_w4a16_scalar_scratch_bytes(&l, n)
                                       : hz_w4a16_grouped_scratch_bytes(&l, n);
    cudaStream_t stream = NULL;
    if (cudaMalloc((void **)&dpool, P * bb) || cudaMalloc((void **)&dscratch, scratch_bytes) ||
        cudaMalloc(&dx, 2u * H) || cudaMalloc(&dy, 2u * H) || cudaMalloc(&dw, 4u * n) ||
        cudaMalloc(&dptrs, sizeof(void *) * n) || cudaMalloc(&dacc, 4u * H) || cudaMalloc(&dhin, 2u * H) ||
        cudaMalloc(&dhout, 2u * H) ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ||
        cudaMemcpy(dpool, hblobs, P * bb, cudaMemcpyHostToDevice)) {
        FAIL("device setup: %s", cudaGetErrorString(cudaGetLastError()));
        goto out;
    }

    err_stats worst[V_COUNT];
    memset(worst, 0, sizeof worst);
    for (int trial = 0; trial < sc->trials; trial++) {
        /* Fresh routing: n distinct experts in random order (the order is the summation order). */
        uint32_t ids[HZ_W4A16_MAX_EXPERTS];
        for (uint32_t e = 0; e < n; e++) {
            for (;;) {
                uint32_t c = (uint32_t)(rng_u64() % P), dup = 0;
                for (uint32_t f = 0; f < e; f++) dup |= ids[f] == c;
                if (!dup) {
                    ids[e] = c;
                    break;
                }
            }
        }
        float w[HZ_W4A16_MAX_EXPERTS], wsum = 0;
        for (uint32_t e = 0; e < n; e++) wsum += w[e] = 0.05f + (float)rng_unit();
        for (uint32_t e = 0; e < n; e++) w[e] /= wsum;
        for (uint32_t h = 0; h < H; h++) x[h] = hz_f32_to_f16(rng_normal());
        for (uint32_t h = 0; h < H; h++) acc0[h] = rng_normal();
        for (uint32_t h = 0; h < H; h++) hin[h] = hz_f32_to_f16(4.0f * rng_normal());

        const void *hptrs[HZ_W4A16_MAX_EXPERTS];
        const uint8_t *href[HZ_W4A16_MAX_EXPERTS];
        for (uint32_t e = 0; e < n; e++) {
            hptrs[e] = dpool + ids[e] * bb;
            href[e] = hblobs + ids[e] * bb;
        }
        memcpy(accref, acc0, 4u * H);
        if (hz_test_w4a16_ref(&l, n, href, w, x, aref, yref, NULL) != 0) {
            FAIL("reference out of memory");
            goto out;
        }
        hz_f16 *yref_acc = malloc(2u * H);
        if (!yref_acc || hz_test_w4a16_ref(&l, n, href, w, x, NULL, yref_acc, accref) != 0) {
            free(yref_acc);
            FAIL("reference out of memory");
            goto out;
        }
        if (cudaMemcpy(dx, x, 2u * H, cudaMemcpyHostToDevice) || cudaMemcpy(dw, w, 4u * n, cudaMemcpyHostToDevice) ||
            cudaMemcpy(dhin, hin, 2u * H, cudaMemcpyHostToDevice) ||
            cudaMemcpy(dptrs, hptrs, sizeof(void *) * n, cudaMemcpyHostToDevice)) {
            free(yref_acc);
            FAIL("input upload");
            goto out;
        }

        for (int v = 0; v < V_COUNT; v++) {
            hz_w4a16_args args;
            memset(&args, 0, sizeof args);
            args.layout = &l;
            args.n = n;
            int devptrs = v == V_SCALAR_DEV || v == V_GROUPED_DEV_PDL || v == V_GROUPED_2P_DEV || v == V_GROUPED_2P_ACC_H;
            const int with_acc = v == V_GROUPED_ACC || v == V_GROUPED_2P_ACC_H;
            args.blobs = devptrs ? NULL : hptrs;
            args.blobs_dev = devptrs ? (const void *const *)dptrs : NULL;
            args.weights = dw;
            args.x = dx;
            args.y = dy;
            args.acc = with_acc ? dacc : NULL;
            if (v == V_GROUPED_2P_ACC_H) { /* and h_out = fp16(h_in + fp16(acc)) */
                args.h_in = dhin;
                args.h_out = dhout;
            }
            args.scratch = dscratch;
            args.scratch_bytes = scratch_bytes;
            args.flags = (v == V_GROUPED_PDL || v == V_GROUPED_DEV_PDL || v == V_GROUPED_ACC || v == V_GROUPED_CC_PDL ||
                          v == V_GROUPED_REG_PDL || v == V_GROUPED_2P_PDL || v == V_GROUPED_2P_ACC_H)
                             ? HZ_W4A16_PDL
                             : 0;
            if (v == V_GROUPED_CC || v == V_GROUPED_CC_PDL) args.flags |= HZ_W4A16_CUDA_CORES;
            if (v == V_GROUPED_REG || v == V_GROUPED_REG_PDL) args.flags |= HZ_W4A16_NO_BULK;
            if (v == V_GROUPED_2P_PDL || v == V_GROUPED_2P_DEV || v == V_GROUPED_2P_ACC_H) args.flags |= HZ_W4A16_TWO_PASS;
            /* Poison: 0xFFFF is an FP16 NaN and 0xFFFFFFFF an FP32 NaN. */
            if (cudaMemsetAsync(dy, 0xff, 2u * H, stream) || cudaMemsetAsync(dscratch, 0xff, scratch_bytes, stream) ||
                cudaMemcpyAsync(dacc, acc0, 4u * H, cudaMemcpyHostToDevice, stream) ||
                cudaMemsetAsync(dhout, 0xff, 2u * H, stream)) {
                FAIL("poison");
                break;
            }
            int st = (v == V_SCALAR || v == V_SCALAR_DEV) ? hz_w4a16_scalar_launch(&args, stream)
                                                          : hz_w4a16_grouped_launch(&args, stream);
            if (st != HZ_OK) {
                FAIL("%s launch: %s", kVariant[v], hz_last_error_message());
                continue;
            }
            cudaError_t ce = cudaStreamSynchronize(stream);
            if (ce == cudaSuccess) ce = cudaMemcpy(y, dy, 2u * H, cudaMemcpyDeviceToHost);
            if (ce == cudaSuccess) ce = cudaMemcpy(a, dscratch, 2u * (size_t)n * l.down.kp, cudaMemcpyDeviceToHost);
            if (ce == cudaSuccess && with_acc) ce = cudaMemcpy(accg, dacc, 4u * H, cudaMemcpyDeviceToHost);
            if (ce == cudaSuccess) ce = cudaMemcpy(hout, dhout, 2u * H, cudaMemcpyDeviceToHost);
            if (ce != cudaSuccess) {
                FAIL("%s: %s", kVariant[v], cudaGetErrorString(ce));
                free(yref_acc);
                goto out;
            }
            err_stats es;
            int bad = 0;
            compare(&l, n, y, with_acc ? yref_acc : yref, a, aref, &es, &bad);
            if (with_acc) {
                /* The FP32 accumulator: |error| <= 2^-11 rms(ref) + 2^-20 |ref| (no final rounding). */
                double ss = 0, mx = 0;
                for (uint32_t j = 0; j < H; j++) ss += (double)accref[j] * accref[j];
                const double rms = sqrt(ss / H);
                for (uint32_t j = 0; j < H; j++)
                    upd(&mx, fabs((double)accg[j] - accref[j]) / (ldexp(rms, -11) + ldexp(fabs(accref[j]), -20)));
                if (!(mx <= 1.0)) {
                    bad = 1;
                    FAIL("%s %s trial %d: FP32 accumulator error/bound %.3g", sc->name, kVariant[v], trial, mx);
                }
            }
            /* h_out from the kernel's own sums, bit for bit; untouched (still poisoned) where not asked for */
            uint32_t hbad = 0;
            for (uint32_t j = 0; j < H; j++) {
                const uint16_t want = v == V_GROUPED_2P_ACC_H
                                          ? hz_f32_to_f16(hz_f16_to_f32(hin[j]) + hz_f16_to_f32(hz_f32_to_f16(accg[j])))
                                          : 0xffffu;
                if (hout[j] != want && hbad++ < 3)
                    FAIL("%s %s trial %d: h_out[%u] 0x%04x, expected 0x%04x", sc->name, kVariant[v], trial, j, hout[j],
                         want);
            }
            if (hbad) bad = 1;
            if (bad)
                FAIL("%s %s trial %d: error/bound %.3g (out), %.3g (intermediate); max rel err %.3g, max %.2f ulp; "
                     "intermediate: %llu differ, max %.2f ulp",
                     sc->name, kVariant[v], trial, es.ratio_y, es.ratio_a, es.max_rel, es.max_ulp_y,
                     (unsigned long long)es.a_diff, es.max_ulp_a);
            upd(&worst[v].ratio_y, es.ratio_y);
            upd(&worst[v].ratio_a, es.ratio_a);
            upd(&worst[v].max_rel, es.max_rel);
            upd(&worst[v].max_ulp_y, es.max_ulp_y);
            upd(&worst[v].max_ulp_a, es.max_ulp_a);
            if (es.a_diff > worst[v].a_diff) worst[v].a_diff = es.a_diff;
        }
        free(yref_acc);
    }
    for (int v = 0; v < V_COUNT; v++)
        printf("  %-22s error/bound %.3f (a: %.3f)  max rel err %.2e  max %.1f ulp  a: <= %llu of %llu differ, "
               "max %.1f ulp\n",
               kVariant[v], worst[v].ratio_y, worst[v].ratio_a, worst[v].max_rel, worst[v].max_ulp_y,
               (unsigned long long)worst[v].a_diff, (unsigned long long)n * I, worst[v].max_ulp_a);
    rc = 0;
out:
    if (stream) cudaStreamDestroy(stream);
    cudaFree(dpool);
    cudaFree(dscratch);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dw);
    cudaFree(dptrs);
    cudaFree(dacc);
    cudaFree(dhin);
    cudaFree(dhout);
    free(hin);
    free(hout);
    free(hblobs);
    free(wg);
    free(wu);
    free(wd);
    free(x);
    free(y);
    free(yref);
    free(a);
    free(aref);
    free(acc0);
    free(accref);
    free(accg);
    return rc;
}

static int test_bad_args(void) {
    hz_expert_layout l;
    hz_expert_layout_init(&l, 256, 256);
    hz_w4a16_args args;
    memset(&args, 0, sizeof args);
    args.layout = &l;
    args.n = 0;
    if (hz_w4a16_grouped_launch(&args, NULL) != HZ_EINVAL) FAIL("n = 0 accepted");
    args.n = HZ_W4A16_MAX_EXPERTS + 1;
    if (hz_w4a16_scalar_launch(&args, NULL) != HZ_EINVAL) FAIL("n > max accepted");
    hz_expert_layout big;
    hz_expert_layout_init(&big, 8192, 256);
    void *fake[1] = {(void *)(uintptr_t)4096};
    args.layout = &big;
    args.n = 1;
    args.blobs = (const void *const *)fake;
    args.weights = (const float *)(uintptr_t)4096;
    args.x = fake[0];
    args.y = fake[0];
    args.scratch = (void *)(uintptr_t)4096;
    args.scratch_bytes = 1u << 30;
    args.flags = HZ_W4A16_CUDA_CORES;
    if (hz_w4a16_grouped_launch(&args, NULL) != HZ_EUNSUPPORTED) FAIL("hidden 8192 accepted by grouped-cc");
    else printf("bad args: %s\n", hz_last_error_message());
    /* the residual add: only where the two-pass bulk down kernel runs, with h_in, a distinct h_out and
     * acc; refused before anything is queued (the pointers here are not device memory) */
    args.layout = &l;
    args.flags = 0;
    args.h_in = fake[0];
    args.h_out = (void *)(uintptr_t)8192;
    args.acc = (float *)(uintptr_t)4096;
    if (hz_w4a16_grouped_launch(&args, NULL) != HZ_EUNSUPPORTED) FAIL("h_out accepted on the fused path");
    args.flags = HZ_W4A16_TWO_PASS | HZ_W4A16_NO_BULK;
    if (hz_w4a16_grouped_launch(&args, NULL) != HZ_EUNSUPPORTED) FAIL("h_out accepted on the register path");
    args.flags = HZ_W4A16_TWO_PASS;
    if (hz_w4a16_grouped_hands_h(&l, 1, args.flags) != 1) FAIL("the bulk down kernel refuses one 256x256 expert");
    args.acc = NULL;
    if (hz_w4a16_grouped_launch(&args, NULL) != HZ_EINVAL) FAIL("h_out accepted without acc");
    args.acc = (float *)(uintptr_t)4096;
    args.h_in = NULL;
    if (hz_w4a16_grouped_launch(&args, NULL) != HZ_EINVAL) FAIL("h_out accepted without h_in");
    else printf("bad args: %s\n", hz_last_error_message());
    args.h_in = args.h_out;
    if (hz_w4a16_grouped_launch(&args, NULL) != HZ_EINVAL) FAIL("h_out accepted in place of h_in");
    /* two experts of inter 16,384 do not fit one bulk down block's shared memory: the register kernel
     * would run, which has no residual add */
    hz_expert_layout wide;
    hz_expert_layout_init(&wide, 256, 16384);
    void *fake2[2] = {fake[0], fake[0]};
    args.layout = &wide;
    args.n = 2;
    args.blobs = (const void *const *)fake2;
    args.h_in = fake[0];
    if (hz_w4a16_grouped_hands_h(&wide, 2, args.flags) != 0) FAIL("two 256x16384 experts said to fit the bulk down kernel");
    if (hz_w4a16_grouped_launch(&args, NULL) != HZ_EUNSUPPORTED) FAIL("h_out accepted where the bulk down kernel does not apply");
    else printf("bad args: %s\n", hz_last_error_message());
    return 0;
}

int main(int argc, char **argv) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "no CUDA device: the gpu suite needs one\n");
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "--lost") == 0) {
        test_backend_lost();
        printf("%s\n", g_failures ? "FAILED" : "OK");
        return g_failures ? 1 : 0;
    }
    const char *nf = getenv("HZ_GPU_TEST_NO_FAULTS");
    const int with_faults = !(nf && nf[0] == '1');
    const char *seed = getenv("HZ_GPU_TEST_SEED");
    g_rng = seed ? strtoull(seed, NULL, 0) : 0x5eed2026ull;
    printf("seed 0x%llx\n", (unsigned long long)g_rng);

    test_backend(with_faults);
    test_bad_args();
    const shape_case cases[] = {
        {"olmoe", 2048, 1024, 16, 8, 3},   /* 8 of 64 experts: all routed experts distinct blobs */
        {"qwen", 2048, 1408, 8, 4, 3},     /* down K 1408 padded to 1536 */
        {"tiny-odd", 320, 200, 5, 3, 4},   /* K not a multiple of 256 or 32 on either side */
        {"wide", 3000, 520, 6, 5, 2},      /* three chunks per lane in gate/up */
        {"many", 96, 40, 13, 11, 3},       /* more experts than warps per block in down */
        {"single", 512, 768, 2, 1, 3},     /* one expert: down splits rows across all warps */
        {"ragged", 1004, 300, 6, 4, 2},    /* down's last row tile 12 rows, gate_up's last 4 */
    };
    const char *tr = getenv("HZ_GPU_TEST_TRIALS");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        shape_case c = cases[i];
        if (tr && atoi(tr) > 0) c.trials = atoi(tr);
        run_case(&c);
    }
    printf("%s (%d failure%s)\n", g_failures ? "FAILED" : "OK", g_failures, g_failures == 1 ? "" : "s");
    return g_failures ? 1 : 0;
}
