/* Shared by the GPU model tests (test_model_gpu.c, test_prefill_gpu.c): failures counted rather than
 * aborting (every configuration runs and prints its figures), and the stack a test opens per device:
 * backing, device, cache, model and one session. */
#ifndef HZ_TEST_GPU_STACK_H
#define HZ_TEST_GPU_STACK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/backend_fault.h"
#include "core/core.h"
#include "horizon/horizon.h"

#include "../../test_fail.h"

typedef struct stack {
    hz_host_backing *b;
    hz_device *d;
    hz_cache *c;
    hz_model *m;
    hz_session *s;
    hz_backend *fault; /* the fault wrapper when the stack was opened with one */
    uint32_t vocab, top_k, layers, experts;
} stack;

static inline void stack_close(stack *s) {
    hz_session_destroy(s->s);
    int st = hz_model_destroy(s->m);
    if (st) FAILF("hz_model_destroy: %s", hz_last_error_message());
    st = hz_cache_destroy(s->c);
    if (st) FAILF("hz_cache_destroy: %s: %s (a lease left behind?)", hz_status_name(st), hz_last_error_message());
    st = hz_device_close(s->d);
    if (st) FAILF("hz_device_close: %s", hz_last_error_message());
    hz_host_backing_close(s->b);
    memset(s, 0, sizeof *s);
}

/* device: "cpu", "cuda:0", or "fault" (a fault-injecting wrapper around cuda device 0); executor NULL:
 * "reference" on the cpu, "grouped" elsewhere. 0, or -1 after a FAILF. */
static inline int stack_open(stack *s, const char *path, const char *device, uint32_t capacity, const char *executor) {
    memset(s, 0, sizeof *s);
    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = capacity;
    hz_model_options mo;
    hz_model_options_init(&mo);
    mo.executor = executor ? executor : strcmp(device, "cpu") == 0 ? "reference" : "grouped";
    hz_model_info info;
    hz_model_info_init(&info);
    int st = hz_host_backing_open(path, NULL, &s->b);
    if (!st && strcmp(device, "fault") == 0) {
        hz_backend *cu = NULL;
        st = hz_backend_cuda_create(0, &cu);
        if (!st) st = hz_backend_fault_create(cu, &s->fault);
        if (!st) st = hz_device_wrap(s->fault, &s->d);
    } else if (!st) {
        st = hz_device_open(device, &s->d);
    }
    if (!st) st = hz_cache_create(s->b, s->d, &co, &s->c);
    if (!st) st = hz_model_create(s->b, s->d, s->c, &mo, &s->m);
    if (!st) st = hz_model_get_info(s->m, &info);
    if (!st) st = hz_session_create(s->m, NULL, &s->s);
    if (st) {
        FAILF("opening %s on %s (capacity %u, executor %s): %s: %s", path, device, capacity, mo.executor,
              hz_status_name(st), hz_last_error_message());
        stack_close(s);
        return -1;
    }
    s->vocab = info.vocab_size;
    s->top_k = info.top_k;
    s->layers = info.layers;
    s->experts = info.experts;
    return 0;
}

static inline uint32_t argmax(const float *x, uint32_t n) {
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* max |a - ref| / max |ref| (the absolute difference when ref is all zero); INFINITY on a non-finite a. */
static inline double max_rel(const float *a, const float *ref, size_t n) {
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = fabs((double)a[i] - (double)ref[i]);
        if (d > md) md = d;
        if (fabs((double)ref[i]) > mr) mr = fabs((double)ref[i]);
    }
    return mr > 0 ? md / mr : md;
}

#endif
