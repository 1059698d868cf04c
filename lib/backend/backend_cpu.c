/* The cpu backend: host memory stands in for device memory and each queue is a worker thread that runs
 * its enqueued work in order. Copies really are asynchronous (the caller returns before the bytes
 * move), and events complete only when a worker reaches their marker, so a caller that forgets to wait
 * reads stale bytes here exactly as it would on a GPU, and ThreadSanitizer sees the same
 * happens-before edges (mutex + condition variable) that a correct caller relies on. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"

enum { OP_COPY, OP_MEMSET, OP_MARK, OP_WAIT, OP_HOST_FN };

/* Events are guarded by the backend's ev_mu. `recorded` is the epoch of the latest record; the event is
 * complete when a worker has reached a marker of that epoch or later (re-recording, as with CUDA
 * events, makes the event track the newest marker). Never recorded = complete. */
typedef struct cpu_event {
    uint64_t recorded;
    uint64_t completed;
    /* The owner's reference plus one per queued marker or wait: an event may be destroyed while work
     * that names it is still queued (as CUDA allows), and is freed when the last such entry has run. */
    uint32_t refs;
} cpu_event;

/* Drops one reference (ev_mu held); returns 1 when the caller must free the event. */
static int event_unref(cpu_event *ev) { return --ev->refs == 0; }

typedef struct cpu_op {
    struct cpu_op *next;
    int kind;
    void *dst;
    const void *src;
    uint64_t bytes;
    int value;
    cpu_event *ev;
    uint64_t epoch;
    void (*fn)(void *);
    void *arg;
} cpu_op;

struct cpu_backend;

typedef struct cpu_queue {
    struct cpu_backend *owner;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    cpu_op *head, *tail;
    uint64_t enqueued, finished;
    int stop;
} cpu_queue;

typedef struct cpu_backend {
    hz_backend base;
    pthread_mutex_t ev_mu;
    pthread_cond_t ev_cv;
    uint64_t next_epoch; /* guarded by ev_mu */
    _Atomic uint32_t copy_delay_us; /* test knob: copies take time, like a real link */
    cpu_queue q[HZ_QUEUE_COUNT];
} cpu_backend;

static const hz_backend_ops cpu_ops;

static cpu_backend *as_cpu(hz_backend *be) { return (cpu_backend *)be; }

static void run_op(cpu_backend *cb, cpu_op *op) {
    switch (op->kind) {
    case OP_COPY: {
        uint32_t delay = atomic_load_explicit(&cb->copy_delay_us, memory_order_relaxed);
        if (delay) {
            /* Half now, half later: a reader that does not wait for the event sees a torn row. */
            size_t half = (size_t)op->bytes / 2;
            memcpy(op->dst, op->src, half);
            usleep(delay);
            memcpy((uint8_t *)op->dst + half, (const uint8_t *)op->src + half, (size_t)op->bytes - half);
        } else {
            memcpy(op->dst, op->src, (size_t)op->bytes);
        }
        break;
    }
    case OP_MEMSET:
        memset(op->dst, op->value, (size_t)op->bytes);
        break;
    case OP_MARK: {
        pthread_mutex_lock(&cb->ev_mu);
        if (op->epoch > op->ev->completed) op->ev->completed = op->epoch;
        pthread_cond_broadcast(&cb->ev_cv);
        int last = event_unref(op->ev);
        pthread_mutex_unlock(&cb->ev_mu);
        if (last) free(op->ev);
        break;
    }
    case OP_WAIT: {
        pthread_mutex_lock(&cb->ev_mu);
        while (op->ev->completed < op->epoch) pthread_cond_wait(&cb->ev_cv, &cb->ev_mu);
        int last = event_unref(op->ev);
        pthread_mutex_unlock(&cb->ev_mu);
        if (last) free(op->ev);
        break;
    }
    case OP_HOST_FN:
        op->fn(op->arg);
        break;
    default:
        break;
    }
}

static void *worker_main(void *arg) {
    cpu_queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (!q->head && !q->stop) pthread_cond_wait(&q->work_cv, &q->mu);
        cpu_op *op = q->head;
        if (!op) { /* stop requested and nothing left: queued work always drains first */
            pthread_mutex_unlock(&q->mu);
            break;
        }
        q->head = op->next;
        if (!q->head) q->tail = NULL;
        pthread_mutex_unlock(&q->mu);

        run_op(q->owner, op);
        free(op);

        pthread_mutex_lock(&q->mu);
        q->finished++;
        pthread_cond_broadcast(&q->done_cv);
        pthread_mutex_unlock(&q->mu);
    }
    return NULL;
}

static int enqueue(cpu_backend *cb, hz_queue queue, cpu_op *tmpl, const char *what) {
    if ((unsigned)queue >= HZ_QUEUE_COUNT)
        return hz_error(HZ_EINVAL, "cpu backend: %s: queue %d out of range", what, (int)queue);
    cpu_op *op = malloc(sizeof *op);
    if (!op) return hz_error(HZ_ENOMEM, "cpu backend: %s: out of memory for a queue entry", what);
    *op = *tmpl;
    op->next = NULL;
    cpu_queue *q = &cb->q[queue];
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = op;
    else q->head = op;
    q->tail = op;
    q->enqueued++;
    pthread_cond_signal(&q->work_cv);
    pthread_mutex_unlock(&q->mu);
    return HZ_OK;
}

static void cpu_destroy(hz_backend *be) {
    cpu_backend *cb = as_cpu(be);
    /* Stop every queue before joining any: a queue may be waiting on an event another queue marks. */
    for (int i = 0; i < HZ_QUEUE_COUNT; i++) {
        cpu_queue *q = &cb->q[i];
        if (!q->started) continue;
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_signal(&q->work_cv);
        pthread_mutex_unlock(&q->mu);
    }
    for (int i = 0; i < HZ_QUEUE_COUNT; i++) {
        cpu_queue *q = &cb->q[i];
        if (q->started) pthread_join(q->thread, NULL);
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->work_cv);
        pthread_cond_destroy(&q->done_cv);
    }
    pthread_mutex_destroy(&cb->ev_mu);
    pthread_cond_destroy(&cb->ev_cv);
    free(cb);
}

static int host_alloc(uint64_t bytes, void **out, const char *what) {
    *out = NULL;
    if (bytes == 0 || bytes > SIZE_MAX - 4096)
        return hz_error(HZ_EINVAL, "cpu backend: %s of %llu bytes", what, (unsigned long long)bytes);
    void *p = NULL;
    /* 4096-aligned like a device allocation, so row offsets behave the same on every backend. */
    if (posix_memalign(&p, 4096, (size_t)bytes) != 0)
        return hz_error(HZ_ENOMEM, "cpu backend: %s of %llu bytes failed", what, (unsigned long long)bytes);
    *out = p;
    return HZ_OK;
}

/* "Device" memory is host memory here: a plain copy on the calling thread, beside the queues' workers.
 * It reads only rows whose writes the caller has already waited for (an event), which orders them. */
static int cpu_read_now(hz_backend *be, void *dst, const void *src, uint64_t bytes) {
    (void)be;
    if (bytes) memcpy(dst, src, (size_t)bytes);
    return HZ_OK;
}

static int cpu_mem_alloc(hz_backend *be, uint64_t bytes, void **out) {
    (void)be;
    return host_alloc(bytes, out, "device allocation");
}

static void cpu_mem_free(hz_backend *be, void *ptr) {
    (void)be;
    free(ptr);
}

static int cpu_pinned_alloc(hz_backend *be, uint64_t bytes, void **out) {
    (void)be;
    return host_alloc(bytes, out, "pinned allocation");
}

static void cpu_pinned_free(hz_backend *be, void *ptr) {
    (void)be;
    free(ptr);
}

static int cpu_copy(hz_backend *be, hz_queue queue, void *dst, const void *src, uint64_t bytes) {
    cpu_op op = {.kind = OP_COPY, .dst = dst, .src = src, .bytes = bytes};
    return enqueue(as_cpu(be), queue, &op, "copy");
}

static int cpu_memset(hz_backend *be, hz_queue queue, void *dst, int value, uint64_t bytes) {
    if (!dst) return hz_error(HZ_EINVAL, "cpu backend: memset of NULL");
    cpu_op op = {.kind = OP_MEMSET, .dst = dst, .value = value, .bytes = bytes};
    return enqueue(as_cpu(be), queue, &op, "memset");
}

static int cpu_event_create(hz_backend *be, hz_bevent **out) {
    (void)be;
    cpu_event *ev = calloc(1, sizeof *ev);
    if (!ev) {
        *out = NULL;
        return hz_error(HZ_ENOMEM, "cpu backend: out of memory for an event");
    }
    ev->refs = 1;
    *out = (hz_bevent *)ev;
    return HZ_OK;
}

static void cpu_event_destroy(hz_backend *be, hz_bevent *bev) {
    cpu_backend *cb = as_cpu(be);
    cpu_event *ev = (cpu_event *)bev;
    if (!ev) return;
    pthread_mutex_lock(&cb->ev_mu);
    int last = event_unref(ev);
    pthread_mutex_unlock(&cb->ev_mu);
    if (last) free(ev);
}

static int cpu_event_record(hz_backend *be, hz_bevent *bev, hz_queue queue) {
    cpu_backend *cb = as_cpu(be);
    cpu_event *ev = (cpu_event *)bev;
    if (!ev) return hz_error(HZ_EINVAL, "cpu backend: record of a NULL event");
    if ((unsigned)queue >= HZ_QUEUE_COUNT)
        return hz_error(HZ_EINVAL, "cpu backend: record on queue %d out of range", (int)queue);
    /* The epoch is taken and the marker enqueued under the queue lock, so markers of one event on one
     * queue carry increasing epochs in queue order. */
    cpu_queue *q = &cb->q[queue];
    cpu_op *op = malloc(sizeof *op);
    if (!op) return hz_error(HZ_ENOMEM, "cpu backend: out of memory for an event marker");
    pthread_mutex_lock(&q->mu);
    pthread_mutex_lock(&cb->ev_mu);
    uint64_t epoch = ++cb->next_epoch;
    ev->recorded = epoch;
    ev->refs++;
    pthread_mutex_unlock(&cb->ev_mu);
    *op = (cpu_op){.kind = OP_MARK, .ev = ev, .epoch = epoch};
    if (q->tail) q->tail->next = op;
    else q->head = op;
    q->tail = op;
    q->enqueued++;
    pthread_cond_signal(&q->work_cv);
    pthread_mutex_unlock(&q->mu);
    return HZ_OK;
}

static int cpu_event_query(hz_backend *be, hz_bevent *bev) {
    cpu_backend *cb = as_cpu(be);
    cpu_event *ev = (cpu_event *)bev;
    if (!ev) return hz_error(HZ_EINVAL, "cpu backend: query of a NULL event");
    pthread_mutex_lock(&cb->ev_mu);
    int done = ev->completed >= ev->recorded;
    pthread_mutex_unlock(&cb->ev_mu);
    return done ? HZ_OK : HZ_EBUSY;
}

static int cpu_event_wait(hz_backend *be, hz_bevent *bev) {
    cpu_backend *cb = as_cpu(be);
    cpu_event *ev = (cpu_event *)bev;
    if (!ev) return hz_error(HZ_EINVAL, "cpu backend: wait on a NULL event");
    pthread_mutex_lock(&cb->ev_mu);
    uint64_t target = ev->recorded;
    while (ev->completed < target) pthread_cond_wait(&cb->ev_cv, &cb->ev_mu);
    pthread_mutex_unlock(&cb->ev_mu);
    return HZ_OK;
}

static int cpu_queue_wait_event(hz_backend *be, hz_queue queue, hz_bevent *bev) {
    cpu_backend *cb = as_cpu(be);
    cpu_event *ev = (cpu_event *)bev;
    if (!ev) return hz_error(HZ_EINVAL, "cpu backend: queue wait on a NULL event");
    /* Waits for the record that exists now, as cudaStreamWaitEvent does; later re-records are not
     * waited for. */
    pthread_mutex_lock(&cb->ev_mu);
    uint64_t target = ev->recorded;
    ev->refs++;
    pthread_mutex_unlock(&cb->ev_mu);
    cpu_op op = {.kind = OP_WAIT, .ev = ev, .epoch = target};
    int st = enqueue(cb, queue, &op, "queue wait");
    if (st) cpu_event_destroy(be, bev); /* drop the reference the entry would have held */
    return st;
}

static int cpu_queue_sync(hz_backend *be, hz_queue queue) {
    cpu_backend *cb = as_cpu(be);
    if ((unsigned)queue >= HZ_QUEUE_COUNT)
        return hz_error(HZ_EINVAL, "cpu backend: sync of queue %d out of range", (int)queue);
    cpu_queue *q = &cb->q[queue];
    pthread_mutex_lock(&q->mu);
    uint64_t target = q->enqueued;
    while (q->finished < target) pthread_cond_wait(&q->done_cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
    return HZ_OK;
}

static void *cpu_native_queue(hz_backend *be, hz_queue queue) {
    (void)be;
    (void)queue;
    return NULL;
}

static int cpu_mem_info(hz_backend *be, uint64_t *out_free, uint64_t *out_total) {
    (void)be;
    if (out_free) *out_free = 0;
    if (out_total) *out_total = 0;
    return hz_error(HZ_EUNSUPPORTED, "cpu backend: device memory is host memory; no separate budget");
}

/* Host memory is device memory here: every copy already reads it directly. */
static int cpu_host_register(hz_backend *be, void *ptr, uint64_t bytes, int read_only) {
    (void)read_only;
    if (!be || !ptr || bytes == 0) return hz_error(HZ_EINVAL, "cpu backend: host_register of NULL or 0 bytes");
    return HZ_OK;
}

static void cpu_host_unregister(hz_backend *be, void *ptr) {
    (void)be;
    (void)ptr;
}

int hz_backend_cpu_enqueue_host_fn(hz_backend *be, hz_queue queue, void (*fn)(void *), void *arg) {
    if (!be || !fn) return hz_error(HZ_EINVAL, "enqueue_host_fn: NULL argument");
    if (be->ops != &cpu_ops) return hz_error(HZ_EUNSUPPORTED, "enqueue_host_fn: backend '%s' is not cpu", be->ops->kind);
    cpu_op op = {.kind = OP_HOST_FN, .fn = fn, .arg = arg};
    return enqueue(as_cpu(be), queue, &op, "host function");
}

int hz_backend_cpu_set_copy_delay(hz_backend *be, uint32_t usec) {
    if (!be) return hz_error(HZ_EINVAL, "set_copy_delay: NULL backend");
    if (be->ops != &cpu_ops) return hz_error(HZ_EUNSUPPORTED, "set_copy_delay: backend '%s' is not cpu", be->ops->kind);
    atomic_store(&as_cpu(be)->copy_delay_us, usec);
    return HZ_OK;
}

static const hz_backend_ops cpu_ops = {
    .version = HZ_BACKEND_INTERFACE_VERSION,
    .kind = "cpu",
    .destroy = cpu_destroy,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .pinned_alloc = cpu_pinned_alloc,
    .pinned_free = cpu_pinned_free,
    .copy_h2d = cpu_copy,
    .copy_d2h = cpu_copy,
    .copy_d2d = cpu_copy,
    .memset = cpu_memset,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_query = cpu_event_query,
    .event_wait = cpu_event_wait,
    .queue_wait_event = cpu_queue_wait_event,
    .queue_sync = cpu_queue_sync,
    .native_queue = cpu_native_queue,
    .mem_info = cpu_mem_info,
    .host_register = cpu_host_register,
    .host_unregister = cpu_host_unregister,
    .read_now = cpu_read_now,
};

int hz_backend_cpu_create(hz_backend **out) {
    if (!out) return hz_error(HZ_EINVAL, "hz_backend_cpu_create: NULL out");
    *out = NULL;
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) return hz_error(HZ_ENOMEM, "cpu backend: out of memory");
    cb->base.ops = &cpu_ops;
    snprintf(cb->base.name, sizeof cb->base.name, "cpu");
    for (int d = 0; d < HZ_DIR_COUNT; d++)
        for (int p = 0; p < HZ_PURPOSE_COUNT; p++) {
            atomic_init(&cb->base.bytes[d][p], 0);
            atomic_init(&cb->base.copies[d][p], 0);
        }
    atomic_init(&cb->copy_delay_us, 0);
    pthread_mutex_init(&cb->ev_mu, NULL);
    pthread_cond_init(&cb->ev_cv, NULL);
    for (int i = 0; i < HZ_QUEUE_COUNT; i++) {
        cpu_queue *q = &cb->q[i];
        q->owner = cb;
        pthread_mutex_init(&q->mu, NULL);
        pthread_cond_init(&q->work_cv, NULL);
        pthread_cond_init(&q->done_cv, NULL);
    }
    for (int i = 0; i < HZ_QUEUE_COUNT; i++) {
        int rc = pthread_create(&cb->q[i].thread, NULL, worker_main, &cb->q[i]);
        if (rc != 0) {
            cpu_destroy(&cb->base);
            return hz_error(HZ_ENOMEM, "cpu backend: cannot start queue worker %d (error %d)", i, rc);
        }
        cb->q[i].started = 1;
    }
    *out = &cb->base;
    return HZ_OK;
}
