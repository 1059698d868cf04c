/* lib/backend: the internal, versioned device interface.
 *
 * A backend owns device memory, pinned host staging, queues (a compute queue and a copy queue) and
 * events. Every copy goes through hz_backend_copy_* below, which count bytes and copies by direction
 * and purpose once the backend has accepted them, so "zero expert D2H" is observed rather than assumed.
 * Backends never abort: every failure is a status with a message (the CUDA call and its error string
 * for cuda). Implementations: cpu (backend_cpu.c), fault-injecting wrapper (backend_fault.c),
 * cuda (cuda/backend_cuda.cu). */
#ifndef HZ_BACKEND_H
#define HZ_BACKEND_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/core.h"

/* 2: host_register / host_unregister (the registered transport). 3: read_now (the cache's invariant
 * checker). */
#define HZ_BACKEND_INTERFACE_VERSION 3u

typedef enum hz_queue { HZ_QUEUE_COMPUTE = 0, HZ_QUEUE_COPY = 1, HZ_QUEUE_COUNT = 2 } hz_queue;
typedef enum hz_xfer_dir { HZ_H2D = 0, HZ_D2H = 1, HZ_D2D = 2, HZ_DIR_COUNT = 3 } hz_xfer_dir;
typedef enum hz_xfer_purpose {
    HZ_PURPOSE_EXPERT = 0,     /* routed-expert rows */
    HZ_PURPOSE_WEIGHTS = 1,    /* non-routed weights */
    HZ_PURPOSE_ACTIVATION = 2, /* hidden states, logits */
    HZ_PURPOSE_ROUTING = 3,    /* top-k ids and weights */
    HZ_PURPOSE_VERIFY = 4,     /* invariant-checker reads of expert rows (debug/test builds only);
                                  kept apart so expert D2H stays an observed zero */
    HZ_PURPOSE_COUNT = 5
} hz_xfer_purpose;

typedef struct hz_backend hz_backend;
typedef struct hz_bevent hz_bevent; /* a backend's event; opaque, defined by each backend */

typedef struct hz_backend_ops {
    uint32_t version; /* HZ_BACKEND_INTERFACE_VERSION */
    const char *kind; /* "cpu", "cuda", "fault" */
    void (*destroy)(hz_backend *be);

    int (*mem_alloc)(hz_backend *be, uint64_t bytes, void **out); /* device memory */
    void (*mem_free)(hz_backend *be, void *ptr);
    int (*pinned_alloc)(hz_backend *be, uint64_t bytes, void **out); /* page-locked host memory */
    void (*pinned_free)(hz_backend *be, void *ptr);

    /* Enqueue copies on `queue`; they run in order with other work of that queue. */
    int (*copy_h2d)(hz_backend *be, hz_queue queue, void *dst, const void *src, uint64_t bytes);
    int (*copy_d2h)(hz_backend *be, hz_queue queue, void *dst, const void *src, uint64_t bytes);
    int (*copy_d2d)(hz_backend *be, hz_queue queue, void *dst, const void *src, uint64_t bytes);
    int (*memset)(hz_backend *be, hz_queue queue, void *dst, int value, uint64_t bytes);

    int (*event_create)(hz_backend *be, hz_bevent **out);
    void (*event_destroy)(hz_backend *be, hz_bevent *ev);
    /* Completes when all work enqueued on `queue` before it has completed. */
    int (*event_record)(hz_backend *be, hz_bevent *ev, hz_queue queue);
    /* HZ_OK complete, HZ_EBUSY pending, another status if the marked work failed. */
    int (*event_query)(hz_backend *be, hz_bevent *ev);
    /* Blocks the host until complete; HZ_OK or the failure. */
    int (*event_wait)(hz_backend *be, hz_bevent *ev);
    /* Makes later work on `queue` wait for `ev` without blocking the host. */
    int (*queue_wait_event)(hz_backend *be, hz_queue queue, hz_bevent *ev);
    /* Blocks until all work on `queue` has completed. */
    int (*queue_sync)(hz_backend *be, hz_queue queue);
    /* The native queue handle (cudaStream_t for cuda, NULL for cpu), for executors. */
    void *(*native_queue)(hz_backend *be, hz_queue queue);
    /* Total and free device memory in bytes (HZ_EUNSUPPORTED when not observable). */
    int (*mem_info)(hz_backend *be, uint64_t *out_free, uint64_t *out_total);
    /* Makes [ptr, ptr + bytes) of existing host memory a direct DMA source for this backend's copies
     * (read_only: the device never writes it, and the host mapping may be read-only). Once per range;
     * host_unregister(ptr) undoes it and must only follow a successful host_register. A backend whose
     * copies read any host memory directly (cpu) succeeds without doing anything. */
    int (*host_register)(hz_backend *be, void *ptr, uint64_t bytes, int read_only);
    void (*host_unregister)(hz_backend *be, void *ptr);
    /* Copies device memory to host memory and returns once it is there, ordered with neither queue.
     * For reads that must not wait for queued work: the cache's invariant checker reads rows back while
     * the compute queue may hold kernels that wait for this very host thread (the decode step's gated
     * experts), so a read queued there, or a queue_sync, would wait for them until they time out. */
    int (*read_now)(hz_backend *be, void *dst, const void *src, uint64_t bytes);
} hz_backend_ops;

/* Base of every backend (first member of the implementation's struct). */
struct hz_backend {
    const hz_backend_ops *ops;
    char name[32]; /* "cpu", "cuda:0" */
    _Atomic uint64_t bytes[HZ_DIR_COUNT][HZ_PURPOSE_COUNT];
    _Atomic uint64_t copies[HZ_DIR_COUNT][HZ_PURPOSE_COUNT];
};

/* Counting front ends: call the backend's op, count the copy when it was accepted (a refused copy
 * moves no byte). */
int hz_backend_copy_h2d(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes,
                        hz_xfer_purpose purpose);
int hz_backend_copy_d2h(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes,
                        hz_xfer_purpose purpose);
int hz_backend_copy_d2d(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes,
                        hz_xfer_purpose purpose);
/* read_now with the counting of the copies above (a D2H of `purpose`). */
int hz_backend_read_now(hz_backend *be, void *dst, const void *src, uint64_t bytes, hz_xfer_purpose purpose);
/* Counts, as one D2H copy, bytes a kernel stored into pinned host memory itself (no copy operation):
 * every byte that leaves the device shows in the counters, however it travelled. */
void hz_backend_count_d2h_store(hz_backend *be, hz_xfer_purpose purpose, uint64_t bytes);

/* Constructors. */
int hz_backend_cpu_create(hz_backend **out);
int hz_backend_cuda_create(int ordinal, hz_backend **out); /* HZ_EUNSUPPORTED without CUDA */
void hz_backend_destroy(hz_backend *be);                     /* NULL allowed */

/* The public hz_device wraps one backend. */
struct hz_device {
    hz_backend *be;
    _Atomic int children; /* caches and models created on it */
};
/* The public hz_event wraps one backend event. */
struct hz_event {
    hz_device *device;
    hz_bevent *ev;
};

void hz_device_child_add(hz_device *d);
void hz_device_child_remove(hz_device *d);

/* Wraps an already created backend in a public device (takes ownership of `be`, also on failure).
 * Lets tests put the fault-injecting wrapper under a cache. */
int hz_device_wrap(hz_backend *be, hz_device **out);

/* "h2d"/"d2h"/"d2d" and "expert"/"weights"/"activation"/"routing"/"verify", for JSON reports. */
const char *hz_xfer_dir_name(hz_xfer_dir d);
const char *hz_xfer_purpose_name(hz_xfer_purpose p);

/* Test support for the cpu backend: runs fn(arg) on `queue`'s worker thread, in order with the queue's
 * other work (a stand-in for a kernel that reads rows). HZ_EUNSUPPORTED for other backends. */
int hz_backend_cpu_enqueue_host_fn(hz_backend *be, hz_queue queue, void (*fn)(void *), void *arg);
/* Test support for the cpu backend: every later copy writes half its bytes, sleeps `usec`, then writes
 * the rest, so work that reads a destination before the copy's event completes sees a torn buffer.
 * 0 (the default) copies at once. HZ_EUNSUPPORTED for other backends. */
int hz_backend_cpu_set_copy_delay(hz_backend *be, uint32_t usec);

#endif
