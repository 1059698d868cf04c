/* Speculative prefetch (hz_cache_options.prefetch = HZ_PREFETCH_NEXT_LAYER; doc/cache-contract.md,
 * "Prefetch").
 *
 * A model predicts the experts of the layer it will acquire next and hands them to hz_cache_prefetch,
 * which only queues the request and wakes the cache's prefetch thread. That thread loads the predicted
 * experts that are missing into spare rows through the same transactor as a demand miss (so every
 * transport works unchanged) and leaves them *ready*: loaded, complete, mapped by no generation. The
 * next miss transaction of that layer publishes the ready rows its group wants, in one complete new
 * generation whose victims are chosen outside the group, exactly as a demand miss would choose them;
 * ready rows the group does not want stay ready until a newer prediction replaces them or a miss needs
 * their rows (then they are freed: wasted). So a prediction changes which copies happen when, never what
 * is resident after an acquire: a wrong one costs copy bandwidth, not hits.
 *
 * Why a thread rather than starting the copies on the caller's: the serial and threaded transports make
 * host copies into a small staging ring and wait for slots to come free, which would stall the model's
 * thread for most of the transfer; on the prefetch thread the copies overlap the layer being computed
 * whatever the transport.
 *
 * What keeps a prediction from getting in the way: the thread takes only spare rows free at that moment
 * (it never waits for one, so it can never wait on a lease), it never evicts (nothing is published by
 * it), a miss that the running load does not serve cancels the rest of it (the miss then waits only for
 * the copies already started), and a demand miss that lacks rows frees ready rows before it would
 * wait. Failures are counted, not returned: the acquire of the layer then loads what it needs itself and
 * reports its own errors. A failure that leaves copies the cache cannot account for moves the cache to
 * FAULTED, exactly as for a demand miss.
 *
 * Locking: txn_mu (the transaction lock) before mu, as everywhere in the cache. The request slot, the
 * ready rows and the counters are guarded by mu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"

/* ---- the request, run on the prefetch thread --------------------------------------------------- */

/* Records a failure the cache recovered from (mu held): counted, kept for the stats, logged. */
static void note_failure(hz_cache *c, uint32_t layer, const char *msg) {
    c->pf.n.failures++;
    snprintf(c->pf.last_error, sizeof c->pf.last_error, "layer %u: %s", layer, msg);
    hz_log(HZ_LOG_WARN, "prefetch of layer %u failed before publication (the acquire loads on demand): %s", layer,
           msg);
}

/* ---- the gate ------------------------------------------------------------------------------------
 * A prediction pays only when the acquire uses what it loaded; the copies of a wrong one compete with
 * the demand misses for the staging threads and the copy engine. On the full-size OLMoE-1B-7B shape
 * with random weights (H200, 30 of 64 experts resident, 2026-11-29, doc/benchmarks.md tenth round) in two
 * runs 246 of the 9,650 and of the 8,367 experts prefetched were used, and decode ran 34-38% slower
 * with prefetch on. So once kGateWindow prefetched experts have been resolved, the gate closes when
 * fewer than gate.pct in 100 were used, declines the next gate.pause predictions
 * (hz_cache_prefetch_admit), and opens again with a new window: a probe, since routing can become
 * predictable later in a text. A probe costs a window of mostly wasted copies, and on the same shape
 * with a 4-layer model (H200, c30, eleventh round) the fixed pause still cost a quarter of the decode
 * rate, so each further failed window in a row doubles the pause (up to HZ_PREFETCH_GATE_MAX_SHIFT
 * doublings) and a window that passes restores it. */
enum { kGateWindow = 64, kGatePauseTokens = 16, kGateDefaultPct = 25 };

/* Counts resolved prefetched experts (used or given up) and closes the gate at the end of a window
 * whose share of used ones is below gate.pct. mu held. */
static void gate_outcome(hz_prefetcher *pf, uint32_t used, uint32_t wasted) {
    hz_prefetch_gate *gt = &pf->gate;
    if (gt->pct == 0 || used + wasted == 0) return;
    gt->win_hits += used;
    gt->win_wasted += wasted;
    const uint64_t total = (uint64_t)gt->win_hits + gt->win_wasted;
    if (total < gt->window) return;
    if ((uint64_t)gt->win_hits * 100u < (uint64_t)gt->pct * total) {
        const uint32_t shift = gt->strikes < HZ_PREFETCH_GATE_MAX_SHIFT ? gt->strikes : HZ_PREFETCH_GATE_MAX_SHIFT;
        gt->left = gt->pause << shift;
        if (gt->strikes < UINT32_MAX) gt->strikes++;
        pf->n.gate_closed++;
    } else {
        gt->strikes = 0;
    }
    gt->win_hits = gt->win_wasted = 0;
}

/* Prefetched rows given up unused: counted, and an outcome for the gate. mu held. */
static void note_wasted(hz_prefetcher *pf, uint32_t rows) {
    pf->n.wasted_rows += rows;
    gate_outcome(pf, 0, rows);
}

/* Whether expert e is in group[0..n). */
static int in_group(uint32_t e, const uint32_t *group, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (group[i] == e) return 1;
    return 0;
}

/* A newer prediction of `layer` replaces the ready rows: those it predicts again stay ready, the others
 * are freed (wasted). mu held. */
static void keep_ready_of(hz_cache *c, uint32_t layer, const uint32_t *ids, uint32_t n) {
    hz_prefetcher *pf = &c->pf;
    if (pf->ready_layer != layer) {
        hz_prefetch_drop_ready_locked(c);
        return;
    }
    uint32_t keep = 0;
    for (uint32_t i = 0; i < pf->ready_n; i++) {
        uint32_t r = pf->ready_rows[i], e = pf->ready_experts[i];
        if (in_group(e, ids, n)) {
            pf->ready_rows[keep] = r;
            pf->ready_experts[keep++] = e;
        } else {
            c->rows[r].state = HZ_ROW_FREE;
            c->rows[r].layer = c->rows[r].expert = 0;
        }
    }
    note_wasted(pf, pf->ready_n - keep);
    pf->ready_n = keep;
}

/* Whether expert e of the ready layer is in a ready row. mu held. */
static int is_ready(const hz_prefetcher *pf, uint32_t e) { return in_group(e, pf->ready_experts, pf->ready_n); }

/* Reserves rows for the predicted experts that are neither resident nor ready, as many as spare rows are
 * free now, and fills the transactor items. Returns their count (0: nothing to do). mu held. */
static uint32_t reserve_now(hz_cache *c, uint32_t layer, const uint32_t *ids, uint32_t n) {
    if (hz_cache_scan_old(c) != HZ_OK) return 0; /* FAULTED: the caller sees the state */
    const hz_gen *g = atomic_load_explicit(&c->current, memory_order_relaxed);
    const uint32_t *lmap = g->map + (size_t)layer * c->experts;
    uint32_t *missing = c->scratch_missing;
    uint32_t nmiss = 0;
    for (uint32_t i = 0; i < n; i++)
        if (lmap[ids[i]] == HZ_NO_ROW && !(c->pf.ready_layer == layer && is_ready(&c->pf, ids[i])))
            missing[nmiss++] = ids[i];
    uint32_t k = hz_cache_count_spares(c);
    if (k > nmiss) k = nmiss;
    if (k > c->spare_rows - c->pf.ready_n) k = c->spare_rows - c->pf.ready_n; /* the ready list's room */
    if (k == 0) return 0;
    hz_cache_take_rows(c, k, layer, missing);
    hz_cache_mark_in_transfer(c, k, layer, missing);
    return k;
}

/* After the copies of k rows: they become the ready rows, or the cache goes back to how it was. A
 * cancelled load completed only its first res->loaded items; the rows of the others were never written
 * and are spares again. mu held. */
static void finish_load(hz_cache *c, uint32_t layer, uint32_t k, int st, const hz_txn_result *res, uint64_t t0) {
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", hz_last_error_message());
        if (!res->drained) {
            /* A copy may still write rows the cache can no longer account for. */
            hz_cache_set_faulted(c, "prefetch for layer %u: %s", layer, msg);
            return;
        }
        hz_cache_unreserve_rows(c, k);
        note_failure(c, layer, msg);
        return;
    }
    hz_prefetcher *pf = &c->pf;
    for (uint32_t i = res->loaded; i < k; i++) {
        hz_row *row = &c->rows[c->scratch_rows[i]];
        row->state = HZ_ROW_FREE;
        row->layer = row->expert = 0;
    }
    pf->n.cancelled += k - res->loaded;
    k = res->loaded;
    /* Appended to the ready rows kept for this layer: together at most the spare rows, the only rows
     * no generation maps while every layer holds its capacity. */
    for (uint32_t i = 0; i < k; i++) {
        uint32_t r = c->scratch_rows[i];
        c->rows[r].state = HZ_ROW_PREFETCHED;
        pf->ready_rows[pf->ready_n + i] = r;
        pf->ready_experts[pf->ready_n + i] = c->rows[r].expert;
    }
    if (k == 0) return; /* cancelled before its first copy */
    pf->ready_layer = layer;
    pf->ready_n += k;
    pf->n.rounds++;
    pf->n.experts += k;
    /* The miss path's clock for a prefetch: first copy to the rows being complete (their publication
     * waits for the acquire by design, which is not transfer time). */
    hz_cache_count_miss_round(c, k, hz_now_ns() - t0);
}

/* Runs one request: the ready rows it does not predict again give way, then reserve and load. txn_mu
 * held; takes mu. */
static void run_request(hz_cache *c, uint32_t layer, const uint32_t *ids, uint32_t n) {
    pthread_mutex_lock(&c->mu);
    keep_ready_of(c, layer, ids, n);
    uint32_t k = hz_cache_is_faulted(c) ? 0 : reserve_now(c, layer, ids, n);
    if (k == 0) {
        if (!hz_cache_is_faulted(c)) c->pf.n.skipped++;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->in_txn = 1;
    pthread_mutex_unlock(&c->mu);

    uint64_t t0 = hz_now_ns();
    hz_txn_result res;
    int st = hz_transactor_load_cancellable(c->tx, c->scratch_items, k, &c->pf.cancel, &res);

    pthread_mutex_lock(&c->mu);
    c->in_txn = 0;
    finish_load(c, layer, k, st, &res, t0);
    pthread_mutex_unlock(&c->mu);
}

static void *prefetch_main(void *arg) {
    hz_cache *c = arg;
    hz_prefetcher *pf = &c->pf;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!pf->stop && !pf->queued) pthread_cond_wait(&pf->work_cv, &c->mu);
        if (pf->stop) break;
        /* Take the request: the slot is free for the next one while this one runs. */
        uint32_t layer = pf->q_layer, n = pf->q_n;
        memcpy(pf->ids, pf->q_ids, (size_t)n * sizeof *pf->ids);
        pf->queued = 0;
        pf->loading = 1;
        pf->cur_layer = layer;
        pf->cur_n = n;
        /* A demand miss that cancelled the previous load (or arrived while this request was queued) may
         * still be waiting for the transaction lock: this load must not make it wait longer. */
        atomic_store_explicit(&pf->cancel, hz_cache_miss_waiting_locked(c), memory_order_relaxed);
        pthread_mutex_unlock(&c->mu);

        pthread_mutex_lock(&c->txn_mu);
        run_request(c, layer, pf->ids, n);
        pthread_mutex_unlock(&c->txn_mu);

        pthread_mutex_lock(&c->mu);
        pf->loading = 0;
        pthread_cond_broadcast(&pf->idle_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- setup and teardown -------------------------------------------------------------------------- */

int hz_prefetcher_init(hz_cache *c, int mode) {
    hz_prefetcher *pf = &c->pf;
    pf->mode = mode;
    pf->gate.pct = kGateDefaultPct;
    hz_env_u32("HZ_PREFETCH_GATE_PCT", 0, 100, &pf->gate.pct); /* 0: the gate never closes */
    pf->gate.window = kGateWindow;
    hz_env_u32("HZ_PREFETCH_GATE_WINDOW", 1, 1u << 20, &pf->gate.window); /* tests: a shorter window */
    pf->gate.pause = kGatePauseTokens * c->layers; /* about that many tokens: a prediction per layer */
    /* Tests: a prediction is loaded before the model goes on, so which predicted experts are used or
     * given up no longer depends on how the threads were scheduled. */
    hz_env_u32("HZ_PREFETCH_SYNC", 0, 1, &pf->sync);
    atomic_init(&pf->cancel, 0);
    pthread_cond_init(&pf->work_cv, NULL);
    pthread_cond_init(&pf->idle_cv, NULL);
    pf->conds = 1;
    if (mode == HZ_PREFETCH_OFF) return HZ_OK;
    pf->q_ids = calloc(c->capacity, sizeof *pf->q_ids);
    pf->ids = calloc(c->capacity, sizeof *pf->ids);
    pf->ready_rows = calloc(c->spare_rows, sizeof *pf->ready_rows);
    pf->ready_experts = calloc(c->spare_rows, sizeof *pf->ready_experts);
    if (!pf->q_ids || !pf->ids || !pf->ready_rows || !pf->ready_experts)
        return hz_error(HZ_ENOMEM, "out of memory for prefetch requests");
    int rc = pthread_create(&pf->thread, NULL, prefetch_main, c);
    if (rc != 0)
        return hz_error(HZ_ENOMEM, "the prefetch thread could not start (pthread_create returned %d)", rc);
    pf->started = 1;
    return HZ_OK;
}

void hz_prefetcher_fini(hz_cache *c) {
    hz_prefetcher *pf = &c->pf;
    if (pf->started) {
        pthread_mutex_lock(&c->mu);
        pf->stop = 1;
        if (pf->queued) pf->n.dropped++; /* never started: nothing to undo */
        pf->queued = 0;
        pthread_cond_broadcast(&pf->work_cv);
        pthread_mutex_unlock(&c->mu);
        /* A running request ends with its rows ready (or given back) before the thread exits. */
        pthread_join(pf->thread, NULL);
        pf->started = 0;
    }
    free(pf->q_ids);
    free(pf->ids);
    free(pf->ready_rows);
    free(pf->ready_experts);
    pf->q_ids = pf->ids = pf->ready_rows = pf->ready_experts = NULL;
    pf->ready_n = 0; /* their rows go with the arena */
    if (pf->conds) {
        pthread_cond_destroy(&pf->work_cv);
        pthread_cond_destroy(&pf->idle_cv);
        pf->conds = 0;
    }
}

/* ---- requests ------------------------------------------------------------------------------------ */

int hz_prefetch_serves_locked(const hz_cache *c, uint32_t layer, const uint32_t *group, uint32_t n) {
    const hz_prefetcher *pf = &c->pf;
    const uint32_t *req = NULL;
    uint32_t req_n = 0;
    if (pf->loading && pf->cur_layer == layer) {
        req = pf->ids;
        req_n = pf->cur_n;
    } else if (pf->queued && pf->q_layer == layer) {
        req = pf->q_ids;
        req_n = pf->q_n;
    }
    if (!req) return 0;
    const hz_gen *g = atomic_load_explicit(&c->current, memory_order_relaxed);
    const uint32_t *lmap = g->map + (size_t)layer * c->experts;
    for (uint32_t i = 0; i < n; i++)
        if (lmap[group[i]] == HZ_NO_ROW && in_group(group[i], req, req_n)) return 1;
    return 0;
}

void hz_prefetch_yield_locked(hz_cache *c) {
    if (c->pf.loading) atomic_store_explicit(&c->pf.cancel, 1, memory_order_release);
}

int hz_cache_prefetch_mode(const hz_cache *cache) { return cache ? cache->pf.mode : HZ_PREFETCH_OFF; }

void hz_prefetch_drop_ready_locked(hz_cache *c) {
    hz_prefetcher *pf = &c->pf;
    for (uint32_t i = 0; i < pf->ready_n; i++) {
        hz_row *row = &c->rows[pf->ready_rows[i]];
        row->state = HZ_ROW_FREE;
        row->layer = row->expert = 0;
    }
    note_wasted(pf, pf->ready_n);
    pf->ready_n = 0;
}

int hz_prefetch_adopt_locked(hz_cache *c, uint32_t layer, const uint32_t *group, uint32_t n) {
    hz_prefetcher *pf = &c->pf;
    if (pf->ready_n == 0 || pf->ready_layer != layer) return HZ_OK;
    /* Split the ready rows: wanted ones into scratch_rows (for the publication), the others stay. */
    uint32_t k = 0, keep = 0;
    uint32_t *wanted = c->scratch_missing; /* the transaction's scratch (we hold txn_mu); k <= capacity */
    for (uint32_t i = 0; i < pf->ready_n; i++) {
        uint32_t r = pf->ready_rows[i], e = pf->ready_experts[i];
        if (in_group(e, group, n)) {
            c->scratch_rows[k] = r;
            wanted[k++] = e;
        } else {
            pf->ready_rows[keep] = r;
            pf->ready_experts[keep++] = e;
        }
    }
    if (k == 0) return HZ_OK;
    /* Counted before the publication, whose invariant check sees the accounting closed. */
    pf->ready_n = keep;
    pf->n.hits += k;
    pf->n.publications++;
    int st = hz_cache_publish(c, layer, wanted, k, group, n);
    if (st == HZ_EFAULTED) return hz_cache_fault_status(c);
    if (st) {
        /* Nothing changed before the swap: the rows are simply given up, the miss path loads them. */
        pf->n.hits -= k;
        pf->n.publications--;
        note_wasted(pf, k);
        hz_cache_unreserve_rows(c, k);
        c->failed_txns++;
        return st;
    }
    gate_outcome(pf, k, 0);
    return HZ_OK;
}

/* Whether one of ids[0..n) of `layer` is neither resident in the current generation nor ready. mu held. */
static int any_missing(const hz_cache *c, uint32_t layer, const uint32_t *ids, uint32_t n) {
    const hz_gen *g = atomic_load_explicit(&c->current, memory_order_relaxed);
    const uint32_t *lmap = g->map + (size_t)layer * c->experts;
    for (uint32_t i = 0; i < n; i++)
        if (lmap[ids[i]] == HZ_NO_ROW && !(c->pf.ready_layer == layer && is_ready(&c->pf, ids[i]))) return 1;
    return 0;
}

int hz_cache_prefetch(hz_cache *c, uint32_t layer, const uint32_t *experts, uint32_t n) {
    if (!c || !experts) return hz_error(HZ_EINVAL, "hz_cache_prefetch: NULL argument");
    if (c->pf.mode == HZ_PREFETCH_OFF)
        return hz_error(HZ_ESTATE, "hz_cache_prefetch: prefetch is off for this cache (hz_cache_options.prefetch)");
    if (hz_cache_is_faulted(c)) return hz_cache_fault_status(c);
    int st = hz_cache_validate_group(c, layer, experts, n);
    if (st) return hz_error_prefix(st, "hz_cache_prefetch");
    pthread_mutex_lock(&c->mu);
    hz_prefetcher *pf = &c->pf;
    pf->n.requests++;
    if (pf->stop || !any_missing(c, layer, experts, n)) {
        /* Everything predicted is resident or ready already: the thread need not wake. */
        pf->n.skipped++;
    } else {
        if (pf->queued) pf->n.dropped++; /* a request nobody started is out of date now */
        memcpy(pf->q_ids, experts, (size_t)n * sizeof *experts);
        pf->q_layer = layer;
        pf->q_n = n;
        pf->queued = 1;
        pthread_cond_signal(&pf->work_cv);
        /* The thread always finishes a request (it never waits for rows); FAULTED also broadcasts. The
         * caller may hold a lease (the CPU forward does): a demand transaction running meanwhile must
         * not wait for it (hz_cache.txn_waiters). */
        if (pf->sync && (pf->queued || pf->loading) && !hz_cache_is_faulted(c)) {
            hz_txn_waiter w;
            hz_cache_wait_begin_locked(c, &w, 0);
            while (pf->sync && (pf->queued || pf->loading) && !hz_cache_is_faulted(c))
                pthread_cond_wait(&pf->idle_cv, &c->mu);
            hz_cache_wait_end_locked(c, &w);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return HZ_OK;
}

int hz_cache_prefetch_admit(hz_cache *c) {
    if (!c || c->pf.mode == HZ_PREFETCH_OFF) return 0;
    pthread_mutex_lock(&c->mu);
    hz_prefetcher *pf = &c->pf;
    const int open = pf->gate.left == 0;
    if (!open) {
        pf->gate.left--;
        pf->n.requests++;
        pf->n.gated++;
    }
    pthread_mutex_unlock(&c->mu);
    return open;
}

void hz_cache_prefetch_wait(hz_cache *c) {
    if (!c || c->pf.mode == HZ_PREFETCH_OFF) return;
    pthread_mutex_lock(&c->mu);
    /* The thread always finishes a request (its copies are bounded; it never waits for rows). */
    hz_txn_waiter w;
    hz_cache_wait_begin_locked(c, &w, 0);
    while (c->pf.queued || c->pf.loading) pthread_cond_wait(&c->pf.idle_cv, &c->mu);
    hz_cache_wait_end_locked(c, &w);
    pthread_mutex_unlock(&c->mu);
}
