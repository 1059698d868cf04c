/* The miss transactor: serial, threaded and registered transports (transact.h). All three keep one
 * rule: a staging slot (or, registered, nothing at all) is read by an H2D until that copy's event has
 * completed, and on failure nothing issued by a load is left running unless the result says so. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backing/backing.h"
#include "transact/transact.h"

/* Slot states, written by the loading thread under the transactor's mutex (which hz_transactor_stats
 * takes to read them). Every state but IDLE counts as staging in use. */
enum { SLOT_IDLE = 0, SLOT_FILLING, SLOT_STAGED, SLOT_COPYING };

/* A threaded fill's claim word: the fill's piece count in the high half, the next piece to hand out in
 * the low half. One word, so that a copy thread's increment tells it both which piece it took and
 * whether that piece exists in the fill it took it from; no piece is left while low >= high (an idle
 * slot's word is 0). Increments on a spent word are harmless: the next fill stores a new word. */
#define CLAIM_WORD(pieces) ((uint64_t)(pieces) << 32)
#define CLAIM_NEXT(w) ((uint32_t)(w))
#define CLAIM_PIECES(w) ((uint32_t)((w) >> 32))

typedef struct txn_slot {
    uint8_t *buf;
    hz_bevent *ev;
    int state;
    uint64_t seq; /* order in which its H2D was enqueued: the oldest copy is waited for first */
    /* threaded: the fill in progress. The loading thread writes these, then publishes the fill with a
     * release store of `claim`; a copy thread whose increment of `claim` takes a piece sees them. */
    const uint8_t *src;
    uint32_t item;
    _Atomic uint64_t claim;    /* CLAIM_WORD */
    _Atomic uint64_t order;    /* hand-out order: copy threads take the oldest fill's pieces first */
    _Atomic uint32_t done;     /* pieces finished: copied, failed, or taken back after a failure */
    _Atomic int status;        /* first failure among its pieces */
    _Atomic uint64_t landed;   /* piecewise: one bit per piece that is in staging */
    _Atomic uint64_t first_ns; /* earliest start and latest end of its pieces' copies */
    _Atomic uint64_t last_ns;
    /* threaded, the loading thread's own */
    uint32_t pieces;     /* of this fill */
    uint32_t sent;       /* piecewise: pieces whose H2D is enqueued */
    uint64_t handout_ns; /* when the fill was handed out */
} txn_slot;

struct hz_transactor {
    hz_backend *be;
    const hz_host_backing *backing;
    int transport;
    uint64_t row_bytes;
    uint32_t nslots;
    uint8_t *staging; /* one pinned allocation, nslots x row_bytes (serial, threaded) */
    txn_slot *slots;
    uint32_t *by_order; /* threaded: nslots indices, the filling slots sorted by hand-out (loading thread) */
    hz_bevent *group_ev; /* registered: marks the end of a load's copies */
    void *reg_ptr;       /* registered: the region given to host_register */
    uint64_t reg_bytes;

    /* Guarded by mu: the slots' states, the H2D counters, the failure message, cur_items. Read by
     * hz_cache_stats_json from other threads while a load runs. */
    pthread_mutex_t mu;
    uint32_t busy;
    uint64_t high_water;
    uint64_t h2d_bytes, h2d_copies;
    uint64_t next_seq;
    const hz_txn_item *cur_items; /* the running load's items (non-NULL while one runs) */
    int fail_set;
    char fail_msg[512];

    /* Written by the copy threads without a lock. */
    _Atomic uint64_t staging_copies, staging_chunks, copy_bytes, copy_ns, thread_ns;
    _Atomic uint64_t fill_wait_ns, fill_span_ns, fill_lag_ns; /* threaded; written by the loading thread */
    _Atomic uint32_t copy_delay_us; /* test knob */
    _Atomic uint64_t fault_at[HZ_TXN_FAULT_COUNT];
    _Atomic int fault_status[HZ_TXN_FAULT_COUNT];
    _Atomic uint64_t fault_calls[HZ_TXN_FAULT_COUNT];

    /* threaded */
    pthread_cond_t work_cv; /* copy threads sleep here for work (or stop) */
    pthread_cond_t done_cv; /* the loading thread sleeps here for finished pieces */
    int conds;              /* the two condition variables were initialized */
    uv_thread_t *threads;
    uint32_t nthreads, started;
    uint32_t pieces;     /* pieces per blob */
    uint64_t piece_bytes; /* bytes per piece (the last one may be shorter) */
    uint64_t chunk_bytes; /* the smallest piece asked for (0: the default) */
    int piecewise;       /* H2D per run of landed pieces, not per blob (hz_txn_config.piecewise) */
    uint32_t waves;      /* piecewise: pieces per thread's share, and runs per blob (hz_txn_config.waves) */
    uint32_t min_run;    /* piecewise: the fewest pieces one H2D sends, but for a blob's last run */
    uint64_t spin_ns;    /* how long a thread polls before it sleeps on a condition (hz_txn_config.spin_us) */
    int stream_width;    /* staging copies: streaming stores of this many bytes, 0 = memcpy (hz_txn_config.streaming) */
    _Atomic uint64_t work_seq; /* bumped when fills are handed out, and at stop */
    _Atomic uint64_t done_seq; /* bumped when a fill's last piece finishes or (piecewise) a piece lands */
    _Atomic uint32_t sleepers; /* copy threads asleep on work_cv, or about to be */
    _Atomic int loader_asleep; /* the loading thread sleeps on done_cv, or is about to */
    _Atomic int stop;
    uint64_t next_order; /* loading thread: hand-out counter */
    uint64_t copy_until; /* loading thread: the end of the copy time already in copy_ns */
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *hz_txn_transport_name(int transport) {
    switch (transport) {
    case HZ_TXN_SERIAL: return "serial";
    case HZ_TXN_THREADED: return "threaded";
    case HZ_TXN_REGISTERED: return "registered";
    default: return "unknown";
    }
}

/* Counts one execution of point p; the armed one fails. Lock-free: copy threads call it per piece. */
static int fault_point(hz_transactor *t, hz_txn_fault p) {
    const uint64_t n = atomic_fetch_add_explicit(&t->fault_calls[p], 1u, memory_order_relaxed) + 1u;
    uint64_t at = atomic_load_explicit(&t->fault_at[p], memory_order_acquire);
    if (at == 0 || n != at) return HZ_OK;
    if (!atomic_compare_exchange_strong_explicit(&t->fault_at[p], &at, 0u, memory_order_acq_rel, memory_order_acquire))
        return HZ_OK;
    return atomic_load_explicit(&t->fault_status[p], memory_order_relaxed);
}

static void set_state_locked(hz_transactor *t, txn_slot *s, int state) {
    if (state != SLOT_IDLE && s->state == SLOT_IDLE) {
        t->busy++;
        uint64_t inuse = (uint64_t)t->busy * t->row_bytes;
        if (inuse > t->high_water) t->high_water = inuse;
    } else if (state == SLOT_IDLE && s->state != SLOT_IDLE) {
        t->busy--;
    }
    s->state = state;
}

static void set_state(hz_transactor *t, txn_slot *s, int state) {
    pthread_mutex_lock(&t->mu);
    set_state_locked(t, s, state);
    pthread_mutex_unlock(&t->mu);
}

/* ---- staging copies ------------------------------------------------------------------------------ */

/* Backing -> staging with streaming (non-temporal) stores where the CPU has them, else memcpy. A blob
 * written through the cache sits dirty in the writing cores' caches, and the H2D that reads it next
 * must fetch every line from there: on the H200 host (2026-11-30, one OLMoE blob of 3.2 MB copied by 12
 * threads, then sent, two calls) that H2D took 151-158 us (20 GB/s) after memcpy and 63.2-63.6 us
 * (50 GB/s) after streaming stores of 16, 32 or 64 bytes. 64-byte stores (AVX-512F) where the CPU has
 * them, else 16-byte ones (SSE2, part of x86-64): in the transport the staging copies ran at 47.5-47.8
 * GB/s against 40.0-41.6 (OLMoE c30, same call). The fence makes the stores globally visible before the
 * copy is reported done, and so before any H2D is enqueued. */
#if defined(__x86_64__)
static void copy_nt16(uint8_t *dst, const uint8_t *src, size_t n) {
    size_t head = (16u - ((uintptr_t)dst & 15u)) & 15u;
    if (head > n) head = n;
    memcpy(dst, src, head);
    size_t i = head;
    for (; i + 64u <= n; i += 64u) {
        const __m128i a = _mm_loadu_si128((const void *)(src + i));
        const __m128i b = _mm_loadu_si128((const void *)(src + i + 16u));
        const __m128i c = _mm_loadu_si128((const void *)(src + i + 32u));
        const __m128i d = _mm_loadu_si128((const void *)(src + i + 48u));
        _mm_stream_si128((void *)(dst + i), a);
        _mm_stream_si128((void *)(dst + i + 16u), b);
        _mm_stream_si128((void *)(dst + i + 32u), c);
        _mm_stream_si128((void *)(dst + i + 48u), d);
    }
    memcpy(dst + i, src + i, n - i);
    _mm_sfence();
}

__attribute__((target("avx512f"))) static void copy_nt64(uint8_t *dst, const uint8_t *src, size_t n) {
    size_t head = (64u - ((uintptr_t)dst & 63u)) & 63u;
    if (head > n) head = n;
    memcpy(dst, src, head);
    size_t i = head;
    for (; i + 256u <= n; i += 256u) {
        const __m512i a = _mm512_loadu_si512((const void *)(src + i));
        const __m512i b = _mm512_loadu_si512((const void *)(src + i + 64u));
        const __m512i c = _mm512_loadu_si512((const void *)(src + i + 128u));
        const __m512i d = _mm512_loadu_si512((const void *)(src + i + 192u));
        _mm512_stream_si512((void *)(dst + i), a);
        _mm512_stream_si512((void *)(dst + i + 64u), b);
        _mm512_stream_si512((void *)(dst + i + 128u), c);
        _mm512_stream_si512((void *)(dst + i + 192u), d);
    }
    memcpy(dst + i, src + i, n - i);
    _mm_sfence();
}

#endif

int hz_txn_streaming_width(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 64 : 16;
#else
    return 0;
#endif
}

/* Copies with stores of `width` bytes as hz_txn_streaming_width says them (64, 16), else memcpy. */
static void copy_width(int width, void *dst, const void *src, size_t n) {
#if defined(__x86_64__)
    if (width == 64) copy_nt64(dst, src, n);
    else if (width == 16) copy_nt16(dst, src, n);
    else memcpy(dst, src, n);
#else
    (void)width;
    memcpy(dst, src, n);
#endif
}

int hz_txn_copy_streaming(void *dst, const void *src, size_t n, int width) {
    int w = hz_txn_streaming_width();
    if (width == 16 && w) w = 16;
    copy_width(w, dst, src, n);
    return w;
}

uint32_t hz_txn_default_threads(void) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN), n = cpus * 3 / 4;
    return n < 1 ? 1u : n > 12 ? 12u : (uint32_t)n;
}

/* ---- the threaded transport's copy threads ------------------------------------------------------ */

/* Why no lock per piece: at a hand-out every copy thread wakes at once, and with a mutex around the
 * claim they would queue on it; a contended mutex puts the losers to sleep, and waking each one costs
 * tens of microseconds on a virtual machine, as much as copying its piece (an OLMoE blob is 12 pieces of
 * 266 KB). So a piece is claimed with one atomic increment of its fill's claim word and finished with
 * another; a thread takes the mutex only to wake a side that went to sleep, and to keep a failure's
 * message. */

/* Polls *seq until it moves from `seen` or spin_ns pass. Waking a sleeping thread costs tens of
 * microseconds on a virtual machine, as much as copying a piece, and the rounds of one decode step come
 * a layer apart: threads that poll for a while after their last piece are awake for the next round. */
static void spin_on(const hz_transactor *t, _Atomic uint64_t *seq, uint64_t seen) {
    if (!t->spin_ns) return;
    const uint64_t until = now_ns() + t->spin_ns;
    while (atomic_load_explicit(seq, memory_order_acquire) == seen && now_ns() < until) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static void store_min(_Atomic uint64_t *a, uint64_t v) {
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v < cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
    }
}

static void store_max(_Atomic uint64_t *a, uint64_t v) {
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* Tells the loading thread that a fill finished or (piecewise) a piece landed. The seq_cst pair (bump
 * done_seq, then read loader_asleep; the loader sets loader_asleep, then reads done_seq) means that
 * one of the two sees the other: the loader does not sleep through it, or it is woken. */
static void wake_loader(hz_transactor *t) {
    atomic_fetch_add_explicit(&t->done_seq, 1u, memory_order_seq_cst);
    if (atomic_load_explicit(&t->loader_asleep, memory_order_seq_cst)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_signal(&t->done_cv);
        pthread_mutex_unlock(&t->mu);
    }
}

/* The loading thread: waits until done_seq moves from `seen` (polling spin_ns first). */
static void wait_done(hz_transactor *t, uint64_t seen) {
    spin_on(t, &t->done_seq, seen);
    if (atomic_load_explicit(&t->done_seq, memory_order_acquire) != seen) return;
    pthread_mutex_lock(&t->mu);
    atomic_store_explicit(&t->loader_asleep, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&t->done_seq, memory_order_seq_cst) == seen) pthread_cond_wait(&t->done_cv, &t->mu);
    atomic_store_explicit(&t->loader_asleep, 0, memory_order_relaxed);
    pthread_mutex_unlock(&t->mu);
}

/* The loading thread: tells the copy threads that fills were handed out (the same pairing as
 * wake_loader, with `sleepers`). */
static void wake_copiers(hz_transactor *t) {
    atomic_fetch_add_explicit(&t->work_seq, 1u, memory_order_seq_cst);
    if (atomic_load_explicit(&t->sleepers, memory_order_seq_cst)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_broadcast(&t->work_cv);
        pthread_mutex_unlock(&t->mu);
    }
}

/* Takes the next piece of the oldest fill that has one left: *out, *piece of *pieces. 0: none left. */
static int claim_piece(hz_transactor *t, txn_slot **out, uint32_t *piece, uint32_t *pieces) {
    for (;;) {
        txn_slot *best = NULL;
        uint64_t best_order = UINT64_MAX;
        for (uint32_t k = 0; k < t->nslots; k++) {
            txn_slot *s = &t->slots[k];
            const uint64_t w = atomic_load_explicit(&s->claim, memory_order_relaxed);
            if (CLAIM_NEXT(w) >= CLAIM_PIECES(w)) continue;
            const uint64_t o = atomic_load_explicit(&s->order, memory_order_relaxed);
            if (o < best_order) {
                best = s;
                best_order = o;
            }
        }
        if (!best) return 0;
        /* The slot may have moved on since the scan: only the increment's own result counts. */
        const uint64_t w = atomic_fetch_add_explicit(&best->claim, 1u, memory_order_acq_rel);
        if (CLAIM_NEXT(w) < CLAIM_PIECES(w)) {
            *out = best;
            *piece = CLAIM_NEXT(w);
            *pieces = CLAIM_PIECES(w);
            return 1;
        }
    }
}

/* Copies piece `piece` of fill `s` into staging, then counts it finished. */
static void run_piece(hz_transactor *t, txn_slot *s, uint32_t piece, uint32_t pieces) {
    /* Read once, before the fill is handed back: once the loader has seen the last piece done it may
     * return, and the test knob hz_transactor_set_piecewise may then change this field unordered. */
    const int piecewise = t->piecewise;
    const uint64_t off = (uint64_t)piece * t->piece_bytes;
    const uint64_t len = t->row_bytes - off < t->piece_bytes ? t->row_bytes - off : t->piece_bytes;
    int st = fault_point(t, HZ_TXN_FAULT_STAGING_COPY);
    if (st == HZ_OK) {
        const uint32_t delay = atomic_load_explicit(&t->copy_delay_us, memory_order_relaxed);
        if (delay) usleep(delay);
        const uint64_t t0 = now_ns();
        copy_width(t->stream_width, s->buf + off, s->src + off, (size_t)len);
        const uint64_t t1 = now_ns();
        atomic_fetch_add_explicit(&t->staging_chunks, 1u, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->copy_bytes, len, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->thread_ns, t1 - t0, memory_order_relaxed);
        store_min(&s->first_ns, t0);
        store_max(&s->last_ns, t1);
        if (piecewise) atomic_fetch_or_explicit(&s->landed, UINT64_C(1) << piece, memory_order_release);
    } else {
        /* hz_error's message is per thread: keep it for the loading thread to report. The status is set
         * inside the same critical section as the message: a loading thread that sees the status and
         * then takes the mutex finds the message there (it cannot take the mutex before this section
         * ends, since the status it read was written inside it). */
        pthread_mutex_lock(&t->mu);
        int none = HZ_OK;
        if (atomic_compare_exchange_strong_explicit(&s->status, &none, st, memory_order_relaxed,
                                                    memory_order_relaxed) &&
            !t->fail_set && t->cur_items) {
            const hz_txn_item *it = &t->cur_items[s->item];
            snprintf(t->fail_msg, sizeof t->fail_msg,
                     "transactor: injected fault in the staging copy of layer %u expert %u (piece %u of %u, "
                     "copy thread)", it->layer, it->expert, piece + 1, pieces);
            t->fail_set = 1;
        }
        pthread_mutex_unlock(&t->mu);
    }
    /* After this the fill may be reused: nothing below touches s. */
    const uint32_t done = atomic_fetch_add_explicit(&s->done, 1u, memory_order_acq_rel) + 1u;
    if (done == pieces || (st == HZ_OK && piecewise)) wake_loader(t);
}

static void copy_thread_main(void *arg) {
    hz_transactor *t = arg;
    for (;;) {
        /* Read before looking for work: a hand-out after the look moves it, so nothing is slept through. */
        const uint64_t seen = atomic_load_explicit(&t->work_seq, memory_order_seq_cst);
        txn_slot *s = NULL;
        uint32_t piece = 0, pieces = 0;
        if (claim_piece(t, &s, &piece, &pieces)) {
            run_piece(t, s, piece, pieces);
            continue;
        }
        if (atomic_load_explicit(&t->stop, memory_order_acquire)) break;
        spin_on(t, &t->work_seq, seen);
        if (atomic_load_explicit(&t->work_seq, memory_order_acquire) != seen) continue;
        pthread_mutex_lock(&t->mu);
        atomic_fetch_add_explicit(&t->sleepers, 1u, memory_order_seq_cst);
        while (!atomic_load_explicit(&t->stop, memory_order_relaxed) &&
               atomic_load_explicit(&t->work_seq, memory_order_seq_cst) == seen)
            pthread_cond_wait(&t->work_cv, &t->mu);
        atomic_fetch_sub_explicit(&t->sleepers, 1u, memory_order_relaxed);
        pthread_mutex_unlock(&t->mu);
    }
}

static void stop_threads(hz_transactor *t) {
    if (!t->threads) return;
    pthread_mutex_lock(&t->mu);
    atomic_store_explicit(&t->stop, 1, memory_order_release);
    atomic_fetch_add_explicit(&t->work_seq, 1u, memory_order_seq_cst);
    pthread_cond_broadcast(&t->work_cv);
    pthread_mutex_unlock(&t->mu);
    for (uint32_t i = 0; i < t->started; i++) uv_thread_join(&t->threads[i]);
    free(t->threads);
    t->threads = NULL;
    t->started = 0;
}

/* ---- creation and destruction ------------------------------------------------------------------- */

void hz_transactor_destroy(hz_transactor *t) {
    if (!t) return;
    hz_backend *be = t->be;
    stop_threads(t);
    if (t->slots || t->group_ev) {
        /* Copies read the staging buffers (or the registered backing) until they complete: drain first. */
        be->ops->queue_sync(be, HZ_QUEUE_COPY);
    }
    if (t->slots)
        for (uint32_t i = 0; i < t->nslots; i++)
            if (t->slots[i].ev) be->ops->event_destroy(be, t->slots[i].ev);
    if (t->group_ev) be->ops->event_destroy(be, t->group_ev);
    if (t->reg_ptr) be->ops->host_unregister(be, t->reg_ptr);
    if (t->staging) be->ops->pinned_free(be, t->staging);
    free(t->slots);
    free(t->by_order);
    if (t->conds) {
        pthread_cond_destroy(&t->work_cv);
        pthread_cond_destroy(&t->done_cv);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static int create_staging(hz_transactor *t, uint32_t slots) {
    hz_backend *be = t->be;
    uint64_t total;
    if (!hz_mul_ok(t->row_bytes, slots, &total))
        return hz_error(HZ_ECAPACITY, "transactor: %u staging slots of %llu bytes overflow", slots,
                        (unsigned long long)t->row_bytes);
    t->nslots = slots;
    t->slots = calloc(slots, sizeof *t->slots);
    if (!t->slots) return hz_error(HZ_ENOMEM, "transactor: out of memory for %u slots", slots);
    int st = be->ops->pinned_alloc(be, total, (void **)&t->staging);
    if (st) return hz_error_prefix(st, "allocating %llu bytes of pinned staging", (unsigned long long)total);
    for (uint32_t i = 0; i < slots; i++) {
        t->slots[i].buf = t->staging + (uint64_t)i * t->row_bytes;
        st = be->ops->event_create(be, &t->slots[i].ev);
        if (st) {
            t->slots[i].ev = NULL;
            return hz_error_prefix(st, "creating the event of staging slot %u", i);
        }
    }
    return HZ_OK;
}

/* mu held or no thread running. */
static void set_pieces(hz_transactor *t, uint64_t chunk_bytes) {
    t->chunk_bytes = chunk_bytes;
    /* A piece smaller than this costs more in hand-over than it gains in parallel copying: a blob is
     * split into one piece per thread at most. Piecewise, each of those into `waves` pieces (at most 64
     * in all), and the loader sends a run only once it holds 1 / waves of the blob (or the blob's end):
     * the threads' first pieces land together, and their H2D overlaps the copies of the next wave. */
    uint64_t min_piece = chunk_bytes ? chunk_bytes : 256u * 1024u;
    uint64_t pieces = t->row_bytes / min_piece;
    if (pieces < 1) pieces = 1;
    if (pieces > t->nthreads) pieces = t->nthreads;
    if (t->piecewise) {
        pieces *= t->waves;
        if (pieces > 64u) pieces = 64u; /* one bit each in txn_slot.ready */
    }
    /* Cache-line aligned pieces, so two threads never write the same line of a slot. */
    uint64_t piece = (t->row_bytes + pieces - 1) / pieces;
    piece = (piece + 63u) & ~(uint64_t)63u;
    t->piece_bytes = piece;
    t->pieces = (uint32_t)((t->row_bytes + piece - 1) / piece);
    t->min_run = t->piecewise ? (t->pieces + t->waves - 1) / t->waves : t->pieces;
}

int hz_transactor_set_piecewise(hz_transactor *t, int on) {
    if (!t || t->transport != HZ_TXN_THREADED) return hz_error(HZ_EINVAL, "set_piecewise: not a threaded transactor");
    pthread_mutex_lock(&t->mu);
    int idle = t->cur_items == NULL;
    if (idle) {
        t->piecewise = on != 0;
        set_pieces(t, t->chunk_bytes);
    }
    pthread_mutex_unlock(&t->mu);
    return idle ? HZ_OK : hz_error(HZ_ESTATE, "set_piecewise: a load is running");
}

int hz_transactor_set_piece_bytes(hz_transactor *t, uint64_t bytes) {
    if (!t || t->transport != HZ_TXN_THREADED) return hz_error(HZ_EINVAL, "set_piece_bytes: not a threaded transactor");
    pthread_mutex_lock(&t->mu);
    int idle = t->cur_items == NULL;
    if (idle) set_pieces(t, bytes);
    pthread_mutex_unlock(&t->mu);
    return idle ? HZ_OK : hz_error(HZ_ESTATE, "set_piece_bytes: a load is running");
}

static int create_threads(hz_transactor *t, uint32_t threads, uint64_t chunk_bytes) {
    if (threads == 0) return hz_error(HZ_EINVAL, "transactor: the threaded transport needs at least one thread");
    t->nthreads = threads;
    set_pieces(t, chunk_bytes);
    t->by_order = calloc(t->nslots, sizeof *t->by_order);
    if (!t->by_order) return hz_error(HZ_ENOMEM, "transactor: out of memory for %u slot indices", t->nslots);
    pthread_cond_init(&t->work_cv, NULL);
    pthread_cond_init(&t->done_cv, NULL);
    t->conds = 1;
    t->threads = calloc(threads, sizeof *t->threads);
    if (!t->threads) return hz_error(HZ_ENOMEM, "transactor: out of memory for %u copy threads", threads);
    for (uint32_t i = 0; i < threads; i++) {
        int rc = uv_thread_create(&t->threads[i], copy_thread_main, t);
        if (rc != 0)
            return hz_error(HZ_ENOMEM, "transactor: uv_thread_create of copy thread %u of %u failed: %s", i + 1,
                            threads, uv_strerror(rc));
        t->started++;
    }
    return HZ_OK;
}

static int create_registration(hz_transactor *t) {
    hz_backend *be = t->be;
    uint64_t bytes = 0;
    const uint8_t *region = hz_backing_routed_region(t->backing, &bytes);
    if (!region || bytes == 0) return hz_error(HZ_EINVAL, "transactor: the backing has no routed region to register");
    if (!be->ops->host_register || !be->ops->host_unregister)
        return hz_error(HZ_EUNSUPPORTED, "backend '%s' cannot register host memory", be->name);
    /* The device only reads it; the region stays mprotect'ed read-only on the host. */
    int st = be->ops->host_register(be, (void *)(uintptr_t)region, bytes, 1);
    if (st)
        return hz_error_prefix(st, "registering the backing's routed region (%llu bytes) for direct DMA",
                               (unsigned long long)bytes);
    t->reg_ptr = (void *)(uintptr_t)region;
    t->reg_bytes = bytes;
    st = be->ops->event_create(be, &t->group_ev);
    if (st) {
        t->group_ev = NULL;
        return hz_error_prefix(st, "creating the registered transport's completion event");
    }
    return HZ_OK;
}

int hz_transactor_create(hz_backend *be, const hz_host_backing *backing, uint64_t row_bytes,
                         const hz_txn_config *cfg, hz_transactor **out) {
    *out = NULL;
    if (!be || !backing || !cfg || row_bytes == 0) return hz_error(HZ_EINVAL, "transactor: bad arguments");
    if (cfg->transport < 0 || cfg->transport >= HZ_TXN_TRANSPORT_COUNT)
        return hz_error(HZ_EUNSUPPORTED, "transactor: transport %d is not supported", cfg->transport);
    if (cfg->transport != HZ_TXN_REGISTERED && cfg->slots == 0)
        return hz_error(HZ_EINVAL, "transactor: transport %s needs at least one staging slot",
                        hz_txn_transport_name(cfg->transport));
    hz_transactor *t = calloc(1, sizeof *t);
    if (!t) return hz_error(HZ_ENOMEM, "transactor: out of memory");
    pthread_mutex_init(&t->mu, NULL);
    t->be = be;
    t->backing = backing;
    t->transport = cfg->transport;
    t->row_bytes = row_bytes;
    t->piecewise = cfg->transport == HZ_TXN_THREADED && cfg->piecewise;
    t->waves = cfg->waves ? cfg->waves : 2u;
    if (t->waves > 64u) t->waves = 64u;
    t->spin_ns = cfg->transport == HZ_TXN_THREADED ? (uint64_t)cfg->spin_us * 1000u : 0u;
    t->stream_width = cfg->streaming ? hz_txn_streaming_width() : 0; /* decided once, not per piece */
    int st = HZ_OK;
    if (cfg->transport == HZ_TXN_REGISTERED) {
        st = create_registration(t);
    } else {
        st = create_staging(t, cfg->slots);
        if (!st && cfg->transport == HZ_TXN_THREADED) st = create_threads(t, cfg->threads, cfg->chunk_bytes);
    }
    if (st) {
        hz_transactor_destroy(t); /* keeps the message: destroy reports nothing */
        return st;
    }
    *out = t;
    return HZ_OK;
}

/* ---- steps shared by the transports ----------------------------------------------------------- */

/* Waits for slot `s`'s last copy; on success the slot may be refilled. */
static int retire_slot(hz_transactor *t, txn_slot *s, uint32_t index) {
    pthread_mutex_lock(&t->mu);
    int copying = s->state == SLOT_COPYING;
    pthread_mutex_unlock(&t->mu);
    if (!copying) return HZ_OK;
    int st = t->be->ops->event_wait(t->be, s->ev);
    if (st) return hz_error_prefix(st, "waiting for the copy from staging slot %u", index);
    set_state(t, s, SLOT_IDLE);
    return HZ_OK;
}

/* `bytes` more went to the device (counted when the copy is accepted, whether or not the load later
 * fails: the device moved them); `blobs` more whole blobs were sent. */
static void count_h2d(hz_transactor *t, uint64_t bytes, uint64_t blobs) {
    pthread_mutex_lock(&t->mu);
    t->h2d_bytes += bytes;
    t->h2d_copies += blobs;
    pthread_mutex_unlock(&t->mu);
}

/* Enqueues staged slot `s` -> its item's row and records the slot's event. */
static int h2d_from_slot(hz_transactor *t, txn_slot *s, const hz_txn_item *it, uint32_t *issued) {
    hz_backend *be = t->be;
    int st = hz_backend_copy_h2d(be, HZ_QUEUE_COPY, it->dst, s->buf, t->row_bytes, HZ_PURPOSE_EXPERT);
    if (st) {
        set_state(t, s, SLOT_IDLE); /* refused: nothing reads the slot */
        return hz_error_prefix(st, "H2D of layer %u expert %u", it->layer, it->expert);
    }
    (*issued)++;
    /* From here the slot is read by the copy until its event completes, even if recording fails. */
    pthread_mutex_lock(&t->mu);
    set_state_locked(t, s, SLOT_COPYING);
    s->seq = ++t->next_seq;
    pthread_mutex_unlock(&t->mu);
    count_h2d(t, t->row_bytes, 1);
    st = be->ops->event_record(be, s->ev, HZ_QUEUE_COPY);
    if (st) return hz_error_prefix(st, "recording the completion of layer %u expert %u", it->layer, it->expert);
    return HZ_OK;
}

/* Piecewise: enqueues the H2D of pieces [first, first + count) of slot `s` (one copy), into the same
 * bytes of its item's row. The slot stays FILLING: nothing refills it before its last piece is sent and
 * that copy's event completes. */
static int h2d_pieces(hz_transactor *t, txn_slot *s, const hz_txn_item *it, uint32_t first, uint32_t count,
                      uint32_t *issued) {
    const uint64_t off = (uint64_t)first * t->piece_bytes;
    uint64_t end = (uint64_t)(first + count) * t->piece_bytes;
    if (end > t->row_bytes) end = t->row_bytes;
    int st = hz_backend_copy_h2d(t->be, HZ_QUEUE_COPY, (uint8_t *)it->dst + off, s->buf + off, end - off,
                                 HZ_PURPOSE_EXPERT);
    if (st)
        return hz_error_prefix(st, "H2D of layer %u expert %u (pieces %u..%u of %u)", it->layer, it->expert,
                               first + 1, first + count, t->pieces);
    (*issued)++;
    count_h2d(t, end - off, 0); /* each run as it goes: a later run's failure does not unsend this one */
    return HZ_OK;
}

/* Piecewise: after its last piece's H2D, slot `s` is read until the event recorded now completes. */
static int finish_pieces(hz_transactor *t, txn_slot *s, const hz_txn_item *it) {
    pthread_mutex_lock(&t->mu);
    set_state_locked(t, s, SLOT_COPYING);
    s->seq = ++t->next_seq;
    pthread_mutex_unlock(&t->mu);
    count_h2d(t, 0, 1); /* the bytes were counted run by run (h2d_pieces) */
    int st = t->be->ops->event_record(t->be, s->ev, HZ_QUEUE_COPY);
    if (st) return hz_error_prefix(st, "recording the completion of layer %u expert %u", it->layer, it->expert);
    return HZ_OK;
}

/* Piecewise: enqueues the run of landed pieces that starts at the first unsent one (one copy), once it
 * holds min_run pieces or reaches the blob's end; pieces go out in order. *sent_any: a run went out. */
static int send_landed(hz_transactor *t, txn_slot *s, const hz_txn_item *it, uint32_t *issued, int *sent_any) {
    const uint64_t landed = atomic_load_explicit(&s->landed, memory_order_acquire);
    const uint32_t first = s->sent;
    uint32_t end = first;
    while (end < s->pieces && (landed >> end & 1u)) end++;
    if (end == first || (end - first < t->min_run && end < s->pieces)) return HZ_OK; /* wait for more */
    int st = h2d_pieces(t, s, it, first, end - first, issued);
    if (st != HZ_OK) return st;
    s->sent = end;
    *sent_any = 1;
    return HZ_OK;
}

/* After every item has been enqueued: waits for each slot's last copy. */
static int retire_all(hz_transactor *t, hz_txn_result *res) {
    for (uint32_t k = 0; k < t->nslots; k++) {
        pthread_mutex_lock(&t->mu);
        int copying = t->slots[k].state == SLOT_COPYING;
        pthread_mutex_unlock(&t->mu);
        if (!copying) continue;
        int st = retire_slot(t, &t->slots[k], k);
        if (st) return st;
        res->copies_done++;
    }
    return HZ_OK;
}

/* ---- serial ------------------------------------------------------------------------------------- */

/* Whether a cancellable load was asked to stop starting items. */
static int cancelled(const _Atomic int *cancel) {
    return cancel && atomic_load_explicit(cancel, memory_order_acquire) != 0;
}

static int load_serial(hz_transactor *t, const hz_txn_item *items, uint32_t n, const _Atomic int *cancel,
                       hz_txn_result *res, uint32_t *issued) {
    res->loaded = n;
    for (uint32_t i = 0; i < n; i++) {
        if (cancelled(cancel)) {
            res->loaded = i; /* items i.. were never started */
            break;
        }
        uint32_t si = i % t->nslots;
        txn_slot *s = &t->slots[si];
        const hz_txn_item *it = &items[i];
        /* The slot still feeds the copy issued nslots items ago: refill it only once that copy is done. */
        int st = retire_slot(t, s, si);
        if (st) return st;
        if (i >= t->nslots) res->copies_done++;
        const uint8_t *blob = hz_backing_expert_blob(t->backing, it->layer, it->expert);
        if (!blob) return hz_error(HZ_ERANGE, "transactor: no blob for layer %u expert %u", it->layer, it->expert);
        st = fault_point(t, HZ_TXN_FAULT_STAGING_COPY);
        if (st)
            return hz_error(st, "transactor: injected fault in the staging copy of layer %u expert %u", it->layer,
                            it->expert);
        set_state(t, s, SLOT_FILLING);
        const uint32_t delay = atomic_load_explicit(&t->copy_delay_us, memory_order_relaxed);
        if (delay) usleep(delay);
        uint64_t t0 = now_ns();
        copy_width(t->stream_width, s->buf, blob, (size_t)t->row_bytes);
        uint64_t dt = now_ns() - t0;
        set_state(t, s, SLOT_STAGED);
        atomic_fetch_add_explicit(&t->staging_copies, 1u, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->staging_chunks, 1u, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->copy_bytes, t->row_bytes, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->copy_ns, dt, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->thread_ns, dt, memory_order_relaxed);
        st = h2d_from_slot(t, s, it, issued);
        if (st) return st;
    }
    return retire_all(t, res);
}

/* ---- threaded ----------------------------------------------------------------------------------- */

/* Adds a finished fill's copy time to copy_ns: the wall time in which at least one staging copy ran,
 * counted as the union of the fills' spans (from their first piece's start to their last one's end).
 * Fills are taken back about in the order they finish; one taken back out of order may count a little
 * of its span twice. Loading thread. */
static void count_fill(hz_transactor *t, txn_slot *s) {
    const uint64_t first = atomic_load_explicit(&s->first_ns, memory_order_relaxed);
    const uint64_t last = atomic_load_explicit(&s->last_ns, memory_order_relaxed);
    const uint64_t from = first > t->copy_until ? first : t->copy_until;
    if (last > from) atomic_fetch_add_explicit(&t->copy_ns, last - from, memory_order_relaxed);
    if (last > t->copy_until) t->copy_until = last;
    atomic_fetch_add_explicit(&t->staging_copies, 1u, memory_order_relaxed);
    if (first <= last) { /* a fill with at least one piece copied */
        if (first > s->handout_ns) atomic_fetch_add_explicit(&t->fill_wait_ns, first - s->handout_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->fill_span_ns, last - first, memory_order_relaxed);
    }
}

/* After fill s's (last) H2D was enqueued: the loading thread's reaction to its last piece. */
static void count_lag(hz_transactor *t, const txn_slot *s) {
    const uint64_t last = atomic_load_explicit(&s->last_ns, memory_order_relaxed), now = now_ns();
    if (now > last) atomic_fetch_add_explicit(&t->fill_lag_ns, now - last, memory_order_relaxed);
}

/* Moves fill `s` on as far as its pieces allow: a finished fill's H2D is enqueued (piecewise: each run
 * of landed pieces as it fills up, and the slot's event after the last). *progress: something was
 * enqueued; *waiting: pieces are still being copied. Loading thread. */
static int advance_fill(hz_transactor *t, txn_slot *s, const hz_txn_item *items, uint32_t *issued,
                        uint32_t *enqueued, int *progress, int *waiting) {
    /* done first (acquire): a failed piece sets status before it counts itself done. */
    const uint32_t done = atomic_load_explicit(&s->done, memory_order_acquire);
    const int status = atomic_load_explicit(&s->status, memory_order_relaxed);
    if (status) {
        pthread_mutex_lock(&t->mu);
        char msg[sizeof t->fail_msg];
        snprintf(msg, sizeof msg, "%s", t->fail_set ? t->fail_msg : "transactor: a staging copy failed");
        pthread_mutex_unlock(&t->mu);
        return hz_error(status, "%s", msg);
    }
    const hz_txn_item *it = &items[s->item];
    if (t->piecewise) {
        int st = send_landed(t, s, it, issued, progress);
        if (st != HZ_OK) return st;
        /* The slot's event goes after the last run, once every piece has also counted itself done:
         * only then can the slot be refilled without a late count landing in the next fill. */
        if (s->sent < s->pieces || done < s->pieces) {
            *waiting = 1;
            return HZ_OK;
        }
        count_fill(t, s);
        st = finish_pieces(t, s, it);
        if (st != HZ_OK) return st;
        count_lag(t, s);
    } else {
        if (done < s->pieces) {
            *waiting = 1;
            return HZ_OK;
        }
        count_fill(t, s);
        int st = h2d_from_slot(t, s, it, issued); /* FILLING -> COPYING (IDLE if refused) */
        if (st != HZ_OK) return st;
        count_lag(t, s);
    }
    (*enqueued)++;
    *progress = 1;
    return HZ_OK;
}

/* The filling slots in hand-out order into t->by_order; returns their count. Loading thread. */
static uint32_t filling_by_order(hz_transactor *t) {
    uint32_t n = 0;
    for (uint32_t k = 0; k < t->nslots; k++) {
        if (t->slots[k].state != SLOT_FILLING) continue;
        const uint64_t o = atomic_load_explicit(&t->slots[k].order, memory_order_relaxed);
        uint32_t i = n++;
        while (i > 0 && atomic_load_explicit(&t->slots[t->by_order[i - 1]].order, memory_order_relaxed) > o) {
            t->by_order[i] = t->by_order[i - 1];
            i--;
        }
        t->by_order[i] = k;
    }
    return n;
}

/* Hands items from *next on to idle slots (their pieces to the copy threads); returns how many. */
static uint32_t hand_out(hz_transactor *t, const hz_txn_item *items, uint32_t *next, uint32_t limit, int *st) {
    uint32_t handed = 0;
    const uint64_t now = now_ns();
    for (uint32_t k = 0; k < t->nslots && *next < limit; k++) {
        txn_slot *f = &t->slots[k];
        if (f->state != SLOT_IDLE) continue;
        const hz_txn_item *it = &items[*next];
        const uint8_t *blob = hz_backing_expert_blob(t->backing, it->layer, it->expert);
        if (!blob) {
            *st = hz_error(HZ_ERANGE, "transactor: no blob for layer %u expert %u", it->layer, it->expert);
            break;
        }
        f->src = blob;
        f->item = (*next)++;
        f->pieces = t->pieces;
        f->sent = 0;
        f->handout_ns = now;
        atomic_store_explicit(&f->done, 0u, memory_order_relaxed);
        atomic_store_explicit(&f->status, HZ_OK, memory_order_relaxed);
        atomic_store_explicit(&f->landed, 0u, memory_order_relaxed);
        atomic_store_explicit(&f->first_ns, UINT64_MAX, memory_order_relaxed);
        atomic_store_explicit(&f->last_ns, 0u, memory_order_relaxed);
        atomic_store_explicit(&f->order, ++t->next_order, memory_order_relaxed);
        pthread_mutex_lock(&t->mu);
        set_state_locked(t, f, SLOT_FILLING);
        pthread_mutex_unlock(&t->mu);
        atomic_store_explicit(&f->claim, CLAIM_WORD(f->pieces), memory_order_release); /* published */
        handed++;
    }
    return handed;
}

/* After a failure: takes back the pieces nobody claimed and waits for the claimed ones, so that no
 * thread still writes a staging buffer (or reads the items) once the load returns. Loading thread. */
static void take_back_fills(hz_transactor *t) {
    for (uint32_t k = 0; k < t->nslots; k++) {
        txn_slot *s = &t->slots[k];
        if (s->state != SLOT_FILLING) continue;
        for (;;) {
            const uint64_t w = atomic_fetch_add_explicit(&s->claim, 1u, memory_order_acq_rel);
            if (CLAIM_NEXT(w) >= CLAIM_PIECES(w)) break;
            atomic_fetch_add_explicit(&s->done, 1u, memory_order_release);
        }
    }
    for (;;) {
        const uint64_t seen = atomic_load_explicit(&t->done_seq, memory_order_seq_cst);
        int running = 0;
        for (uint32_t k = 0; k < t->nslots; k++) {
            txn_slot *s = &t->slots[k];
            if (s->state == SLOT_FILLING && atomic_load_explicit(&s->done, memory_order_acquire) < s->pieces)
                running = 1;
        }
        if (!running) break;
        wait_done(t, seen);
    }
    /* Piecewise, H2D runs of a fill may still read its slot: the failure path drains the copy queue
     * before any slot is reused. Otherwise nothing reads a filling slot. */
    if (!t->piecewise) {
        pthread_mutex_lock(&t->mu);
        for (uint32_t k = 0; k < t->nslots; k++)
            if (t->slots[k].state == SLOT_FILLING) set_state_locked(t, &t->slots[k], SLOT_IDLE);
        pthread_mutex_unlock(&t->mu);
    }
}

/* The loading thread hands blobs to idle slots (their pieces to the copy threads), enqueues each H2D as
 * soon as a slot's pieces are all in (piecewise: each run), and refills a slot only after its copy's
 * event has completed. */
static int load_threaded(hz_transactor *t, const hz_txn_item *items, uint32_t n, const _Atomic int *cancel,
                         hz_txn_result *res, uint32_t *issued) {
    int st = HZ_OK;
    uint32_t next = 0, enqueued = 0, limit = n; /* a cancel lowers the limit to the items handed out */
    pthread_mutex_lock(&t->mu);
    t->cur_items = items;
    t->fail_set = 0;
    pthread_mutex_unlock(&t->mu);
    while (st == HZ_OK) {
        /* Read before the fills are looked at: a piece that lands after the look moves it. */
        const uint64_t seen = atomic_load_explicit(&t->done_seq, memory_order_seq_cst);
        int progress = 0, waiting = 0;
        /* Finished fills first, oldest first: the copy queue should never wait for the hand-outs. */
        const uint32_t nf = filling_by_order(t);
        for (uint32_t i = 0; i < nf && st == HZ_OK; i++)
            st = advance_fill(t, &t->slots[t->by_order[i]], items, issued, &enqueued, &progress, &waiting);
        if (st != HZ_OK) break;
        if (limit == n && cancelled(cancel)) limit = next;
        if (enqueued == limit) break;
        if (hand_out(t, items, &next, limit, &st)) {
            wake_copiers(t);
            continue;
        }
        if (st != HZ_OK || progress) continue;
        if (waiting) {
            wait_done(t, seen);
            continue;
        }
        /* Every slot feeds a copy: wait for the oldest. */
        txn_slot *oldest = NULL;
        for (uint32_t k = 0; k < t->nslots; k++)
            if (t->slots[k].state == SLOT_COPYING && (!oldest || t->slots[k].seq < oldest->seq))
                oldest = &t->slots[k];
        if (!oldest) {
            st = hz_error(HZ_ESTATE, "transactor: no staging slot is idle, filling or copying");
            break;
        }
        st = retire_slot(t, oldest, (uint32_t)(oldest - t->slots));
        if (st == HZ_OK) res->copies_done++;
    }
    if (st != HZ_OK) take_back_fills(t); /* sets no error: the failure's message stays */
    pthread_mutex_lock(&t->mu);
    t->cur_items = NULL;
    pthread_mutex_unlock(&t->mu);
    if (st != HZ_OK) return st;
    res->loaded = limit; /* handed out in item order: a prefix */
    return retire_all(t, res);
}

/* ---- registered ----------------------------------------------------------------------------------- */

static int load_registered(hz_transactor *t, const hz_txn_item *items, uint32_t n, const _Atomic int *cancel,
                           hz_txn_result *res, uint32_t *issued) {
    hz_backend *be = t->be;
    for (uint32_t i = 0; i < n; i++) {
        if (cancelled(cancel)) { /* nothing of item i on was issued: a prefix, as the other transports */
            n = i;
            break;
        }
        const hz_txn_item *it = &items[i];
        const uint8_t *blob = hz_backing_expert_blob(t->backing, it->layer, it->expert);
        if (!blob) return hz_error(HZ_ERANGE, "transactor: no blob for layer %u expert %u", it->layer, it->expert);
        int st = hz_backend_copy_h2d(be, HZ_QUEUE_COPY, it->dst, blob, t->row_bytes, HZ_PURPOSE_EXPERT);
        if (st) return hz_error_prefix(st, "H2D of layer %u expert %u (registered)", it->layer, it->expert);
        (*issued)++;
        count_h2d(t, t->row_bytes, 1);
    }
    res->loaded = n;
    if (n == 0) return HZ_OK;
    /* The copy queue is in order: one event after the last copy marks them all. */
    int st = be->ops->event_record(be, t->group_ev, HZ_QUEUE_COPY);
    if (st) return hz_error_prefix(st, "recording the completion of %u registered copies", n);
    st = be->ops->event_wait(be, t->group_ev);
    if (st) return hz_error_prefix(st, "waiting for %u registered copies", n);
    res->copies_done = n;
    return HZ_OK;
}

/* ---- load ------------------------------------------------------------------------------------- */

int hz_transactor_load(hz_transactor *t, const hz_txn_item *items, uint32_t n, hz_txn_result *res) {
    return hz_transactor_load_cancellable(t, items, n, NULL, res);
}

int hz_transactor_load_cancellable(hz_transactor *t, const hz_txn_item *items, uint32_t n, const _Atomic int *cancel,
                                   hz_txn_result *res) {
    hz_backend *be = t->be;
    res->drained = 1;
    res->copies_done = 0;
    res->loaded = 0;
    uint32_t issued = 0;
    int st;
    switch (t->transport) {
    case HZ_TXN_THREADED: st = load_threaded(t, items, n, cancel, res, &issued); break;
    case HZ_TXN_REGISTERED: st = load_registered(t, items, n, cancel, res, &issued); break;
    default: st = load_serial(t, items, n, cancel, res, &issued); break;
    }
    if (st == HZ_OK) return HZ_OK;
    /* Failure: no host copy runs any more (the threaded loader waited for its threads), but copies may
     * still be queued or running. Drain the copy queue so that neither the staging slots nor the
     * destination rows are touched after we return; if even that fails, say so. */
    pthread_mutex_lock(&t->mu);
    uint32_t busy = t->busy;
    pthread_mutex_unlock(&t->mu);
    if (issued > 0 || busy > 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hz_last_error_message());
        int ds = be->ops->queue_sync(be, HZ_QUEUE_COPY);
        if (ds != HZ_OK) {
            res->drained = 0;
            hz_error(st, "%s; draining the copy queue afterwards also failed: %s", msg, hz_last_error_message());
            return st;
        }
        for (uint32_t k = 0; k < t->nslots; k++) set_state(t, &t->slots[k], SLOT_IDLE);
        hz_error(st, "%s", msg);
    }
    return st;
}

void hz_transactor_stats(hz_transactor *t, hz_txn_stats *out) {
    pthread_mutex_lock(&t->mu);
    out->transport = t->transport;
    out->threads = t->transport == HZ_TXN_THREADED ? t->nthreads : t->transport == HZ_TXN_SERIAL ? 1u : 0u;
    out->slots = t->nslots;
    out->slots_busy = t->busy;
    out->staging_bytes = (uint64_t)t->nslots * t->row_bytes;
    out->staging_high_water = t->high_water;
    out->h2d_bytes = t->h2d_bytes;
    out->h2d_copies = t->h2d_copies;
    out->staging_copies = atomic_load_explicit(&t->staging_copies, memory_order_relaxed);
    out->staging_chunks = atomic_load_explicit(&t->staging_chunks, memory_order_relaxed);
    out->staging_copy_bytes = atomic_load_explicit(&t->copy_bytes, memory_order_relaxed);
    out->staging_copy_ns = atomic_load_explicit(&t->copy_ns, memory_order_relaxed);
    out->staging_thread_ns = atomic_load_explicit(&t->thread_ns, memory_order_relaxed);
    out->fill_wait_ns = atomic_load_explicit(&t->fill_wait_ns, memory_order_relaxed);
    out->fill_span_ns = atomic_load_explicit(&t->fill_span_ns, memory_order_relaxed);
    out->fill_lag_ns = atomic_load_explicit(&t->fill_lag_ns, memory_order_relaxed);
    out->registered_bytes = t->reg_bytes;
    out->piecewise = t->piecewise;
    out->streaming = t->stream_width != 0;
    uint32_t pending = 0;
    if (t->transport == HZ_TXN_THREADED)
        for (uint32_t k = 0; k < t->nslots; k++) pending += t->slots[k].state == SLOT_FILLING;
    out->fills_pending = pending;
    pthread_mutex_unlock(&t->mu);
}

void hz_transactor_set_copy_delay(hz_transactor *t, uint32_t usec) {
    if (t) atomic_store_explicit(&t->copy_delay_us, usec, memory_order_relaxed);
}

void hz_transactor_inject(hz_transactor *t, hz_txn_fault point, uint64_t nth, int status) {
    if (!t || (unsigned)point >= HZ_TXN_FAULT_COUNT) return;
    atomic_store_explicit(&t->fault_status[point], status ? status : HZ_EIO, memory_order_relaxed);
    const uint64_t calls = atomic_load_explicit(&t->fault_calls[point], memory_order_relaxed);
    atomic_store_explicit(&t->fault_at[point], nth ? calls + nth : 0u, memory_order_release);
}
