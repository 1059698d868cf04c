/* The serial miss transactor: backing -> pinned staging -> device row, one staging slot per copy in
 * flight, slots reused only after their copy's event completes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backing/backing.h"
#include "transact/transact.h"

typedef struct txn_slot {
    uint8_t *buf;
    hz_bevent *ev;
    int busy; /* a copy from this slot was enqueued and its event not yet seen complete */
} txn_slot;

struct hz_transactor {
    hz_backend *be;
    const hz_host_backing *backing;
    uint64_t row_bytes;
    uint32_t nslots;
    uint8_t *staging; /* one pinned allocation, nslots x row_bytes */
    txn_slot *slots;
    /* Counters are read by hz_cache_stats_json from other threads while a load runs. */
    pthread_mutex_t mu;
    uint32_t busy;
    uint64_t high_water;
    uint64_t h2d_bytes, h2d_copies, staging_copies;
    uint64_t fault_at[HZ_TXN_FAULT_COUNT];
    int fault_status[HZ_TXN_FAULT_COUNT];
    uint64_t fault_calls[HZ_TXN_FAULT_COUNT];
};

static int fault_point(hz_transactor *t, hz_txn_fault p) {
    pthread_mutex_lock(&t->mu);
    uint64_t n = ++t->fault_calls[p];
    int st = HZ_OK;
    if (t->fault_at[p] && n == t->fault_at[p]) {
        st = t->fault_status[p];
        t->fault_at[p] = 0;
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

static void set_busy(hz_transactor *t, txn_slot *s, int busy) {
    pthread_mutex_lock(&t->mu);
    if (busy && !s->busy) {
        t->busy++;
        uint64_t inuse = (uint64_t)t->busy * t->row_bytes;
        if (inuse > t->high_water) t->high_water = inuse;
    } else if (!busy && s->busy) {
        t->busy--;
    }
    s->busy = busy;
    pthread_mutex_unlock(&t->mu);
}

void hz_transactor_destroy(hz_transactor *t) {
    if (!t) return;
    hz_backend *be = t->be;
    if (t->slots) {
        /* Copies read the staging buffers until they complete: drain before freeing them. */
        be->ops->queue_sync(be, HZ_QUEUE_COPY);
        for (uint32_t i = 0; i < t->nslots; i++)
            if (t->slots[i].ev) be->ops->event_destroy(be, t->slots[i].ev);
    }
    if (t->staging) be->ops->pinned_free(be, t->staging);
    free(t->slots);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int hz_transactor_create(hz_backend *be, const hz_host_backing *backing, uint64_t row_bytes, uint32_t slots,
                         hz_transactor **out) {
    *out = NULL;
    if (!be || !backing || row_bytes == 0 || slots == 0)
        return hz_error(HZ_EINVAL, "transactor: bad arguments");
    uint64_t total;
    if (!hz_mul_ok(row_bytes, slots, &total))
        return hz_error(HZ_ECAPACITY, "transactor: %u staging slots of %llu bytes overflow", slots,
                        (unsigned long long)row_bytes);
    hz_transactor *t = calloc(1, sizeof *t);
    if (!t) return hz_error(HZ_ENOMEM, "transactor: out of memory");
    pthread_mutex_init(&t->mu, NULL);
    t->be = be;
    t->backing = backing;
    t->row_bytes = row_bytes;
    t->nslots = slots;
    t->slots = calloc(slots, sizeof *t->slots);
    if (!t->slots) {
        hz_transactor_destroy(t);
        return hz_error(HZ_ENOMEM, "transactor: out of memory for %u slots", slots);
    }
    int st = be->ops->pinned_alloc(be, total, (void **)&t->staging);
    if (st) {
        hz_transactor_destroy(t);
        return hz_error_prefix(st, "allocating %llu bytes of pinned staging", (unsigned long long)total);
    }
    for (uint32_t i = 0; i < slots; i++) {
        t->slots[i].buf = t->staging + (uint64_t)i * row_bytes;
        st = be->ops->event_create(be, &t->slots[i].ev);
        if (st) {
            hz_transactor_destroy(t);
            return hz_error_prefix(st, "creating the event of staging slot %u", i);
        }
    }
    *out = t;
    return HZ_OK;
}

/* Waits for slot `s`'s last copy; on success the slot may be refilled. */
static int retire_slot(hz_transactor *t, txn_slot *s, uint32_t index) {
    if (!s->busy) return HZ_OK;
    int st = t->be->ops->event_wait(t->be, s->ev);
    if (st) return hz_error_prefix(st, "waiting for the copy from staging slot %u", index);
    set_busy(t, s, 0);
    return HZ_OK;
}

int hz_transactor_load(hz_transactor *t, const hz_txn_item *items, uint32_t n, hz_txn_result *res) {
    hz_backend *be = t->be;
    res->drained = 1;
    res->copies_done = 0;
    int st = HZ_OK;
    uint32_t issued = 0;
    for (uint32_t i = 0; i < n && !st; i++) {
        uint32_t si = i % t->nslots;
        txn_slot *s = &t->slots[si];
        const hz_txn_item *it = &items[i];
        /* The slot still feeds the copy issued nslots items ago: refill it only once that copy is done. */
        st = retire_slot(t, s, si);
        if (st) break;
        if (i >= t->nslots) res->copies_done++;
        const uint8_t *blob = hz_backing_expert_blob(t->backing, it->layer, it->expert);
        if (!blob) {
            st = hz_error(HZ_ERANGE, "transactor: no blob for layer %u expert %u", it->layer, it->expert);
            break;
        }
        st = fault_point(t, HZ_TXN_FAULT_STAGING_COPY);
        if (st) {
            hz_error(st, "transactor: injected fault in the staging copy of layer %u expert %u", it->layer,
                     it->expert);
            break;
        }
        memcpy(s->buf, blob, (size_t)t->row_bytes);
        pthread_mutex_lock(&t->mu);
        t->staging_copies++;
        pthread_mutex_unlock(&t->mu);

        st = hz_backend_copy_h2d(be, HZ_QUEUE_COPY, it->dst, s->buf, t->row_bytes, HZ_PURPOSE_EXPERT);
        if (st) {
            hz_error_prefix(st, "H2D of layer %u expert %u", it->layer, it->expert);
            break;
        }
        issued++;
        /* From here the slot is read by the copy until its event completes, even if recording fails. */
        set_busy(t, s, 1);
        pthread_mutex_lock(&t->mu);
        t->h2d_bytes += t->row_bytes;
        t->h2d_copies++;
        pthread_mutex_unlock(&t->mu);
        st = be->ops->event_record(be, s->ev, HZ_QUEUE_COPY);
        if (st) {
            hz_error_prefix(st, "recording the completion of layer %u expert %u", it->layer, it->expert);
            break;
        }
    }
    if (st == HZ_OK) {
        for (uint32_t k = 0; k < t->nslots && !st; k++) {
            if (!t->slots[k].busy) continue;
            st = retire_slot(t, &t->slots[k], k);
            if (!st) res->copies_done++;
        }
        if (st == HZ_OK) return HZ_OK;
    }
    /* Failure: some copies may still be queued or running. Drain the copy queue so that neither the
     * staging slots nor the destination rows are touched after we return; if even that fails, say so. */
    if (issued > 0 || t->busy > 0) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hz_last_error_message());
        int ds = be->ops->queue_sync(be, HZ_QUEUE_COPY);
        if (ds != HZ_OK) {
            res->drained = 0;
            hz_error(st, "%s; draining the copy queue afterwards also failed: %s", msg, hz_last_error_message());
            return st;
        }
        for (uint32_t k = 0; k < t->nslots; k++) set_busy(t, &t->slots[k], 0);
        hz_error(st, "%s", msg);
    }
    return st;
}

void hz_transactor_stats(hz_transactor *t, hz_txn_stats *out) {
    pthread_mutex_lock(&t->mu);
    out->slots = t->nslots;
    out->slots_busy = t->busy;
    out->staging_bytes = (uint64_t)t->nslots * t->row_bytes;
    out->staging_high_water = t->high_water;
    out->h2d_bytes = t->h2d_bytes;
    out->h2d_copies = t->h2d_copies;
    out->staging_copies = t->staging_copies;
    pthread_mutex_unlock(&t->mu);
}

void hz_transactor_inject(hz_transactor *t, hz_txn_fault point, uint64_t nth, int status) {
    if (!t || (unsigned)point >= HZ_TXN_FAULT_COUNT) return;
    pthread_mutex_lock(&t->mu);
    t->fault_at[point] = nth ? t->fault_calls[point] + nth : 0;
    t->fault_status[point] = status ? status : HZ_EIO;
    pthread_mutex_unlock(&t->mu);
}
