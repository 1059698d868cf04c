/* hz-ceilings: the bandwidth ceilings the performance contract divides by (DESIGN.md section 6,
 * doc/bench.md), measured on the GPU in the same run as the benchmarks.
 *
 *   hz-ceilings [--device N] [--repeats 50] [--warmup 5] [--hbm-bytes 1073741824]
 *               [--host-bytes 536870912] [--threads 1,4,8,16] [--burst 8] [--json OUT.json|-] [--quick]
 *
 * Figures (GB/s = 1e9 bytes per second; every one a median over --repeats after --warmup untimed runs;
 * device work timed with CUDA events on one stream, host work with CLOCK_MONOTONIC):
 *   HBM copy       cudaMemcpyAsync device -> device of --hbm-bytes; reported as read + written bytes
 *                  over the time (2 x bytes / t, the convention of DEVICE.md) and as bytes copied / t.
 *   HBM read       a reduction kernel that reads --hbm-bytes once (16-byte loads) and sums its 32-bit
 *                  words; bytes / t. Three launch shapes are timed and the best median is the figure.
 *                  Every run's sum is checked against the host-computed sum of the pattern, so the
 *                  figure cannot come from a kernel that skipped loads.
 *   pinned H2D     cudaMemcpyAsync from cudaHostAlloc memory at one OLMoE expert blob (3,194,880 B),
 *                  one Qwen1.5-MoE blob (4,526,080 B) and 256 MiB: one copy between two events
 *                  ("single"), and --burst copies back to back from distinct slots ("burst", the shape
 *                  of a miss round). The 256 MiB copy is checked on the device against the host sum.
 *   pageable H2D   cudaMemcpy from malloc'ed memory, 256 MiB, wall time.
 *   host memcpy    malloc'ed (pageable) -> pinned, --host-bytes split over N threads (each a
 *                  contiguous part), wall time from the first thread's start to the last one's end;
 *                  the destination is compared with the source afterwards.
 *   staged round   the threaded transport's one-blob miss round without its bookkeeping: one expert
 *                  blob copied pageable -> pinned by --stage-threads polling threads (contiguous
 *                  pieces; default the transport's: 3/4 of the online CPUs, at most 12) into one of 8
 *                  rotating slots, with memcpy and with the library's streaming stores, then sent H2D;
 *                  copy (wall), H2D (events) and the round (their sum), each slot checked against
 *                  its source. The H2D after memcpy is slower: the device reads the blob out of the
 *                  writing cores' caches.
 *   pipelined      the staged round with streaming stores and the blob in 1, 2, 4 or 8 consecutive
 *                  parts, each part's H2D enqueued as soon as the threads have copied it (the
 *                  transport's piecewise H2D without its bookkeeping); wall time to the stream's end.
 *                  Then streams of 2, 4 and 8 blobs, one after the other: each blob's H2D is
 *                  enqueued as soon as it is in, while the threads copy the next one (a multi-blob
 *                  miss round without bookkeeping; the copies and the DMA share the host's memory).
 *
 * Exit status 0 when every measurement ran and every check passed; 1 otherwise, with a message that
 * names the failing CUDA call. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stdatomic.h>

#include <cjson/cJSON.h>
#include <cuda_runtime_api.h>

#include "../report_file.h"
#include "ceil_kernels.h"
#include "transact/transact.h" /* hz_txn_copy_streaming: the staging copies' routine */

#define CEIL_SCHEMA 1
#define MAX_REPEATS 100000u
#define MAX_THREAD_COUNTS 16u
#define MIB (UINT64_C(1) << 20)
#define H2D_LARGE_BYTES (256u * MIB)
#define PAGE_BYTES 4096u

/* ------------------------------------------------------------------------------------------------
 * Options and small helpers
 * ---------------------------------------------------------------------------------------------- */

typedef struct opts {
    int device;
    unsigned warmup, repeats, burst;
    uint64_t hbm_bytes, host_bytes;
    unsigned threads[MAX_THREAD_COUNTS], n_threads;
    unsigned stage_threads; /* staged round: copy threads (0 = the transport's default) */
    const char *json_path;
    int quick;
} opts;

static FILE *g_out; /* the table: stdout, or stderr when the JSON goes to stdout */

/* Every CUDA call goes through here: a failure prints the call's text and the error and makes the
 * caller return 1 (the program then exits 1; nothing is measured past a failure). */
static int ck(cudaError_t e, const char *call) {
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "hz-ceilings: %s failed: %s (%s)\n", call, cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
}
#define CK(call) ck((call), #call)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median, min and max of n > 0 timings in seconds (sorts v). */
typedef struct summary {
    double median_s, min_s, max_s;
    unsigned n;
} summary;

static summary summarize(double *v, unsigned n) {
    qsort(v, n, sizeof *v, cmp_double);
    summary s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1], n};
    return s;
}

static double gbps(uint64_t bytes, double seconds) { return seconds > 0 ? (double)bytes / seconds * 1e-9 : 0; }

/* {"median_s", "min_s", "max_s", "repeats", "gbps"}: the rate of `bytes` over the median. */
static cJSON *summary_json(summary s, uint64_t bytes) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "bytes", (double)bytes);
    cJSON_AddNumberToObject(o, "median_s", s.median_s);
    cJSON_AddNumberToObject(o, "min_s", s.min_s);
    cJSON_AddNumberToObject(o, "max_s", s.max_s);
    cJSON_AddNumberToObject(o, "repeats", s.n);
    cJSON_AddNumberToObject(o, "gbps", gbps(bytes, s.median_s));
    return o;
}

/* Sum (mod 2^64) of pattern words [0, n): what a correct read of a filled buffer must add up to. */
static unsigned long long pattern_sum(uint64_t n_words) {
    unsigned long long s = 0;
    for (uint64_t i = 0; i < n_words; i++) s += ceil_pattern_word(i);
    return s;
}

static void pattern_fill_host(uint32_t *p, uint64_t n_words) {
    for (uint64_t i = 0; i < n_words; i++) p[i] = ceil_pattern_word(i);
}

/* ------------------------------------------------------------------------------------------------
 * Device state shared by the measurements
 * ---------------------------------------------------------------------------------------------- */

typedef struct ceil_ctx {
    const opts *o;
    cudaStream_t stream;
    cudaEvent_t ev_a, ev_b;
    void *dev_src, *dev_dst;     /* hbm_bytes each; dev_src holds the pattern */
    unsigned long long *dev_sum; /* the reduction's accumulator */
    unsigned long long hbm_expect;
    unsigned char *pinned;       /* pinned_bytes, the pattern */
    uint64_t pinned_bytes;
    unsigned char *pageable;     /* host_bytes, the pattern, then the memcpy source */
    int sms;
} ceil_ctx;

/* Seconds between the two events around work already enqueued between them. */
static int event_seconds(ceil_ctx *c, double *out) {
    float ms = 0;
    if (CK(cudaEventSynchronize(c->ev_b)) || CK(cudaEventElapsedTime(&ms, c->ev_a, c->ev_b))) return 1;
    *out = (double)ms * 1e-3;
    return 0;
}

static int ctx_open(ceil_ctx *c, const opts *o) {
    memset(c, 0, sizeof *c);
    c->o = o;
    c->pinned_bytes = o->host_bytes > H2D_LARGE_BYTES ? o->host_bytes : H2D_LARGE_BYTES;
    if (CK(cudaSetDevice(o->device)) || CK(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, o->device)) ||
        CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) || CK(cudaEventCreate(&c->ev_a)) ||
        CK(cudaEventCreate(&c->ev_b)) || CK(cudaMalloc(&c->dev_src, o->hbm_bytes)) ||
        CK(cudaMalloc(&c->dev_dst, o->hbm_bytes)) || CK(cudaMalloc((void **)&c->dev_sum, sizeof *c->dev_sum)) ||
        CK(cudaHostAlloc((void **)&c->pinned, c->pinned_bytes, cudaHostAllocDefault)))
        return 1;
    if (!(c->pageable = malloc(o->host_bytes))) {
        fprintf(stderr, "hz-ceilings: out of host memory (%llu bytes)\n", (unsigned long long)o->host_bytes);
        return 1;
    }
    /* Every page touched and patterned before anything is timed. */
    pattern_fill_host((uint32_t *)c->pinned, c->pinned_bytes / 4);
    pattern_fill_host((uint32_t *)c->pageable, o->host_bytes / 4);
    if (CK(ceil_fill(c->dev_src, o->hbm_bytes / 4, c->stream)) ||
        CK(cudaMemsetAsync(c->dev_dst, 0xA5, o->hbm_bytes, c->stream)) || CK(cudaStreamSynchronize(c->stream)))
        return 1;
    c->hbm_expect = pattern_sum(o->hbm_bytes / 4);
    return 0;
}

static void ctx_close(ceil_ctx *c) {
    /* Teardown of a failed run: errors here add nothing to the one already printed. */
    if (c->stream) (void)cudaStreamSynchronize(c->stream);
    if (c->dev_src) (void)cudaFree(c->dev_src);
    if (c->dev_dst) (void)cudaFree(c->dev_dst);
    if (c->dev_sum) (void)cudaFree(c->dev_sum);
    if (c->pinned) (void)cudaFreeHost(c->pinned);
    if (c->ev_a) (void)cudaEventDestroy(c->ev_a);
    if (c->ev_b) (void)cudaEventDestroy(c->ev_b);
    if (c->stream) (void)cudaStreamDestroy(c->stream);
    free(c->pageable);
}

/* Runs the reduction over dev[0, bytes) and compares its result with `expect`. */
static int checked_sum(ceil_ctx *c, const void *dev, uint64_t bytes, unsigned blocks, unsigned threads,
                       unsigned long long expect, const char *what) {
    unsigned long long got = 0;
    if (CK(cudaMemsetAsync(c->dev_sum, 0, sizeof *c->dev_sum, c->stream)) ||
        CK(ceil_sum(dev, bytes, blocks, threads, c->dev_sum, c->stream)) ||
        CK(cudaMemcpyAsync(&got, c->dev_sum, sizeof got, cudaMemcpyDeviceToHost, c->stream)) ||
        CK(cudaStreamSynchronize(c->stream)))
        return 1;
    if (got != expect) {
        fprintf(stderr, "hz-ceilings: %s: device sum %llu != expected %llu (bytes not moved as claimed)\n", what, got,
                expect);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * HBM: device-to-device copy and read-only reduction
 * ---------------------------------------------------------------------------------------------- */

static int measure_d2d(ceil_ctx *c, double *t, cJSON *out) {
    const opts *o = c->o;
    for (unsigned r = 0; r < o->warmup + o->repeats; r++) {
        if (CK(cudaEventRecord(c->ev_a, c->stream)) ||
            CK(cudaMemcpyAsync(c->dev_dst, c->dev_src, o->hbm_bytes, cudaMemcpyDeviceToDevice, c->stream)) ||
            CK(cudaEventRecord(c->ev_b, c->stream)))
            return 1;
        double s;
        if (event_seconds(c, &s)) return 1;
        if (r >= o->warmup) t[r - o->warmup] = s;
    }
    /* The destination must now hold the pattern. */
    if (checked_sum(c, c->dev_dst, o->hbm_bytes, (unsigned)c->sms * 4u, 512u, c->hbm_expect, "D2D copy check"))
        return 1;
    summary s = summarize(t, o->repeats);
    cJSON *j = summary_json(s, o->hbm_bytes);
    if (!j) return 1;
    cJSON_AddNumberToObject(j, "gbps_read_plus_write", 2.0 * gbps(o->hbm_bytes, s.median_s));
    cJSON_AddBoolToObject(j, "verified", 1);
    cJSON_AddStringToObject(j, "definition",
                            "gbps = bytes copied / median time; gbps_read_plus_write = 2 x bytes / median time "
                            "(each byte is read once and written once)");
    cJSON_AddItemToObject(out, "d2d_copy", j);
    fprintf(g_out, "HBM D2D copy   %6.0f MiB  %8.1f us  %8.1f GB/s read+write (%.1f GB/s copied)\n",
            (double)o->hbm_bytes / MIB, s.median_s * 1e6, 2.0 * gbps(o->hbm_bytes, s.median_s),
            gbps(o->hbm_bytes, s.median_s));
    return 0;
}

/* One launch shape of the reduction: median over the repeats, every run's sum checked. */
static int measure_read_shape(ceil_ctx *c, unsigned blocks, unsigned threads, double *t, summary *res) {
    const opts *o = c->o;
    for (unsigned r = 0; r < o->warmup + o->repeats; r++) {
        unsigned long long got = 0;
        if (CK(cudaMemsetAsync(c->dev_sum, 0, sizeof *c->dev_sum, c->stream)) ||
            CK(cudaEventRecord(c->ev_a, c->stream)) ||
            CK(ceil_sum(c->dev_src, o->hbm_bytes, blocks, threads, c->dev_sum, c->stream)) ||
            CK(cudaEventRecord(c->ev_b, c->stream)))
            return 1;
        double s;
        if (event_seconds(c, &s) ||
            CK(cudaMemcpyAsync(&got, c->dev_sum, sizeof got, cudaMemcpyDeviceToHost, c->stream)) ||
            CK(cudaStreamSynchronize(c->stream)))
            return 1;
        if (got != c->hbm_expect) {
            fprintf(stderr, "hz-ceilings: read kernel (%u x %u): sum %llu != expected %llu\n", blocks, threads, got,
                    c->hbm_expect);
            return 1;
        }
        if (r >= o->warmup) t[r - o->warmup] = s;
    }
    *res = summarize(t, o->repeats);
    return 0;
}

static int measure_read(ceil_ctx *c, double *t, cJSON *out) {
    const opts *o = c->o;
    static const unsigned per_sm[] = {2, 4, 8};
    cJSON *j = cJSON_CreateObject(), *shapes = cJSON_CreateArray();
    if (!j || !shapes) {
        cJSON_Delete(j);
        cJSON_Delete(shapes);
        return 1;
    }
    cJSON_AddItemToObject(j, "shapes", shapes);
    cJSON_AddItemToObject(out, "read", j);
    summary best = {0, 0, 0, 0};
    unsigned best_blocks = 0;
    for (size_t i = 0; i < sizeof per_sm / sizeof per_sm[0]; i++) {
        unsigned blocks = (unsigned)c->sms * per_sm[i];
        summary s;
        if (measure_read_shape(c, blocks, 512u, t, &s)) return 1;
        cJSON *sj = summary_json(s, o->hbm_bytes);
        if (!sj) return 1;
        cJSON_AddNumberToObject(sj, "blocks", blocks);
        cJSON_AddNumberToObject(sj, "threads", 512);
        cJSON_AddItemToArray(shapes, sj);
        if (!best_blocks || s.median_s < best.median_s) {
            best = s;
            best_blocks = blocks;
        }
    }
    cJSON_AddNumberToObject(j, "bytes", (double)o->hbm_bytes);
    cJSON_AddNumberToObject(j, "median_s", best.median_s);
    cJSON_AddNumberToObject(j, "gbps", gbps(o->hbm_bytes, best.median_s));
    cJSON_AddNumberToObject(j, "best_blocks", best_blocks);
    cJSON_AddBoolToObject(j, "verified", 1);
    cJSON_AddStringToObject(j, "definition",
                            "bytes read once by a reduction kernel (16-byte loads, 32-bit words summed) / median "
                            "time; the best of the launch shapes listed; every run's sum equals the host's");
    fprintf(g_out, "HBM read       %6.0f MiB  %8.1f us  %8.1f GB/s read only (reduction, %u blocks x 512)\n",
            (double)o->hbm_bytes / MIB, best.median_s * 1e6, gbps(o->hbm_bytes, best.median_s), best_blocks);
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Host to device
 * ---------------------------------------------------------------------------------------------- */

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* `copies` H2D copies of `bytes` each between two events, from consecutive slots of the pinned buffer
 * (starting at slot `first`) to the same offsets of the device buffer. */
static int h2d_copies(ceil_ctx *c, uint64_t bytes, unsigned first, unsigned copies, double *out) {
    uint64_t stride = round_up(bytes, PAGE_BYTES);
    uint64_t slots = H2D_LARGE_BYTES / stride;
    if (CK(cudaEventRecord(c->ev_a, c->stream))) return 1;
    for (unsigned k = 0; k < copies; k++) {
        uint64_t off = ((first + k) % slots) * stride;
        if (CK(cudaMemcpyAsync((char *)c->dev_dst + off, c->pinned + off, bytes, cudaMemcpyHostToDevice, c->stream)))
            return 1;
    }
    return CK(cudaEventRecord(c->ev_b, c->stream)) || event_seconds(c, out);
}

static int measure_h2d_size(ceil_ctx *c, const char *label, uint64_t bytes, double *t, cJSON *arr) {
    const opts *o = c->o;
    cJSON *j = cJSON_CreateObject();
    if (!j) return 1;
    cJSON_AddItemToArray(arr, j);
    cJSON_AddStringToObject(j, "label", label);
    cJSON_AddNumberToObject(j, "bytes", (double)bytes);
    unsigned slots = (unsigned)(H2D_LARGE_BYTES / round_up(bytes, PAGE_BYTES));
    double best = 0;
    for (int burst = 0; burst < 2; burst++) {
        unsigned copies = burst ? o->burst : 1;
        if (burst && (copies < 2 || slots < copies)) continue; /* 256 MiB: one slot, no burst */
        for (unsigned r = 0; r < o->warmup + o->repeats; r++) {
            double s;
            if (h2d_copies(c, bytes, r * copies, copies, &s)) return 1;
            if (r >= o->warmup) t[r - o->warmup] = s;
        }
        summary s = summarize(t, o->repeats);
        cJSON *sj = summary_json(s, bytes * copies);
        if (!sj) return 1;
        cJSON_AddNumberToObject(sj, "copies", copies);
        cJSON_AddItemToObject(j, burst ? "burst" : "single", sj);
        double g = gbps(bytes * copies, s.median_s);
        if (g > best) best = g;
        fprintf(g_out, "pinned H2D     %-14s %10llu B x %-2u %8.1f us  %8.1f GB/s\n", label, (unsigned long long)bytes,
                copies, s.median_s * 1e6, g);
    }
    cJSON_AddNumberToObject(j, "gbps", best);
    return 0;
}

static int measure_h2d(ceil_ctx *c, double *t, cJSON *root) {
    static const struct {
        const char *label;
        uint64_t bytes;
    } sizes[] = {{"olmoe_expert", 3194880u}, {"qwen_expert", 4526080u}, {"256MiB", H2D_LARGE_BYTES}};
    cJSON *arr = cJSON_AddArrayToObject(root, "h2d_pinned");
    if (!arr) return 1;
    /* The D2D check left the pattern in dev_dst: clear it, so the check below sees only H2D bytes. */
    if (CK(cudaMemsetAsync(c->dev_dst, 0, H2D_LARGE_BYTES, c->stream)) || CK(cudaStreamSynchronize(c->stream)))
        return 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (measure_h2d_size(c, sizes[i].label, sizes[i].bytes, t, arr)) return 1;
    /* The last 256 MiB copy landed at offset 0: it must hold the pattern's first 256 MiB. */
    if (checked_sum(c, c->dev_dst, H2D_LARGE_BYTES, (unsigned)c->sms * 4u, 512u, pattern_sum(H2D_LARGE_BYTES / 4),
                    "pinned H2D check"))
        return 1;
    cJSON_AddStringToObject(root, "h2d_pinned_definition",
                            "cudaMemcpyAsync from cudaHostAlloc memory on one stream; single = one copy between two "
                            "events, burst = that many copies of distinct slots back to back (a miss round's shape); "
                            "gbps = the better of the two medians; the 256 MiB copy is checked on the device");
    return 0;
}

static int measure_pageable_h2d(ceil_ctx *c, double *t, cJSON *root) {
    const opts *o = c->o;
    uint64_t bytes = o->host_bytes < H2D_LARGE_BYTES ? o->host_bytes : H2D_LARGE_BYTES;
    unsigned reps = o->repeats < 10 ? o->repeats : 10; /* each run is tens of ms */
    for (unsigned r = 0; r < 2 + reps; r++) {
        double t0 = now_s();
        if (CK(cudaMemcpy(c->dev_dst, c->pageable, bytes, cudaMemcpyHostToDevice))) return 1;
        if (r >= 2) t[r - 2] = now_s() - t0;
    }
    summary s = summarize(t, reps);
    cJSON *j = summary_json(s, bytes);
    if (!j) return 1;
    cJSON_AddStringToObject(j, "definition", "synchronous cudaMemcpy from malloc'ed memory, wall time");
    cJSON_AddItemToObject(root, "h2d_pageable", j);
    fprintf(g_out, "pageable H2D   %6.0f MiB  %8.1f us  %8.1f GB/s\n", (double)bytes / MIB, s.median_s * 1e6,
            gbps(bytes, s.median_s));
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Host memcpy pageable -> pinned on N threads
 * ---------------------------------------------------------------------------------------------- */

/* Workers wait here until every thread exists (state 1) or the run is abandoned (state -1), so thread
 * creation is not timed and a failed creation never leaves a worker waiting forever. */
typedef struct start_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;
} start_gate;

typedef struct copy_part {
    const unsigned char *src;
    unsigned char *dst;
    size_t n;
    start_gate *gate;
    double t0, t1;
} copy_part;

static void *copy_worker(void *arg) {
    copy_part *p = arg;
    pthread_mutex_lock(&p->gate->mu);
    while (p->gate->state == 0) pthread_cond_wait(&p->gate->cv, &p->gate->mu);
    int go = p->gate->state > 0;
    pthread_mutex_unlock(&p->gate->mu);
    if (!go) return NULL;
    p->t0 = now_s();
    memcpy(p->dst, p->src, p->n);
    p->t1 = now_s();
    return NULL;
}

static void gate_open(start_gate *g, int state) {
    pthread_mutex_lock(&g->mu);
    g->state = state;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Copies bytes with `threads` threads (parts page-aligned, contiguous); *out = last end - first start. */
static int threaded_copy(ceil_ctx *c, uint64_t bytes, unsigned threads, double *out) {
    copy_part parts[256];
    pthread_t tid[256];
    start_gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    uint64_t per = round_up((bytes + threads - 1) / threads, PAGE_BYTES);
    unsigned started = 0;
    int rc = 0;
    for (unsigned i = 0; i < threads; i++) {
        uint64_t lo = (uint64_t)i * per, hi = lo + per < bytes ? lo + per : bytes;
        if (lo > bytes) lo = hi = bytes;
        parts[i] = (copy_part){c->pageable + lo, c->pinned + lo, (size_t)(hi - lo), &gate, 0, 0};
        int e = pthread_create(&tid[i], NULL, copy_worker, &parts[i]);
        if (e) {
            fprintf(stderr, "hz-ceilings: pthread_create failed: %s\n", strerror(e));
            rc = 1;
            break;
        }
        started++;
    }
    gate_open(&gate, rc ? -1 : 1);
    for (unsigned i = 0; i < started; i++) pthread_join(tid[i], NULL);
    if (rc) return 1;
    double first = parts[0].t0, last = parts[0].t1;
    for (unsigned i = 1; i < threads; i++) {
        if (parts[i].t0 < first) first = parts[i].t0;
        if (parts[i].t1 > last) last = parts[i].t1;
    }
    *out = last - first;
    return 0;
}

static int measure_host_memcpy(ceil_ctx *c, double *t, cJSON *root) {
    const opts *o = c->o;
    cJSON *arr = cJSON_AddArrayToObject(root, "host_memcpy_pageable_to_pinned");
    if (!arr) return 1;
    unsigned reps = o->repeats < 10 ? o->repeats : 10;
    for (unsigned k = 0; k < o->n_threads; k++) {
        unsigned n = o->threads[k];
        memset(c->pinned, 0, o->host_bytes); /* so the comparison below sees this run's copies */
        for (unsigned r = 0; r < 1 + reps; r++) {
            double s;
            if (threaded_copy(c, o->host_bytes, n, &s)) return 1;
            if (r >= 1) t[r - 1] = s;
        }
        if (memcmp(c->pinned, c->pageable, o->host_bytes) != 0) {
            fprintf(stderr, "hz-ceilings: host memcpy with %u threads: destination differs from source\n", n);
            return 1;
        }
        summary s = summarize(t, reps);
        cJSON *j = summary_json(s, o->host_bytes);
        if (!j) return 1;
        cJSON_AddNumberToObject(j, "threads", n);
        cJSON_AddItemToArray(arr, j);
        fprintf(g_out, "host memcpy    %6.0f MiB  %2u threads %8.1f us  %8.1f GB/s\n", (double)o->host_bytes / MIB, n,
                s.median_s * 1e6, gbps(o->host_bytes, s.median_s));
    }
    cJSON_AddStringToObject(root, "host_memcpy_definition",
                            "memcpy from malloc'ed (pageable, pre-touched) to cudaHostAlloc memory, the bytes split "
                            "in page-aligned contiguous parts, one per thread; wall time from the first thread's "
                            "start to the last one's end (thread creation excluded: the threads wait at a start gate); checked by memcmp");
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Staged round: one blob copied pageable -> pinned by polling threads, then sent H2D
 * ---------------------------------------------------------------------------------------------- */

#define STAGE_SLOTS 8u
#define STAGE_MAX_THREADS 64u
#define STAGE_MAX_WAVES 64u

/* Threads that poll for a new round (gen) and copy their contiguous piece of it, as the transport's
 * copy threads do between the rounds of a decode. The blob is copied in `waves` consecutive parts, each
 * split over the threads, and wave_done[w] counts the threads done with part w (one part for the
 * staged round; several for the pipelined one, whose H2D of a part starts as soon as it is in). */
typedef struct stage_pool {
    pthread_t tid[STAGE_MAX_THREADS];
    unsigned n, started;
    _Atomic unsigned gen, done;
    _Atomic unsigned wave_done[STAGE_MAX_WAVES];
    _Atomic int stop;
    const unsigned char *src;
    unsigned char *dst;
    size_t len;
    unsigned waves;
    int streaming;
} stage_pool;

/* Part w of a round's blob: [*from, *to), 64-byte aligned; empty past the end. */
static void stage_wave(const stage_pool *p, unsigned w, size_t *from, size_t *to) {
    const size_t part = ((p->len + p->waves - 1) / p->waves + 63u) & ~(size_t)63u;
    *from = (size_t)w * part < p->len ? (size_t)w * part : p->len;
    *to = *from + part < p->len ? *from + part : p->len;
}

typedef struct stage_arg {
    stage_pool *pool;
    unsigned index;
} stage_arg;

static void *stage_worker(void *arg) {
    const stage_arg *a = arg;
    stage_pool *p = a->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
        seen = g;
        for (unsigned w = 0; w < p->waves; w++) {
            size_t from, to;
            stage_wave(p, w, &from, &to);
            const size_t piece = ((to - from + p->n - 1) / p->n + 63u) & ~(size_t)63u;
            const size_t off = from + (size_t)a->index * piece;
            if (off < to) {
                const size_t n = off + piece > to ? to - off : piece;
                if (p->streaming) (void)hz_txn_copy_streaming(p->dst + off, p->src + off, n, 0);
                else memcpy(p->dst + off, p->src + off, n);
            }
            atomic_fetch_add_explicit(&p->wave_done[w], 1u, memory_order_acq_rel);
        }
        atomic_fetch_add_explicit(&p->done, 1u, memory_order_acq_rel);
    }
}

/* Starts a round of `waves` parts; the threads begin at once. */
static void stage_start(stage_pool *p, unsigned char *dst, const unsigned char *src, size_t len, unsigned waves) {
    p->dst = dst;
    p->src = src;
    p->len = len;
    p->waves = waves;
    atomic_store_explicit(&p->done, 0u, memory_order_relaxed);
    for (unsigned w = 0; w < STAGE_MAX_WAVES; w++) atomic_store_explicit(&p->wave_done[w], 0u, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1u, memory_order_acq_rel);
}

/* Waits until every thread has finished the round. */
static void stage_wait(stage_pool *p) {
    while (atomic_load_explicit(&p->done, memory_order_acquire) < p->n) {
    }
}

/* One round's copy in one part: returns when every thread has copied its piece. */
static void stage_copy_round(stage_pool *p, unsigned char *dst, const unsigned char *src, size_t len) {
    stage_start(p, dst, src, len, 1);
    stage_wait(p);
}

static void stage_pool_stop(stage_pool *p) {
    atomic_store(&p->stop, 1);
    for (unsigned i = 0; i < p->started; i++) pthread_join(p->tid[i], NULL);
}

/* Round r's pinned slot (8 rotating ones, as the transport's staging slots) and source blob (walking
 * through --host-bytes, so that it is not in the CPU's caches). */
static void stage_buffers(const ceil_ctx *c, unsigned r, uint64_t bytes, unsigned char **slot,
                          const unsigned char **src) {
    *slot = c->pinned + (r % STAGE_SLOTS) * bytes;
    *src = c->pageable + (r % (c->o->host_bytes / bytes)) * bytes;
}

static int measure_staged_size(ceil_ctx *c, stage_pool *pool, const char *label, uint64_t bytes, int streaming,
                               double *t, cJSON *arr) {
    const opts *o = c->o;
    if (bytes * STAGE_SLOTS > c->pinned_bytes || bytes * 2u > o->host_bytes) {
        fprintf(stderr, "hz-ceilings: staged round %s: %llu-byte blobs need --host-bytes of at least %llu\n", label,
                (unsigned long long)bytes, (unsigned long long)(bytes * STAGE_SLOTS));
        return 1;
    }
    pool->streaming = streaming;
    const unsigned reps = o->repeats;
    double *tc = calloc(reps, sizeof *tc), *th = calloc(reps, sizeof *th);
    if (!tc || !th) {
        free(tc);
        free(th);
        fprintf(stderr, "hz-ceilings: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (unsigned r = 0; r < o->warmup + reps && !rc; r++) {
        unsigned char *slot;
        const unsigned char *src;
        stage_buffers(c, r, bytes, &slot, &src);
        const double t0 = now_s();
        stage_copy_round(pool, slot, src, (size_t)bytes);
        const double t1 = now_s();
        double h = 0;
        rc = CK(cudaEventRecord(c->ev_a, c->stream)) ||
             CK(cudaMemcpyAsync(c->dev_dst, slot, (size_t)bytes, cudaMemcpyHostToDevice, c->stream)) ||
             CK(cudaEventRecord(c->ev_b, c->stream)) || event_seconds(c, &h);
        if (!rc && memcmp(slot, src, (size_t)bytes) != 0) {
            fprintf(stderr, "hz-ceilings: staged round %s: slot differs from its source\n", label);
            rc = 1;
        }
        if (r >= o->warmup) {
            tc[r - o->warmup] = t1 - t0;
            th[r - o->warmup] = h;
            t[r - o->warmup] = (t1 - t0) + h;
        }
    }
    if (!rc) {
        summary sc = summarize(tc, reps), sh = summarize(th, reps), sr = summarize(t, reps);
        cJSON *j = cJSON_CreateObject();
        char stores[64];
        if (streaming) snprintf(stores, sizeof stores, "streaming (%d-byte stores)", hz_txn_streaming_width());
        else snprintf(stores, sizeof stores, "memcpy");
        rc = !j;
        if (j) {
            cJSON_AddStringToObject(j, "label", label);
            cJSON_AddNumberToObject(j, "bytes", (double)bytes);
            cJSON_AddNumberToObject(j, "threads", pool->n);
            cJSON_AddStringToObject(j, "stores", stores);
            cJSON_AddItemToObject(j, "copy", summary_json(sc, bytes));
            cJSON_AddItemToObject(j, "h2d", summary_json(sh, bytes));
            cJSON_AddItemToObject(j, "round", summary_json(sr, bytes));
            cJSON_AddNumberToObject(j, "gbps", gbps(bytes, sr.median_s));
            cJSON_AddItemToArray(arr, j);
            fprintf(g_out, "staged round   %-14s %9llu B %2u threads %-28s copy %7.1f us, H2D %7.1f us: %6.1f GB/s\n",
                    label, (unsigned long long)bytes, pool->n, stores, sc.median_s * 1e6, sh.median_s * 1e6,
                    gbps(bytes, sr.median_s));
        }
    }
    free(tc);
    free(th);
    return rc;
}

/* The pipelined round: `blobs` expert blobs back to back, each in `waves` parts; the H2D of each part is
 * enqueued as soon as every thread has copied its piece of it, so the copy of the next part overlaps
 * it. Wall time from the round's start to the stream's completion, which is what a miss round of
 * `blobs` blobs with piecewise H2D (waves > 1) or per-blob H2D (waves 1) pays at best. Streaming
 * stores. The blobs lie one after the other in the pinned buffer and in the source. */
static int measure_pipelined_size(ceil_ctx *c, stage_pool *pool, const char *label, uint64_t bytes, unsigned blobs,
                                  unsigned waves, double *t, cJSON *arr) {
    const opts *o = c->o;
    const uint64_t total = bytes * blobs, sources = o->host_bytes / bytes;
    if (blobs * waves > STAGE_MAX_WAVES || total > c->pinned_bytes || total > o->hbm_bytes || sources < 2u * blobs) {
        fprintf(stderr, "hz-ceilings: pipelined round %s x %u: needs --host-bytes and --hbm-bytes of at least %llu\n",
                label, blobs, (unsigned long long)(2u * total));
        return 1;
    }
    pool->streaming = 1;
    const unsigned reps = o->repeats;
    int rc = 0;
    for (unsigned r = 0; r < o->warmup + reps && !rc; r++) {
        /* two staging areas in turn where they fit, as the transport rotates its slots */
        unsigned char *slot = c->pinned + (2u * total <= c->pinned_bytes ? (r % 2u) * total : 0u);
        const unsigned char *src = c->pageable + ((uint64_t)r * blobs % (sources - blobs)) * bytes;
        const double t0 = now_s();
        stage_start(pool, slot, src, (size_t)total, blobs * waves);
        for (unsigned w = 0; w < blobs * waves && !rc; w++) {
            size_t from, to;
            stage_wave(pool, w, &from, &to);
            while (atomic_load_explicit(&pool->wave_done[w], memory_order_acquire) < pool->n) {
            }
            if (to > from)
                rc = CK(cudaMemcpyAsync((unsigned char *)c->dev_dst + from, slot + from, to - from,
                                        cudaMemcpyHostToDevice, c->stream));
        }
        if (!rc) rc = CK(cudaStreamSynchronize(c->stream));
        const double t1 = now_s();
        stage_wait(pool);
        if (!rc && memcmp(slot, src, (size_t)total) != 0) {
            fprintf(stderr, "hz-ceilings: pipelined round %s x %u: staging differs from its source\n", label, blobs);
            rc = 1;
        }
        if (r >= o->warmup) t[r - o->warmup] = t1 - t0;
    }
    if (rc) return rc;
    summary sr = summarize(t, reps);
    cJSON *j = cJSON_CreateObject();
    if (!j) return 1;
    cJSON_AddStringToObject(j, "label", label);
    cJSON_AddNumberToObject(j, "bytes", (double)total);
    cJSON_AddNumberToObject(j, "blobs", blobs);
    cJSON_AddNumberToObject(j, "threads", pool->n);
    cJSON_AddNumberToObject(j, "waves", waves);
    cJSON_AddItemToObject(j, "round", summary_json(sr, total));
    cJSON_AddNumberToObject(j, "gbps", gbps(total, sr.median_s));
    cJSON_AddItemToArray(arr, j);
    fprintf(g_out, "pipelined round %-13s x %u %9llu B %2u threads %u waves  round %7.1f us: %6.1f GB/s\n", label,
            blobs, (unsigned long long)total, pool->n, waves, sr.median_s * 1e6, gbps(total, sr.median_s));
    return 0;
}

static int measure_staged(ceil_ctx *c, double *t, cJSON *root) {
    const opts *o = c->o;
    cJSON *arr = cJSON_AddArrayToObject(root, "staged_round");
    if (!arr) return 1;
    stage_pool pool;
    memset(&pool, 0, sizeof pool);
    stage_arg args[STAGE_MAX_THREADS];
    pool.n = o->stage_threads ? o->stage_threads : hz_txn_default_threads();
    int rc = 0;
    for (unsigned i = 0; i < pool.n && !rc; i++) {
        args[i] = (stage_arg){&pool, i};
        int e = pthread_create(&pool.tid[i], NULL, stage_worker, &args[i]);
        if (e) {
            fprintf(stderr, "hz-ceilings: pthread_create failed: %s\n", strerror(e));
            rc = 1;
        } else {
            pool.started++;
        }
    }
    if (!rc) {
        pool.n = pool.started;
        static const struct {
            const char *label;
            uint64_t bytes;
        } sizes[] = {{"olmoe_expert", 3194880u}, {"qwen_expert", 4526080u}};
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes && !rc; i++)
            for (int streaming = 0; streaming < 2 && !rc; streaming++)
                rc = measure_staged_size(c, &pool, sizes[i].label, sizes[i].bytes, streaming, t, arr);
        cJSON *pipe = cJSON_AddArrayToObject(root, "staged_pipelined");
        if (!pipe) rc = 1;
        /* One blob in 1-8 parts (piecewise H2D), then 2-8 blobs sent whole (a multi-blob round). */
        static const struct {
            unsigned blobs, waves;
        } shapes[] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 1}, {4, 1}, {8, 1}};
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes && !rc; i++)
            for (size_t w = 0; w < sizeof shapes / sizeof *shapes && !rc; w++)
                rc = measure_pipelined_size(c, &pool, sizes[i].label, sizes[i].bytes, shapes[w].blobs,
                                            shapes[w].waves, t, pipe);
    }
    stage_pool_stop(&pool);
    cJSON_AddStringToObject(root, "staged_round_definition",
                            "one expert blob per round copied from malloc'ed memory (walking through --host-bytes) "
                            "into one of 8 rotating cudaHostAlloc slots by `threads` threads that poll between "
                            "rounds, each a contiguous piece, with memcpy or with the library's streaming "
                            "stores (hz_txn_copy_streaming); then one cudaMemcpyAsync H2D of the slot between "
                            "two events. copy: wall time; h2d: event time; round = copy + h2d, the one-blob "
                            "miss round of the threaded transport without its bookkeeping. Each slot is "
                            "compared with its source");
    cJSON_AddStringToObject(root, "staged_pipelined_definition",
                            "the staged round with streaming stores for `blobs` blobs back to back, each copied "
                            "in `waves` consecutive parts (each split over the threads) and the H2D of each part "
                            "enqueued as soon as it is in, so copies and H2D overlap; wall time from the round's "
                            "start to the stream's completion: a miss round of `blobs` blobs of the threaded "
                            "transport (piecewise H2D when waves > 1) without its bookkeeping. blobs 1, waves 1 "
                            "is the staged round timed the same way; bytes are all the round's blobs");
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Report
 * ---------------------------------------------------------------------------------------------- */

static int device_json(const opts *o, cJSON *root) {
    struct cudaDeviceProp p;
    int drv = 0, rt = 0;
    if (CK(cudaGetDeviceProperties(&p, o->device)) || CK(cudaDriverGetVersion(&drv)) || CK(cudaRuntimeGetVersion(&rt)))
        return 1;
    char uuid[64];
    int n = snprintf(uuid, sizeof uuid, "GPU-");
    for (int i = 0; i < 16; i++) {
        n += snprintf(uuid + n, sizeof uuid - (size_t)n, "%02x", (unsigned char)p.uuid.bytes[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9) n += snprintf(uuid + n, sizeof uuid - (size_t)n, "-");
    }
    char host[256] = "UNKNOWN";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "UNKNOWN");
    host[sizeof host - 1] = '\0';
    cJSON *d = cJSON_AddObjectToObject(root, "device");
    if (!d) return 1;
    cJSON_AddNumberToObject(d, "index", o->device);
    cJSON_AddStringToObject(d, "name", p.name);
    cJSON_AddStringToObject(d, "uuid", uuid);
    cJSON_AddNumberToObject(d, "sms", p.multiProcessorCount);
    cJSON_AddNumberToObject(d, "memory_bytes", (double)p.totalGlobalMem);
    cJSON_AddNumberToObject(d, "l2_bytes", p.l2CacheSize);
    cJSON_AddNumberToObject(d, "driver_version", drv);
    cJSON_AddNumberToObject(d, "runtime_version", rt);
    cJSON_AddStringToObject(root, "host", host);
    fprintf(g_out, "hz-ceilings: %s (%s), %d SMs, %.1f GiB, driver %d, runtime %d, host %s\n", p.name, uuid,
            p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * MIB), drv, rt, host);
    return 0;
}

static void settings_json(const opts *o, cJSON *root) {
    char date[32];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tmv));
    cJSON_AddStringToObject(root, "tool", "hz-ceilings");
    cJSON_AddNumberToObject(root, "schema", CEIL_SCHEMA);
    cJSON_AddStringToObject(root, "date_utc", date);
    cJSON *s = cJSON_AddObjectToObject(root, "settings");
    cJSON_AddNumberToObject(s, "warmup", o->warmup);
    cJSON_AddNumberToObject(s, "repeats", o->repeats);
    cJSON_AddNumberToObject(s, "burst", o->burst);
    cJSON_AddNumberToObject(s, "hbm_bytes", (double)o->hbm_bytes);
    cJSON_AddNumberToObject(s, "host_bytes", (double)o->host_bytes);
    cJSON_AddBoolToObject(s, "quick", o->quick);
    cJSON_AddStringToObject(s, "units", "gbps = 1e9 bytes per second over the median time");
}


/* ------------------------------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: hz-ceilings [--device N] [--repeats 50] [--warmup 5] [--hbm-bytes 1073741824]\n"
            "                   [--host-bytes 536870912] [--threads 1,4,8,16] [--burst 8] [--stage-threads N]\n"
            "                   [--json OUT.json|-] [--quick]\n"
            "Measures the ceilings of the performance contract on one GPU: HBM device-to-device copy (read +\n"
            "write) and read-only (reduction kernel) bandwidth, pinned H2D at one OLMoE and one Qwen1.5-MoE\n"
            "expert blob and at 256 MiB (single copy and a burst), pageable H2D, and pageable -> pinned host\n"
            "memcpy on N threads, and a staged round (one expert blob copied pageable -> pinned by --stage-threads\n"
            "polling threads, default 3/4 of the CPUs at most 12, with memcpy and with streaming stores, then\n"
            "sent H2D), and pipelined rounds (the blob in 1, 2, 4, 8 parts, or 2, 4, 8 blobs back to back, each\n"
            "part or blob sent H2D as soon as it is in).\n"
            "Medians after warm-up; every measurement is checked. --quick: 5 repeats,\n"
            "1 warm-up, 256 MiB device buffers, 64 MiB host (plumbing only, never a figure). --json '-' prints\n"
            "the report on stdout and the table on stderr.\n");
}

static int parse_u64(const char *s, const char *what, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || s[0] == '+') {
        fprintf(stderr, "hz-ceilings: %s must be a non-negative integer, got '%s'\n", what, s);
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_threads(const char *s, opts *o) {
    o->n_threads = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || errno || v == 0 || v > 256 || (*end && *end != ',') || o->n_threads == MAX_THREAD_COUNTS) {
            fprintf(stderr, "hz-ceilings: --threads must be a list of 1..256, at most %u entries, got '%s'\n",
                    MAX_THREAD_COUNTS, s);
            return 1;
        }
        o->threads[o->n_threads++] = (unsigned)v;
        p = *end ? end + 1 : end;
    }
    if (!o->n_threads) {
        fprintf(stderr, "hz-ceilings: --threads is empty\n");
        return 1;
    }
    return 0;
}

/* A numeric option's value into its field, with the option's upper bound. */
static int set_numeric(opts *o, const char *name, const char *text, int *set_rep, int *set_warm, int *set_hbm,
                       int *set_host) {
    uint64_t v = 0;
    if (parse_u64(text, name, &v)) return 1;
    if (!strcmp(name, "--device")) {
        o->device = v > 1024 ? -1 : (int)v;
    } else if (!strcmp(name, "--repeats")) {
        o->repeats = v > MAX_REPEATS ? 0 : (unsigned)v;
        *set_rep = 1;
    } else if (!strcmp(name, "--warmup")) {
        o->warmup = v > MAX_REPEATS ? MAX_REPEATS + 1 : (unsigned)v;
        *set_warm = 1;
    } else if (!strcmp(name, "--burst")) {
        o->burst = v > 64 ? 0 : (unsigned)v;
    } else if (!strcmp(name, "--hbm-bytes")) {
        o->hbm_bytes = v;
        *set_hbm = 1;
    } else if (!strcmp(name, "--stage-threads")) {
        if (v == 0 || v > STAGE_MAX_THREADS) {
            fprintf(stderr, "hz-ceilings: --stage-threads must be 1..%u, got '%s'\n", STAGE_MAX_THREADS, text);
            return 1;
        }
        o->stage_threads = (unsigned)v;
    } else {
        o->host_bytes = v;
        *set_host = 1;
    }
    return 0;
}

static int is_numeric_option(const char *a) {
    static const char *const names[] = {"--device",    "--repeats",    "--warmup",       "--burst",
                                        "--hbm-bytes", "--host-bytes", "--stage-threads"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(a, names[i])) return 1;
    return 0;
}

/* Returns 0 to run, 1 on a bad argument, 2 after --help. */
static int parse_args(int argc, char **argv, opts *o) {
    int set_rep = 0, set_hbm = 0, set_host = 0, set_warm = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 2;
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--json") && has) {
            o->json_path = argv[++i];
        } else if (!strcmp(a, "--threads") && has) {
            if (parse_threads(argv[++i], o)) return 1;
        } else if (has && is_numeric_option(a)) {
            if (set_numeric(o, a, argv[++i], &set_rep, &set_warm, &set_hbm, &set_host)) return 1;
        } else {
            fprintf(stderr, "hz-ceilings: unknown argument or missing value: %s\n", a);
            usage(stderr);
            return 1;
        }
    }
    if (o->quick) { /* the smallest sizes the checks allow: a plumbing run, not a figure */
        if (!set_rep) o->repeats = 5;
        if (!set_warm) o->warmup = 1;
        if (!set_hbm) o->hbm_bytes = H2D_LARGE_BYTES;
        if (!set_host) o->host_bytes = 64 * MIB;
    }
    if (o->device < 0 || o->repeats == 0 || o->warmup > MAX_REPEATS || o->burst == 0) {
        fprintf(stderr, "hz-ceilings: --device, --repeats (1..%u), --warmup or --burst (1..64) out of range\n",
                MAX_REPEATS);
        return 1;
    }
    if (o->hbm_bytes < H2D_LARGE_BYTES || o->hbm_bytes % 16 || o->host_bytes < MIB || o->host_bytes % PAGE_BYTES) {
        fprintf(stderr, "hz-ceilings: --hbm-bytes must be >= 256 MiB (the H2D copies land in that buffer) and a "
                        "multiple of 16; --host-bytes >= 1 MiB and a multiple of 4096\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    opts o = {0, 5, 50, 8, UINT64_C(1) << 30, 512u * MIB, {1, 4, 8, 16}, 4, 0, NULL, 0};
    g_out = stdout;
    int pr = parse_args(argc, argv, &o);
    if (pr) return pr == 2 ? 0 : 1;
    if (o.json_path && !strcmp(o.json_path, "-")) g_out = stderr;

    double *t = calloc(o.repeats > 16 ? o.repeats : 16, sizeof *t);
    cJSON *root = cJSON_CreateObject();
    ceil_ctx c;
    memset(&c, 0, sizeof c);
    int rc = 1;
    char *text = NULL;
    if (!t || !root) {
        fprintf(stderr, "hz-ceilings: out of memory\n");
        goto done;
    }
    settings_json(&o, root);
    if (device_json(&o, root) || ctx_open(&c, &o)) goto done;
    cJSON *hbm = cJSON_AddObjectToObject(root, "hbm");
    if (!hbm || measure_d2d(&c, t, hbm) || measure_read(&c, t, hbm)) goto done;
    cJSON_AddStringToObject(hbm, "roofline_note",
                            "decode reads weights: divide bytes read per token by hbm.read.gbps; "
                            "hbm.d2d_copy.gbps_read_plus_write is the same memory system's rate counted over reads "
                            "and writes together (the figure quoted as about 4.25 TB/s)");
    if (measure_h2d(&c, t, root) || measure_pageable_h2d(&c, t, root) || measure_host_memcpy(&c, t, root) ||
        measure_staged(&c, t, root))
        goto done;
    if (!(text = cJSON_Print(root))) {
        fprintf(stderr, "hz-ceilings: out of memory printing the report\n");
        goto done;
    }
    if (o.json_path && report_file_write("hz-ceilings", o.json_path, text)) goto done;
    fprintf(g_out, "hz-ceilings: OK\n");
    rc = 0;
done:
    ctx_close(&c);
    cJSON_free(text);
    cJSON_Delete(root);
    free(t);
    return rc;
}
