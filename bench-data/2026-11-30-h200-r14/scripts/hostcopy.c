/* Experiment: pageable -> pinned copy rates at expert-blob size, by copy routine, destination kind and
 * thread count; H2D rates from default vs write-combined pinned memory; the two at once. */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((target("avx512f"))) static void copy_nt512(void *d, const void *s, size_t n) {
    char *dp = d;
    const char *sp = s;
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        __m512i a = _mm512_loadu_si512(sp + i), b = _mm512_loadu_si512(sp + i + 64);
        __m512i c = _mm512_loadu_si512(sp + i + 128), e = _mm512_loadu_si512(sp + i + 192);
        _mm512_stream_si512((void *)(dp + i), a);
        _mm512_stream_si512((void *)(dp + i + 64), b);
        _mm512_stream_si512((void *)(dp + i + 128), c);
        _mm512_stream_si512((void *)(dp + i + 192), e);
    }
    if (i < n) memcpy(dp + i, sp + i, n - i);
    _mm_sfence();
}
__attribute__((target("avx2"))) static void copy_nt256(void *d, const void *s, size_t n) {
    char *dp = d;
    const char *sp = s;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        __m256i a = _mm256_loadu_si256((const void *)(sp + i)), b = _mm256_loadu_si256((const void *)(sp + i + 32));
        __m256i c = _mm256_loadu_si256((const void *)(sp + i + 64)), e = _mm256_loadu_si256((const void *)(sp + i + 96));
        _mm256_stream_si256((void *)(dp + i), a);
        _mm256_stream_si256((void *)(dp + i + 32), b);
        _mm256_stream_si256((void *)(dp + i + 64), c);
        _mm256_stream_si256((void *)(dp + i + 96), e);
    }
    if (i < n) memcpy(dp + i, sp + i, n - i);
    _mm_sfence();
}
static void copy_libc(void *d, const void *s, size_t n) { memcpy(d, s, n); }
static void copy_nt128(void *d, const void *s, size_t n) {
    char *dp = d;
    const char *sp = s;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const void *)(sp + i)), b = _mm_loadu_si128((const void *)(sp + i + 16));
        __m128i c = _mm_loadu_si128((const void *)(sp + i + 32)), e = _mm_loadu_si128((const void *)(sp + i + 48));
        _mm_stream_si128((void *)(dp + i), a);
        _mm_stream_si128((void *)(dp + i + 16), b);
        _mm_stream_si128((void *)(dp + i + 32), c);
        _mm_stream_si128((void *)(dp + i + 48), e);
    }
    if (i < n) memcpy(dp + i, sp + i, n - i);
    _mm_sfence();
}

typedef void (*copy_fn)(void *, const void *, size_t);
static copy_fn g_fn;
static int g_threads;
static atomic_int g_gen, g_done, g_stop;
static char *g_dst;
static const char *g_src;
static size_t g_len;

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg, seen = 0;
    for (;;) {
        int gen;
        while ((gen = atomic_load_explicit(&g_gen, memory_order_acquire)) == seen)
            if (atomic_load(&g_stop)) return NULL;
        seen = gen;
        size_t piece = (g_len / g_threads + 63) & ~(size_t)63, off = (size_t)id * piece;
        if (off < g_len) g_fn(g_dst + off, g_src + off, off + piece > g_len ? g_len - off : piece);
        atomic_fetch_add_explicit(&g_done, 1, memory_order_acq_rel);
    }
}

static size_t SRC_BYTES = (size_t)4 << 30;
#define BLOB 3194880u
#define SLOTS 8

/* one round: every thread copies its share of one blob; returns when all are done */
static void round_copy(char *dst, const char *src) {
    g_dst = dst;
    g_src = src;
    g_len = BLOB;
    atomic_store(&g_done, 0);
    atomic_fetch_add_explicit(&g_gen, 1, memory_order_acq_rel);
    while (atomic_load_explicit(&g_done, memory_order_acquire) < g_threads) _mm_pause();
}

int main(void) {
    char *src = mmap(NULL, SRC_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *srch = mmap(NULL, SRC_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED || srch == MAP_FAILED) return 1;
    int hp = madvise(srch, SRC_BYTES, MADV_HUGEPAGE);
    memset(src, 1, SRC_BYTES);
    memset(srch, 2, SRC_BYTES);
    char thp[64] = "?";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) { if (!fgets(thp, sizeof thp, f)) thp[0] = 0; fclose(f); }
    printf("thp: %s madvise rc %d\n", thp, hp);
    char *pin = NULL, *wc = NULL;
    if (cudaHostAlloc((void **)&pin, (size_t)SLOTS * BLOB, cudaHostAllocPortable) ||
        cudaHostAlloc((void **)&wc, (size_t)SLOTS * BLOB, cudaHostAllocPortable | cudaHostAllocWriteCombined))
        return 2;
    memset(pin, 0, (size_t)SLOTS * BLOB);
    memset(wc, 0, (size_t)SLOTS * BLOB);
    void *dev = NULL;
    cudaMalloc(&dev, (size_t)SLOTS * BLOB);
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    const size_t nblobs = SRC_BYTES / BLOB;

    /* H2D: default vs WC pinned, bursts of 8 */
    for (int k = 0; k < 2; k++) {
        char *h = k ? wc : pin;
        for (int w = 0; w < 2; w++) {
            cudaEvent_t a, b;
            cudaEventCreate(&a);
            cudaEventCreate(&b);
            cudaEventRecord(a, st);
            for (int r = 0; r < 50; r++)
                for (int s = 0; s < SLOTS; s++) cudaMemcpyAsync((char *)dev + (size_t)s * BLOB, h + (size_t)s * BLOB, BLOB, cudaMemcpyHostToDevice, st);
            cudaEventRecord(b, st);
            cudaEventSynchronize(b);
            float ms = 0;
            cudaEventElapsedTime(&ms, a, b);
            if (w) printf("H2D %s pinned, blob %u x 400: %.2f GB/s\n", k ? "WC" : "default", BLOB, 400.0 * BLOB / (ms * 1e6));
        }
    }

    if (getenv("HC_FRESH")) {
        g_threads = 12;
        atomic_store(&g_stop, 0);
        pthread_t th[32];
        for (int i = 0; i < g_threads; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
        const char *fn_names2[] = {"libc", "nt128", "nt256", "nt512"};
        copy_fn fns2[] = {copy_libc, copy_nt128, copy_nt256, copy_nt512};
        cudaEvent_t a, e;
        cudaEventCreate(&a);
        cudaEventCreate(&e);
        for (int fi = 0; fi < 4; fi++)
            for (int di = 0; di < 1; di++) {
                g_fn = fns2[fi];
                char *dst = di ? wc : pin;
                double ht = 0, ct = 0;
                size_t b = 0;
                for (int r = 0; r < 120; r++, b++) {
                    char *slot = dst + (b % SLOTS) * BLOB;
                    double t0 = now();
                    round_copy(slot, src + (b % nblobs) * BLOB);
                    double t1 = now();
                    cudaEventRecord(a, st);
                    cudaMemcpyAsync(dev, slot, BLOB, cudaMemcpyHostToDevice, st);
                    cudaEventRecord(e, st);
                    cudaEventSynchronize(e);
                    float ms = 0;
                    cudaEventElapsedTime(&ms, a, e);
                    if (r >= 20) { ht += ms * 1e-3; ct += t1 - t0; }
                }
                printf("fresh fn %-5s dst %-7s: copy %.1f us (%.1f GB/s), then H2D %.1f us (%.1f GB/s)\n", fn_names2[fi], di ? "WC" : "default",
                       ct / 100 * 1e6, 100.0 * BLOB / ct / 1e9, ht / 100 * 1e6, 100.0 * BLOB / ht / 1e9);
            }
        atomic_store(&g_stop, 1);
        atomic_fetch_add(&g_gen, 1);
        for (int i = 0; i < g_threads; i++) pthread_join(th[i], NULL);
        return 0;
    }
    const char *quick = getenv("HC_SWEEP");
    if (quick) {
        const int tl[] = {4, 6, 8, 10, 11, 12, 13, 14, 15};
        for (int ti = 0; ti < 9; ti++) {
            g_threads = tl[ti];
            atomic_store(&g_stop, 0);
            pthread_t th[32];
            for (int i = 0; i < g_threads; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
            g_fn = copy_libc;
            for (int rep = 0; rep < 2; rep++) {
                size_t b = 0;
                for (int r = 0; r < 20; r++, b++) round_copy(pin + (b % SLOTS) * BLOB, src + (b % nblobs) * BLOB);
                double t0 = now();
                for (int r = 0; r < 600; r++, b++) round_copy(pin + (b % SLOTS) * BLOB, src + (b % nblobs) * BLOB);
                double t1 = now();
                printf("sweep threads %2d libc slots8: %.2f GB/s (%.1f us per blob)\n", g_threads, 600.0 * BLOB / (t1 - t0) / 1e9, (t1 - t0) / 600 * 1e6);
            }
            atomic_store(&g_stop, 1);
            atomic_fetch_add(&g_gen, 1);
            for (int i = 0; i < g_threads; i++) pthread_join(th[i], NULL);
        }
        return 0;
    }
    const int nthreads_list[] = {8, 12, 16};
    const char *fn_names[] = {"libc", "nt256", "nt512"};
    copy_fn fns[] = {copy_libc, copy_nt256, copy_nt512};
    for (int ti = 0; ti < 3; ti++) {
        g_threads = nthreads_list[ti];
        atomic_store(&g_stop, 0);
        pthread_t th[32];
        for (int i = 0; i < g_threads; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
        for (int fi = 0; fi < 3; fi++)
            for (int di = 0; di < 2; di++)
                for (int si = 0; si < 2; si++) {
                    g_fn = fns[fi];
                    char *dst = di ? wc : pin;
                    const char *s0 = si ? srch : src;
                    size_t b = 0;
                    for (int r = 0; r < 20; r++, b++) round_copy(dst + (b % SLOTS) * BLOB, s0 + (b % nblobs) * BLOB);
                    int reps = 600;
                    double t0 = now();
                    for (int r = 0; r < reps; r++, b++) round_copy(dst + (b % SLOTS) * BLOB, s0 + (b % nblobs) * BLOB);
                    double t1 = now();
                    printf("copy threads %2d fn %-5s dst %-7s src %-4s: %.2f GB/s (%.1f us per blob)\n", g_threads,
                           fn_names[fi], di ? "WC" : "default", si ? "huge" : "4k", reps * (double)BLOB / (t1 - t0) / 1e9,
                           (t1 - t0) / reps * 1e6);
                }
        /* the two at once: copy rounds while H2D from the other slots streams */
        for (int fi = 0; fi < 3; fi += 2)
            for (int di = 0; di < 2; di++) {
                g_fn = fns[fi];
                char *dst = di ? wc : pin;
                cudaEvent_t a, e;
                cudaEventCreate(&a);
                cudaEventCreate(&e);
                cudaEventRecord(a, st);
                for (int r = 0; r < 120; r++)
                    for (int s = 4; s < SLOTS; s++) cudaMemcpyAsync((char *)dev + (size_t)s * BLOB, dst + (size_t)s * BLOB, BLOB, cudaMemcpyHostToDevice, st);
                cudaEventRecord(e, st);
                size_t b = 0;
                double t0 = now();
                int reps = 0;
                while (cudaEventQuery(e) == cudaErrorNotReady) {
                    round_copy(dst + (b % 4) * BLOB, src + (b % nblobs) * BLOB);
                    b++;
                    reps++;
                }
                double t1 = now();
                float ms = 0;
                cudaEventElapsedTime(&ms, a, e);
                printf("concurrent threads %2d fn %-5s dst %-7s: copy %.2f GB/s, H2D %.2f GB/s\n", g_threads, fn_names[fi],
                       di ? "WC" : "default", reps * (double)BLOB / (t1 - t0) / 1e9, 480.0 * BLOB / (ms * 1e6));
            }
        atomic_store(&g_stop, 1);
        atomic_fetch_add(&g_gen, 1);
        for (int i = 0; i < g_threads; i++) pthread_join(th[i], NULL);
    }
    return 0;
}
