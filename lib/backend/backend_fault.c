/* The fault-injecting wrapper: forwards to an inner backend and fails chosen calls on demand, so the
 * cache's recovery paths can be driven one operation at a time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend_fault.h"

typedef struct fault_event {
    hz_bevent *inner;
    int error; /* status reported once the inner event completes; guarded by the wrapper's mutex */
} fault_event;

typedef struct fault_backend {
    hz_backend base;
    hz_backend *inner;
    pthread_mutex_t mu;
    uint64_t calls[HZ_FAULT_OP_COUNT];
    uint64_t arm_at[HZ_FAULT_OP_COUNT]; /* absolute call number that fails; 0 = disarmed */
    int arm_status[HZ_FAULT_OP_COUNT];
    uint64_t records;       /* event records since creation */
    uint64_t ev_error_at;   /* absolute record number whose event errors; 0 = disarmed */
    int ev_error_status;
    uint64_t fired;
} fault_backend;

static const hz_backend_ops fault_ops;

static const char *op_name(hz_fault_op op) {
    static const char *const names[HZ_FAULT_OP_COUNT] = {
        "mem_alloc", "pinned_alloc", "copy_h2d", "copy_d2h", "copy_d2d", "memset", "event_create",
        "event_record", "event_query", "event_wait", "queue_wait_event", "queue_sync", "host_register"};
    return (unsigned)op < HZ_FAULT_OP_COUNT ? names[op] : "unknown";
}

static fault_backend *as_fault(hz_backend *be) { return (fault_backend *)be; }

/* Counts a call of `op`; returns the injected status when this call is the armed one, else HZ_OK. */
static int tick(fault_backend *fb, hz_fault_op op) {
    pthread_mutex_lock(&fb->mu);
    uint64_t n = ++fb->calls[op];
    int st = HZ_OK;
    if (fb->arm_at[op] != 0 && n == fb->arm_at[op]) {
        st = fb->arm_status[op];
        fb->arm_at[op] = 0;
        fb->fired++;
    }
    pthread_mutex_unlock(&fb->mu);
    if (st != HZ_OK)
        hz_error(st, "%s: injected fault in %s (call %llu)", fb->base.name, op_name(op), (unsigned long long)n);
    return st;
}

static void f_destroy(hz_backend *be) {
    fault_backend *fb = as_fault(be);
    hz_backend_destroy(fb->inner);
    pthread_mutex_destroy(&fb->mu);
    free(fb);
}

static int f_mem_alloc(hz_backend *be, uint64_t bytes, void **out) {
    int st = tick(as_fault(be), HZ_FAULT_MEM_ALLOC);
    if (st) {
        *out = NULL;
        return st;
    }
    hz_backend *in = as_fault(be)->inner;
    return in->ops->mem_alloc(in, bytes, out);
}

static void f_mem_free(hz_backend *be, void *ptr) {
    hz_backend *in = as_fault(be)->inner;
    in->ops->mem_free(in, ptr);
}

static int f_pinned_alloc(hz_backend *be, uint64_t bytes, void **out) {
    int st = tick(as_fault(be), HZ_FAULT_PINNED_ALLOC);
    if (st) {
        *out = NULL;
        return st;
    }
    hz_backend *in = as_fault(be)->inner;
    return in->ops->pinned_alloc(in, bytes, out);
}

static void f_pinned_free(hz_backend *be, void *ptr) {
    hz_backend *in = as_fault(be)->inner;
    in->ops->pinned_free(in, ptr);
}

static int f_copy_h2d(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes) {
    int st = tick(as_fault(be), HZ_FAULT_COPY_H2D);
    if (st) return st;
    hz_backend *in = as_fault(be)->inner;
    return in->ops->copy_h2d(in, q, dst, src, bytes);
}

static int f_copy_d2h(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes) {
    int st = tick(as_fault(be), HZ_FAULT_COPY_D2H);
    if (st) return st;
    hz_backend *in = as_fault(be)->inner;
    return in->ops->copy_d2h(in, q, dst, src, bytes);
}

static int f_read_now(hz_backend *be, void *dst, const void *src, uint64_t bytes) {
    hz_backend *in = as_fault(be)->inner; /* no fault point: only the invariant checker reads this way */
    return in->ops->read_now(in, dst, src, bytes);
}

static int f_copy_d2d(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes) {
    int st = tick(as_fault(be), HZ_FAULT_COPY_D2D);
    if (st) return st;
    hz_backend *in = as_fault(be)->inner;
    return in->ops->copy_d2d(in, q, dst, src, bytes);
}

static int f_memset(hz_backend *be, hz_queue q, void *dst, int value, uint64_t bytes) {
    int st = tick(as_fault(be), HZ_FAULT_MEMSET);
    if (st) return st;
    hz_backend *in = as_fault(be)->inner;
    return in->ops->memset(in, q, dst, value, bytes);
}

static int f_event_create(hz_backend *be, hz_bevent **out) {
    *out = NULL;
    int st = tick(as_fault(be), HZ_FAULT_EVENT_CREATE);
    if (st) return st;
    fault_event *fe = calloc(1, sizeof *fe);
    if (!fe) return hz_error(HZ_ENOMEM, "fault backend: out of memory for an event");
    hz_backend *in = as_fault(be)->inner;
    st = in->ops->event_create(in, &fe->inner);
    if (st) {
        free(fe);
        return st;
    }
    *out = (hz_bevent *)fe;
    return HZ_OK;
}

static void f_event_destroy(hz_backend *be, hz_bevent *ev) {
    fault_event *fe = (fault_event *)ev;
    if (!fe) return;
    hz_backend *in = as_fault(be)->inner;
    in->ops->event_destroy(in, fe->inner);
    free(fe);
}

static int f_event_record(hz_backend *be, hz_bevent *ev, hz_queue q) {
    fault_backend *fb = as_fault(be);
    fault_event *fe = (fault_event *)ev;
    int st = tick(fb, HZ_FAULT_EVENT_RECORD);
    if (st) return st;
    st = fb->inner->ops->event_record(fb->inner, fe->inner, q);
    if (st) return st;
    pthread_mutex_lock(&fb->mu);
    uint64_t n = ++fb->records;
    fe->error = HZ_OK;
    if (fb->ev_error_at != 0 && n == fb->ev_error_at) {
        fe->error = fb->ev_error_status;
        fb->ev_error_at = 0;
        fb->fired++;
    }
    pthread_mutex_unlock(&fb->mu);
    return HZ_OK;
}

static int event_error(fault_backend *fb, fault_event *fe) {
    pthread_mutex_lock(&fb->mu);
    int err = fe->error;
    pthread_mutex_unlock(&fb->mu);
    if (err) hz_error(err, "%s: injected error: the work marked by this event failed", fb->base.name);
    return err;
}

static int f_event_query(hz_backend *be, hz_bevent *ev) {
    fault_backend *fb = as_fault(be);
    fault_event *fe = (fault_event *)ev;
    int st = tick(fb, HZ_FAULT_EVENT_QUERY);
    if (st) return st;
    st = fb->inner->ops->event_query(fb->inner, fe->inner);
    if (st != HZ_OK) return st;
    return event_error(fb, fe);
}

static int f_event_wait(hz_backend *be, hz_bevent *ev) {
    fault_backend *fb = as_fault(be);
    fault_event *fe = (fault_event *)ev;
    int st = tick(fb, HZ_FAULT_EVENT_WAIT);
    if (st) return st;
    st = fb->inner->ops->event_wait(fb->inner, fe->inner);
    if (st != HZ_OK) return st;
    return event_error(fb, fe);
}

static int f_queue_wait_event(hz_backend *be, hz_queue q, hz_bevent *ev) {
    fault_backend *fb = as_fault(be);
    int st = tick(fb, HZ_FAULT_QUEUE_WAIT_EVENT);
    if (st) return st;
    return fb->inner->ops->queue_wait_event(fb->inner, q, ((fault_event *)ev)->inner);
}

static int f_queue_sync(hz_backend *be, hz_queue q) {
    fault_backend *fb = as_fault(be);
    int st = tick(fb, HZ_FAULT_QUEUE_SYNC);
    if (st) return st;
    return fb->inner->ops->queue_sync(fb->inner, q);
}

static void *f_native_queue(hz_backend *be, hz_queue q) {
    hz_backend *in = as_fault(be)->inner;
    return in->ops->native_queue(in, q);
}

static int f_mem_info(hz_backend *be, uint64_t *out_free, uint64_t *out_total) {
    hz_backend *in = as_fault(be)->inner;
    return in->ops->mem_info(in, out_free, out_total);
}

static int f_host_register(hz_backend *be, void *ptr, uint64_t bytes, int read_only) {
    int st = tick(as_fault(be), HZ_FAULT_HOST_REGISTER);
    if (st) return st;
    hz_backend *in = as_fault(be)->inner;
    return in->ops->host_register(in, ptr, bytes, read_only);
}

static void f_host_unregister(hz_backend *be, void *ptr) {
    hz_backend *in = as_fault(be)->inner;
    in->ops->host_unregister(in, ptr);
}

static const hz_backend_ops fault_ops = {
    .version = HZ_BACKEND_INTERFACE_VERSION,
    .kind = "fault",
    .destroy = f_destroy,
    .mem_alloc = f_mem_alloc,
    .mem_free = f_mem_free,
    .pinned_alloc = f_pinned_alloc,
    .pinned_free = f_pinned_free,
    .copy_h2d = f_copy_h2d,
    .copy_d2h = f_copy_d2h,
    .copy_d2d = f_copy_d2d,
    .memset = f_memset,
    .event_create = f_event_create,
    .event_destroy = f_event_destroy,
    .event_record = f_event_record,
    .event_query = f_event_query,
    .event_wait = f_event_wait,
    .queue_wait_event = f_queue_wait_event,
    .queue_sync = f_queue_sync,
    .native_queue = f_native_queue,
    .mem_info = f_mem_info,
    .host_register = f_host_register,
    .host_unregister = f_host_unregister,
    .read_now = f_read_now,
};

int hz_backend_fault_create(hz_backend *inner, hz_backend **out) {
    if (!out) {
        hz_backend_destroy(inner);
        return hz_error(HZ_EINVAL, "hz_backend_fault_create: NULL out");
    }
    *out = NULL;
    if (!inner) return hz_error(HZ_EINVAL, "hz_backend_fault_create: NULL inner backend");
    fault_backend *fb = calloc(1, sizeof *fb);
    if (!fb) {
        hz_backend_destroy(inner);
        return hz_error(HZ_ENOMEM, "fault backend: out of memory");
    }
    fb->base.ops = &fault_ops;
    snprintf(fb->base.name, sizeof fb->base.name, "fault(%.20s)", inner->name);
    for (int d = 0; d < HZ_DIR_COUNT; d++)
        for (int p = 0; p < HZ_PURPOSE_COUNT; p++) {
            atomic_init(&fb->base.bytes[d][p], 0);
            atomic_init(&fb->base.copies[d][p], 0);
        }
    fb->inner = inner;
    pthread_mutex_init(&fb->mu, NULL);
    *out = &fb->base;
    return HZ_OK;
}

static fault_backend *checked(hz_backend *be) {
    return (be && be->ops == &fault_ops) ? as_fault(be) : NULL;
}

void hz_backend_fault_arm(hz_backend *fault, hz_fault_op op, uint64_t nth, int status) {
    fault_backend *fb = checked(fault);
    if (!fb || (unsigned)op >= HZ_FAULT_OP_COUNT) return;
    pthread_mutex_lock(&fb->mu);
    fb->arm_at[op] = nth ? fb->calls[op] + nth : 0;
    fb->arm_status[op] = status ? status : HZ_EDEVICE;
    pthread_mutex_unlock(&fb->mu);
}

void hz_backend_fault_arm_event_error(hz_backend *fault, uint64_t nth, int status) {
    fault_backend *fb = checked(fault);
    if (!fb) return;
    pthread_mutex_lock(&fb->mu);
    fb->ev_error_at = nth ? fb->records + nth : 0;
    fb->ev_error_status = status ? status : HZ_EDEVICE;
    pthread_mutex_unlock(&fb->mu);
}

uint64_t hz_backend_fault_calls(hz_backend *fault, hz_fault_op op) {
    fault_backend *fb = checked(fault);
    if (!fb || (unsigned)op >= HZ_FAULT_OP_COUNT) return 0;
    pthread_mutex_lock(&fb->mu);
    uint64_t n = fb->calls[op];
    pthread_mutex_unlock(&fb->mu);
    return n;
}

uint64_t hz_backend_fault_fired(hz_backend *fault) {
    fault_backend *fb = checked(fault);
    if (!fb) return 0;
    pthread_mutex_lock(&fb->mu);
    uint64_t n = fb->fired;
    pthread_mutex_unlock(&fb->mu);
    return n;
}

void hz_backend_fault_reset(hz_backend *fault) {
    fault_backend *fb = checked(fault);
    if (!fb) return;
    pthread_mutex_lock(&fb->mu);
    for (int i = 0; i < HZ_FAULT_OP_COUNT; i++) fb->arm_at[i] = 0;
    fb->ev_error_at = 0;
    pthread_mutex_unlock(&fb->mu);
}

hz_backend *hz_backend_fault_inner(hz_backend *fault) {
    fault_backend *fb = checked(fault);
    return fb ? fb->inner : NULL;
}
