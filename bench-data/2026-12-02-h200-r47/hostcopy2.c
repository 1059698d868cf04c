/* Experiment: does the copy routine's cache state decide the staged round on this host? One OLMoE expert
 * blob per round (3,194,880 bytes) from a fresh part of a 4 GB pageable source into one of 8 rotating
 * pinned slots, split over T threads, then sent with cudaMemcpyAsync; the round in W waves (wave k's
 * H2D queued as soon as its share is copied, while the threads copy wave k + 1). Routines: libc memcpy;
 * 64-byte streaming stores (the transport's); memcpy then CLWB of every line written; memcpy then
 * CLDEMOTE of every line (moves it to the shared cache where the DMA read can be served); memcpy then
 * CLFLUSHOPT. Prints the CPU's flags for the three line instructions first.
 * Build: gcc -O2 -std=c11 -I/usr/local/cuda/include hostcopy2.c -o hostcopy2 -L/usr/local/cuda/lib64
 *        -lcudart_static -lpthread -ldl -lrt */
#define _GNU_SOURCE
#include <cpuid.h>
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
static void copy_libc(void *d, const void *s, size_t n) { memcpy(d, s, n); }
__attribute__((target("clwb"))) static void copy_clwb(void *d, const void *s, size_t n) {
    memcpy(d, s, n);
    for (size_t i = 0; i < n; i += 64) _mm_clwb((char *)d + i);
    _mm_sfence();
}
static void copy_cldemote(void *d, const void *s, size_t n) {
    memcpy(d, s, n);
    /* CLDEMOTE (0F 1C /0) is in the hint-NOP space: a NOP where the CPU lacks it */
    for (size_t i = 0; i < n; i += 64) __asm__ volatile(".byte 0x0f, 0x1c, 0x00" ::"a"((char *)d + i) : "memory");
    _mm_sfence();
}
__attribute__((target("clflushopt"))) static void copy_clflushopt(void *d, const void *s, size_t n) {
    memcpy(d, s, n);
    for (size_t i = 0; i < n; i += 64) _mm_clflushopt((char *)d + i);
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

#define BLOB 3194880u
#define SLOTS 8
static size_t SRC_BYTES = (size_t)4 << 30;

static void part_copy(char *dst, const char *src, size_t len) {
    g_dst = dst;
    g_src = src;
    g_len = len;
    atomic_store(&g_done, 0);
    atomic_fetch_add_explicit(&g_gen, 1, memory_order_acq_rel);
    while (atomic_load_explicit(&g_done, memory_order_acquire) < g_threads) _mm_pause();
}

int main(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    const int has_clwb = (b >> 24) & 1, has_cfo = (b >> 23) & 1, has_cld = (c >> 25) & 1, has_512 = (b >> 16) & 1;
    printf("cpuid: clflushopt %d clwb %d cldemote %d avx512f %d\n", has_cfo, has_clwb, has_cld, has_512);
    char *src = mmap(NULL, SRC_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED) return 1;
    memset(src, 1, SRC_BYTES);
    char *pin = NULL;
    if (cudaHostAlloc((void **)&pin, (size_t)SLOTS * BLOB, cudaHostAllocPortable)) return 2;
    memset(pin, 0, (size_t)SLOTS * BLOB);
    void *dev = NULL;
    if (cudaMalloc(&dev, (size_t)SLOTS * BLOB)) return 3;
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    const size_t nblobs = SRC_BYTES / BLOB;
    double h2d = 0;
    {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        for (int w = 0; w < 2; w++) {
            cudaEventRecord(e0, st);
            for (int r = 0; r < 50; r++)
                for (int s = 0; s < SLOTS; s++)
                    cudaMemcpyAsync((char *)dev + (size_t)s * BLOB, pin + (size_t)s * BLOB, BLOB, cudaMemcpyHostToDevice, st);
            cudaEventRecord(e1, st);
            cudaEventSynchronize(e1);
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            h2d = 400.0 * BLOB / (ms * 1e6);
            if (w) printf("H2D pinned, blob x 400: %.2f GB/s\n", h2d);
        }
    }
    const char *names[] = {"libc", "nt512", "clwb", "cldemote", "clflushopt"};
    copy_fn fns[] = {copy_libc, copy_nt512, copy_clwb, copy_cldemote, copy_clflushopt};
    const int ok[] = {1, has_512, has_clwb, 1, has_cfo};
    const int tlist[] = {12, 8};
    size_t blob = 0;
    for (int ti = 0; ti < 2; ti++) {
        g_threads = tlist[ti];
        atomic_store(&g_stop, 0);
        pthread_t th[32];
        for (int i = 0; i < g_threads; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
        for (int rep = 0; rep < 2; rep++)
            for (int fi = 0; fi < 5; fi++) {
                if (!ok[fi]) continue;
                g_fn = fns[fi];
                for (int waves = 1; waves <= 4; waves *= 2) {
                    cudaEvent_t e0, e1;
                    cudaEventCreate(&e0);
                    cudaEventCreate(&e1);
                    double ct = 0, rt = 0, ht = 0;
                    for (int r = 0; r < 140; r++, blob++) {
                        char *slot = pin + (blob % SLOTS) * BLOB;
                        const char *s = src + (blob % nblobs) * BLOB;
                        const size_t wl = (BLOB / waves + 4095) & ~(size_t)4095;
                        double t0 = now(), tc = 0;
                        cudaEventRecord(e0, st);
                        for (int w = 0; w < waves; w++) {
                            const size_t off = (size_t)w * wl, len = off + wl > BLOB ? BLOB - off : wl;
                            double c0 = now();
                            part_copy(slot + off, s + off, len);
                            tc += now() - c0;
                            cudaMemcpyAsync((char *)dev + (blob % SLOTS) * BLOB + off, slot + off, len, cudaMemcpyHostToDevice, st);
                        }
                        cudaEventRecord(e1, st);
                        cudaEventSynchronize(e1);
                        double t1 = now();
                        float ms = 0;
                        cudaEventElapsedTime(&ms, e0, e1);
                        if (r >= 40) { ct += tc; rt += t1 - t0; ht += ms * 1e-3; }
                    }
                    printf("threads %2d %-10s waves %d: copy %6.1f us (%5.1f GB/s) | round %6.1f us (%5.1f GB/s, %4.1f%% of H2D above) | first event->last H2D %6.1f us\n",
                           g_threads, names[fi], waves, ct / 100 * 1e6, 100.0 * BLOB / ct / 1e9, rt / 100 * 1e6,
                           100.0 * BLOB / rt / 1e9, 100.0 * (100.0 * BLOB / rt / 1e9) / h2d, ht / 100 * 1e6);
                    cudaEventDestroy(e0);
                    cudaEventDestroy(e1);
                }
            }
        atomic_store(&g_stop, 1);
        atomic_fetch_add(&g_gen, 1);
        for (int i = 0; i < g_threads; i++) pthread_join(th[i], NULL);
    }
    return 0;
}
