/* The cuda backend (lib/backend/backend.h): device memory from cudaMalloc, pinned host memory from
 * cudaHostAlloc, two non-blocking streams (compute and copy) and timing-free events, and a third
 * stream for read_now alone.
 *
 * Plain C against the CUDA runtime's C API: backend.h uses C11 atomics, which C++17 does not accept.
 *
 * Errors: every failing CUDA call becomes HZ_EDEVICE (HZ_ENOMEM for allocations the device or the
 * host could not satisfy, so a cache can tell "too big" from "broken") with the call, CUDA's error
 * name and string and the device in the last-error message. Errors that poison the CUDA context
 * (illegal address, launch failure, ECC, ...) mark the backend lost: every later call fails at once
 * with the original cause instead of queueing work onto a dead context. Nothing here aborts, prints
 * or registers atexit/destructor teardown: the host application decides when the backend dies. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"

typedef struct cuda_backend {
    hz_backend base;
    int ordinal;
    cudaStream_t stream[HZ_QUEUE_COUNT];
    cudaStream_t read_stream; /* read_now: ordered with neither queue */
    pthread_mutex_t read_mu;  /* one read_now at a time on it */
    _Atomic int lost_claimed; /* the first sticky failure claims lost_msg ... */
    _Atomic int lost;         /* ... writes it, then sets this (readers check lost, then read the message) */
    char lost_msg[256];
} cuda_backend;

struct hz_bevent {
    cudaEvent_t ev;
};

static cuda_backend *as_cuda(hz_backend *be) { return (cuda_backend *)be; }

/* Errors after which the context cannot be used again (CUDA runtime documentation: "the process must
 * be terminated and relaunched" / sticky errors). */
static int cuda_error_is_sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorUnknown:
        return 1;
    default:
        return 0;
    }
}

static int cuda_fail(cuda_backend *cb, cudaError_t e, const char *call) {
    /* Clear the thread's last-error slot so the next, unrelated check does not see this one again. */
    (void)cudaGetLastError();
    int status = e == cudaErrorMemoryAllocation ? HZ_ENOMEM : HZ_EDEVICE;
    hz_error(status, "%s: %s failed: %s (%s)", cb->base.name, call, cudaGetErrorName(e), cudaGetErrorString(e));
    if (cuda_error_is_sticky(e)) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&cb->lost_claimed, &expected, 1)) {
            snprintf(cb->lost_msg, sizeof cb->lost_msg, "%s: %s (%s)", call, cudaGetErrorName(e),
                     cudaGetErrorString(e));
            atomic_store(&cb->lost, 1);
        }
        hz_log(HZ_LOG_ERROR, "%s: device lost after %s: %s", cb->base.name, call, cudaGetErrorName(e));
    }
    return status;
}

/* Fails fast on a lost device and makes the backend's device current on the calling thread (the
 * runtime's current device is per thread, and callers may be any thread). */
static int cuda_enter(cuda_backend *cb, const char *what) {
    if (atomic_load(&cb->lost))
        return hz_error(HZ_EDEVICE, "%s: %s refused: device lost after an earlier error (%s)", cb->base.name, what,
                        cb->lost_msg);
    cudaError_t e = cudaSetDevice(cb->ordinal);
    if (e != cudaSuccess) return cuda_fail(cb, e, "cudaSetDevice");
    return HZ_OK;
}

static int queue_ok(cuda_backend *cb, hz_queue q, const char *what) {
    if ((unsigned)q >= HZ_QUEUE_COUNT)
        return hz_error(HZ_EINVAL, "%s: %s: queue %d out of range", cb->base.name, what, (int)q);
    return HZ_OK;
}

static void cuda_destroy(hz_backend *be) {
    cuda_backend *cb = as_cuda(be);
    if (!cb) return;
    /* Streams are released even on a lost device; cudaStreamDestroy returns at once and frees the
     * stream once its queued work has drained. Errors cannot be reported from a void destructor. */
    if (cudaSetDevice(cb->ordinal) == cudaSuccess) {
        for (int i = 0; i < HZ_QUEUE_COUNT; i++)
            if (cb->stream[i]) (void)cudaStreamDestroy(cb->stream[i]);
        if (cb->read_stream) (void)cudaStreamDestroy(cb->read_stream);
    }
    (void)cudaGetLastError();
    pthread_mutex_destroy(&cb->read_mu);
    free(cb);
}

static int cuda_mem_alloc(hz_backend *be, uint64_t bytes, void **out) {
    cuda_backend *cb = as_cuda(be);
    if (!out) return hz_error(HZ_EINVAL, "%s: mem_alloc: NULL out", be->name);
    *out = NULL;
    if (bytes == 0) return hz_error(HZ_EINVAL, "%s: mem_alloc of 0 bytes", be->name);
    int st = cuda_enter(cb, "mem_alloc");
    if (st) return st;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (size_t)bytes);
    if (e != cudaSuccess) {
        st = cuda_fail(cb, e, "cudaMalloc");
        return hz_error_prefix(st, "%llu bytes", (unsigned long long)bytes);
    }
    *out = p;
    return HZ_OK;
}

static void cuda_mem_free(hz_backend *be, void *ptr) {
    if (!ptr) return;
    if (cudaSetDevice(as_cuda(be)->ordinal) == cudaSuccess) (void)cudaFree(ptr);
    (void)cudaGetLastError();
}

static int cuda_pinned_alloc(hz_backend *be, uint64_t bytes, void **out) {
    cuda_backend *cb = as_cuda(be);
    if (!out) return hz_error(HZ_EINVAL, "%s: pinned_alloc: NULL out", be->name);
    *out = NULL;
    if (bytes == 0) return hz_error(HZ_EINVAL, "%s: pinned_alloc of 0 bytes", be->name);
    int st = cuda_enter(cb, "pinned_alloc");
    if (st) return st;
    void *p = NULL;
    /* Portable: staging may be filled by any thread and copied by any stream of this process. */
    cudaError_t e = cudaHostAlloc(&p, (size_t)bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        st = cuda_fail(cb, e, "cudaHostAlloc");
        return hz_error_prefix(st, "%llu bytes", (unsigned long long)bytes);
    }
    *out = p;
    return HZ_OK;
}

static void cuda_pinned_free(hz_backend *be, void *ptr) {
    if (!ptr) return;
    if (cudaSetDevice(as_cuda(be)->ordinal) == cudaSuccess) (void)cudaFreeHost(ptr);
    (void)cudaGetLastError();
}

static int cuda_copy(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes,
                     enum cudaMemcpyKind kind, const char *what) {
    cuda_backend *cb = as_cuda(be);
    int st = queue_ok(cb, q, what);
    if (st) return st;
    if (!dst || !src) return hz_error(HZ_EINVAL, "%s: %s: NULL pointer", be->name, what);
    if (bytes == 0) return HZ_OK;
    st = cuda_enter(cb, what);
    if (st) return st;
    cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)bytes, kind, cb->stream[q]);
    if (e != cudaSuccess) {
        st = cuda_fail(cb, e, "cudaMemcpyAsync");
        return hz_error_prefix(st, "%s of %llu bytes", what, (unsigned long long)bytes);
    }
    return HZ_OK;
}

static int cuda_copy_h2d(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes) {
    return cuda_copy(be, q, dst, src, bytes, cudaMemcpyHostToDevice, "copy_h2d");
}
static int cuda_copy_d2h(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes) {
    return cuda_copy(be, q, dst, src, bytes, cudaMemcpyDeviceToHost, "copy_d2h");
}
static int cuda_copy_d2d(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes) {
    return cuda_copy(be, q, dst, src, bytes, cudaMemcpyDeviceToDevice, "copy_d2d");
}

static int cuda_read_now(hz_backend *be, void *dst, const void *src, uint64_t bytes) {
    cuda_backend *cb = as_cuda(be);
    if (bytes == 0) return HZ_OK;
    int st = cuda_enter(cb, "read_now");
    if (st) return st;
    pthread_mutex_lock(&cb->read_mu);
    cudaError_t e = cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost, cb->read_stream);
    const char *call = "cudaMemcpyAsync";
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(cb->read_stream);
        call = "cudaStreamSynchronize";
    }
    pthread_mutex_unlock(&cb->read_mu);
    if (e != cudaSuccess) {
        st = cuda_fail(cb, e, call);
        return hz_error_prefix(st, "read_now of %llu bytes", (unsigned long long)bytes);
    }
    return HZ_OK;
}

static int cuda_memset(hz_backend *be, hz_queue q, void *dst, int value, uint64_t bytes) {
    cuda_backend *cb = as_cuda(be);
    int st = queue_ok(cb, q, "memset");
    if (st) return st;
    if (!dst) return hz_error(HZ_EINVAL, "%s: memset of NULL", be->name);
    if (bytes == 0) return HZ_OK;
    st = cuda_enter(cb, "memset");
    if (st) return st;
    cudaError_t e = cudaMemsetAsync(dst, value, (size_t)bytes, cb->stream[q]);
    if (e != cudaSuccess) return cuda_fail(cb, e, "cudaMemsetAsync");
    return HZ_OK;
}

static int cuda_event_create(hz_backend *be, hz_bevent **out) {
    cuda_backend *cb = as_cuda(be);
    if (!out) return hz_error(HZ_EINVAL, "%s: event_create: NULL out", be->name);
    *out = NULL;
    int st = cuda_enter(cb, "event_create");
    if (st) return st;
    hz_bevent *ev = hz_calloc(1, sizeof *ev);
    if (!ev) return HZ_ENOMEM;
    /* Completion markers only: timing would add overhead to every record. */
    cudaError_t e = cudaEventCreateWithFlags(&ev->ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        free(ev);
        return cuda_fail(cb, e, "cudaEventCreateWithFlags");
    }
    *out = ev;
    return HZ_OK;
}

static void cuda_event_destroy(hz_backend *be, hz_bevent *ev) {
    if (!ev) return;
    if (cudaSetDevice(as_cuda(be)->ordinal) == cudaSuccess) (void)cudaEventDestroy(ev->ev);
    (void)cudaGetLastError();
    free(ev);
}

static int cuda_event_record(hz_backend *be, hz_bevent *ev, hz_queue q) {
    cuda_backend *cb = as_cuda(be);
    if (!ev) return hz_error(HZ_EINVAL, "%s: record of a NULL event", be->name);
    int st = queue_ok(cb, q, "event_record");
    if (st) return st;
    st = cuda_enter(cb, "event_record");
    if (st) return st;
    cudaError_t e = cudaEventRecord(ev->ev, cb->stream[q]);
    if (e != cudaSuccess) return cuda_fail(cb, e, "cudaEventRecord");
    return HZ_OK;
}

static int cuda_event_query(hz_backend *be, hz_bevent *ev) {
    cuda_backend *cb = as_cuda(be);
    if (!ev) return hz_error(HZ_EINVAL, "%s: query of a NULL event", be->name);
    int st = cuda_enter(cb, "event_query");
    if (st) return st;
    cudaError_t e = cudaEventQuery(ev->ev);
    if (e == cudaSuccess) return HZ_OK;
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return HZ_EBUSY;
    }
    return cuda_fail(cb, e, "cudaEventQuery");
}

static int cuda_event_wait(hz_backend *be, hz_bevent *ev) {
    cuda_backend *cb = as_cuda(be);
    if (!ev) return hz_error(HZ_EINVAL, "%s: wait on a NULL event", be->name);
    int st = cuda_enter(cb, "event_wait");
    if (st) return st;
    cudaError_t e = cudaEventSynchronize(ev->ev);
    if (e != cudaSuccess) return cuda_fail(cb, e, "cudaEventSynchronize");
    return HZ_OK;
}

static int cuda_queue_wait_event(hz_backend *be, hz_queue q, hz_bevent *ev) {
    cuda_backend *cb = as_cuda(be);
    if (!ev) return hz_error(HZ_EINVAL, "%s: queue wait on a NULL event", be->name);
    int st = queue_ok(cb, q, "queue_wait_event");
    if (st) return st;
    st = cuda_enter(cb, "queue_wait_event");
    if (st) return st;
    cudaError_t e = cudaStreamWaitEvent(cb->stream[q], ev->ev, 0);
    if (e != cudaSuccess) return cuda_fail(cb, e, "cudaStreamWaitEvent");
    return HZ_OK;
}

static int cuda_queue_sync(hz_backend *be, hz_queue q) {
    cuda_backend *cb = as_cuda(be);
    int st = queue_ok(cb, q, "queue_sync");
    if (st) return st;
    st = cuda_enter(cb, "queue_sync");
    if (st) return st;
    cudaError_t e = cudaStreamSynchronize(cb->stream[q]);
    if (e != cudaSuccess) return cuda_fail(cb, e, "cudaStreamSynchronize");
    return HZ_OK;
}

static void *cuda_native_queue(hz_backend *be, hz_queue q) {
    if ((unsigned)q >= HZ_QUEUE_COUNT) return NULL;
    return (void *)as_cuda(be)->stream[q];
}

static int cuda_mem_info(hz_backend *be, uint64_t *out_free, uint64_t *out_total) {
    cuda_backend *cb = as_cuda(be);
    if (!out_free || !out_total) return hz_error(HZ_EINVAL, "%s: mem_info: NULL out", be->name);
    *out_free = *out_total = 0;
    int st = cuda_enter(cb, "mem_info");
    if (st) return st;
    size_t fr = 0, tot = 0;
    cudaError_t e = cudaMemGetInfo(&fr, &tot);
    if (e != cudaSuccess) return cuda_fail(cb, e, "cudaMemGetInfo");
    *out_free = fr;
    *out_total = tot;
    return HZ_OK;
}

/* Registrations are process-wide (cudaHostRegisterPortable: every context sees the range pinned), and
 * CUDA refuses to register a range twice: two caches on one backing, on one device or on two, share one
 * registration, counted here and undone by the last unregister. */
typedef struct cuda_reg {
    struct cuda_reg *next;
    void *ptr;
    uint64_t bytes;
    uint32_t refs;
} cuda_reg;
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static cuda_reg *g_regs;

static int cuda_host_register(hz_backend *be, void *ptr, uint64_t bytes, int read_only) {
    cuda_backend *cb = as_cuda(be);
    if (!ptr || bytes == 0) return hz_error(HZ_EINVAL, "%s: host_register of NULL or 0 bytes", be->name);
    int st = cuda_enter(cb, "host_register");
    if (st) return st;
    pthread_mutex_lock(&g_reg_mu);
    cuda_reg *r = g_regs;
    while (r && r->ptr != ptr) r = r->next;
    if (r) {
        if (r->bytes != bytes)
            st = hz_error(HZ_EINVAL, "%s: host_register of %p: already registered with %llu bytes, not %llu", be->name,
                          ptr, (unsigned long long)r->bytes, (unsigned long long)bytes);
        else
            r->refs++;
        pthread_mutex_unlock(&g_reg_mu);
        return st;
    }
    int attr = 0;
    cudaError_t e = cudaDeviceGetAttribute(&attr, cudaDevAttrHostRegisterSupported, cb->ordinal);
    if (e != cudaSuccess) st = cuda_fail(cb, e, "cudaDeviceGetAttribute(cudaDevAttrHostRegisterSupported)");
    else if (!attr)
        st = hz_error(HZ_EDEVICE, "%s: cudaHostRegister: the device does not support host registration "
                                  "(cudaDevAttrHostRegisterSupported = 0)", be->name);
    if (!st && read_only) {
        e = cudaDeviceGetAttribute(&attr, cudaDevAttrHostRegisterReadOnlySupported, cb->ordinal);
        if (e != cudaSuccess) st = cuda_fail(cb, e, "cudaDeviceGetAttribute(cudaDevAttrHostRegisterReadOnlySupported)");
        else if (!attr)
            st = hz_error(HZ_EDEVICE, "%s: cudaHostRegister: the device does not support cudaHostRegisterReadOnly "
                                      "(cudaDevAttrHostRegisterReadOnlySupported = 0)", be->name);
    }
    if (!st) {
        /* Read-only: the routed region is mapped PROT_READ, which pinning for device writes would refuse. */
        unsigned flags = cudaHostRegisterPortable | (read_only ? cudaHostRegisterReadOnly : 0u);
        e = cudaHostRegister(ptr, (size_t)bytes, flags);
        if (e != cudaSuccess) {
            st = cuda_fail(cb, e, read_only ? "cudaHostRegister(Portable | ReadOnly)" : "cudaHostRegister(Portable)");
            hz_error_prefix(st, "%llu bytes at %p", (unsigned long long)bytes, ptr);
        }
    }
    if (!st) {
        r = calloc(1, sizeof *r);
        if (!r) {
            (void)cudaHostUnregister(ptr);
            (void)cudaGetLastError();
            st = hz_error(HZ_ENOMEM, "%s: host_register: out of memory", be->name);
        } else {
            *r = (cuda_reg){.next = g_regs, .ptr = ptr, .bytes = bytes, .refs = 1};
            g_regs = r;
        }
    }
    pthread_mutex_unlock(&g_reg_mu);
    return st;
}

static void cuda_host_unregister(hz_backend *be, void *ptr) {
    if (!ptr) return;
    pthread_mutex_lock(&g_reg_mu);
    for (cuda_reg **pp = &g_regs; *pp; pp = &(*pp)->next) {
        cuda_reg *r = *pp;
        if (r->ptr != ptr) continue;
        if (--r->refs == 0) {
            *pp = r->next;
            free(r);
            /* Nothing to report to: a failure leaves the range pinned until the process ends. */
            if (cudaSetDevice(as_cuda(be)->ordinal) == cudaSuccess) (void)cudaHostUnregister(ptr);
            (void)cudaGetLastError();
        }
        break;
    }
    pthread_mutex_unlock(&g_reg_mu);
}

static const hz_backend_ops cuda_ops = {
    .version = HZ_BACKEND_INTERFACE_VERSION,
    .kind = "cuda",
    .destroy = cuda_destroy,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .pinned_alloc = cuda_pinned_alloc,
    .pinned_free = cuda_pinned_free,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .memset = cuda_memset,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_wait = cuda_event_wait,
    .queue_wait_event = cuda_queue_wait_event,
    .queue_sync = cuda_queue_sync,
    .native_queue = cuda_native_queue,
    .mem_info = cuda_mem_info,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .read_now = cuda_read_now,
};

int hz_backend_cuda_create(int ordinal, hz_backend **out) {
    if (!out) return hz_error(HZ_EINVAL, "hz_backend_cuda_create: NULL out");
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return hz_error(HZ_EDEVICE, "cuda:%d: cudaGetDeviceCount failed: %s (%s)", ordinal, cudaGetErrorName(e),
                        cudaGetErrorString(e));
    }
    if (ordinal < 0 || ordinal >= count)
        return hz_error(HZ_EINVAL, "cuda:%d: no such device (%d CUDA device%s)", ordinal, count, count == 1 ? "" : "s");

    cuda_backend *cb = hz_calloc(1, sizeof *cb);
    if (!cb) return HZ_ENOMEM;
    cb->base.ops = &cuda_ops;
    snprintf(cb->base.name, sizeof cb->base.name, "cuda:%d", ordinal);
    cb->ordinal = ordinal;
    atomic_init(&cb->lost_claimed, 0);
    atomic_init(&cb->lost, 0);
    pthread_mutex_init(&cb->read_mu, NULL);
    for (int d = 0; d < HZ_DIR_COUNT; d++)
        for (int p = 0; p < HZ_PURPOSE_COUNT; p++) {
            atomic_init(&cb->base.bytes[d][p], 0);
            atomic_init(&cb->base.copies[d][p], 0);
        }

    int st = cuda_enter(cb, "create");
    if (st) {
        free(cb);
        return st;
    }
    /* Creates the primary context now, so its cost and its failures belong to creation. */
    e = cudaFree(NULL);
    if (e != cudaSuccess) {
        st = cuda_fail(cb, e, "cudaFree(NULL) (context creation)");
        free(cb);
        return st;
    }
    /* Non-blocking: neither queue may serialise against work on the legacy default stream. */
    for (int i = 0; i <= HZ_QUEUE_COUNT; i++) {
        e = cudaStreamCreateWithFlags(i < HZ_QUEUE_COUNT ? &cb->stream[i] : &cb->read_stream,
                                      cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            st = cuda_fail(cb, e, "cudaStreamCreateWithFlags");
            cuda_destroy(&cb->base);
            return st;
        }
    }
    *out = &cb->base;
    return HZ_OK;
}
