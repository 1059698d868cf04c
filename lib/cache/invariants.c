/* The cache invariant checker (compiled when HZ_INVARIANTS is defined: debug and test builds).
 *
 * Row contents are read back through the backend as D2H copies with purpose HZ_PURPOSE_VERIFY, on every
 * backend alike, so the checker exercises the same path a GPU build would and its reads stay visible
 * in the counters without ever touching the expert-D2H figure that must stay zero. The reads are
 * read_now copies, ordered with neither queue: one on the copy queue would be ordered after any H2D
 * still in flight and would hide a publication that did not wait for its transfers, and one on the
 * compute queue (as before 2026-12-01) waited for the kernels queued there, among them the decode
 * step's experts waiting at their gate for this very acquire: every GPU miss with the experts ahead
 * then stalled until the gate gave up after 10 s, and the step failed (scripts/demo's build). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backing/backing.h"
#include "cache/cache_internal.h"

#ifdef HZ_INVARIANTS

#define FAIL(...)                                                                                    \
    do {                                                                                             \
        snprintf(why, why_len, __VA_ARGS__);                                                         \
        st = HZ_ESTATE;                                                                              \
        goto done;                                                                                   \
    } while (0)

/* Reads row r back and compares it with its expert's blob in the backing. */
static int check_row_content(hz_cache *c, uint32_t r, uint8_t *buf, char *why, size_t why_len) {
    const hz_row *row = &c->rows[r];
    const uint8_t *blob = hz_backing_expert_blob(c->backing, row->layer, row->expert);
    if (!blob) {
        snprintf(why, why_len, "row %u claims layer %u expert %u, which the backing does not have", r, row->layer,
                 row->expert);
        return HZ_ESTATE;
    }
    const uint8_t *src = c->arena + (uint64_t)r * c->row_bytes;
    int st = hz_backend_read_now(c->be, buf, src, c->row_bytes, HZ_PURPOSE_VERIFY);
    if (st) {
        snprintf(why, why_len, "reading row %u back failed: %s", r, hz_last_error_message());
        return HZ_ESTATE;
    }
    if (memcmp(buf, blob, (size_t)c->row_bytes) != 0) {
        uint64_t at = 0;
        while (at < c->row_bytes && buf[at] == blob[at]) at++;
        snprintf(why, why_len, "row %u (layer %u expert %u, %s) differs from the backing at byte %llu", r, row->layer,
                 row->expert, hz_row_state_name(row->state), (unsigned long long)at);
        return HZ_ESTATE;
    }
    return HZ_OK;
}

static int is_loading(const hz_row *row) {
    return row->state == HZ_ROW_RESERVED || row->state == HZ_ROW_IN_TRANSFER || row->state == HZ_ROW_PREFETCHED;
}

/* Rows being loaded or loaded and unpublished (reserved, in transfer, prefetched) hold experts that the
 * current generation does not map, each at most once: a publication can never map an expert twice or
 * replace a resident copy. */
static int check_loads(hz_cache *c, const hz_gen *cur, char *why, size_t why_len) {
    for (uint32_t r = 0; r < c->nrows; r++) {
        const hz_row *row = &c->rows[r];
        if (!is_loading(row)) continue;
        if (row->layer >= c->layers || row->expert >= c->experts) {
            snprintf(why, why_len, "row %u is %s for layer %u expert %u, out of range", r,
                     hz_row_state_name(row->state), row->layer, row->expert);
            return HZ_ESTATE;
        }
        uint32_t mapped = cur->map[(size_t)row->layer * c->experts + row->expert];
        if (mapped != HZ_NO_ROW) {
            snprintf(why, why_len, "row %u is %s for layer %u expert %u, which row %u already holds published", r,
                     hz_row_state_name(row->state), row->layer, row->expert, mapped);
            return HZ_ESTATE;
        }
        for (uint32_t q = 0; q < r; q++) {
            const hz_row *o = &c->rows[q];
            if (is_loading(o) && o->layer == row->layer && o->expert == row->expert) {
                snprintf(why, why_len, "rows %u (%s) and %u (%s) both hold unpublished layer %u expert %u", q,
                         hz_row_state_name(o->state), r, hz_row_state_name(row->state), row->layer, row->expert);
                return HZ_ESTATE;
            }
        }
    }
    return HZ_OK;
}

/* The prefetch bookkeeping: the prefetched rows are exactly the ready list, of the ready layer; every
 * prefetched expert was adopted (a prefetch hit), given up (wasted) or is still ready; a queued request
 * is a valid group; with prefetch off nothing was ever requested. */
static int check_prefetch(hz_cache *c, char *why, size_t why_len) {
    const hz_prefetcher *pf = &c->pf;
    uint32_t prefetched = 0;
    for (uint32_t r = 0; r < c->nrows; r++) prefetched += c->rows[r].state == HZ_ROW_PREFETCHED;
    if (prefetched != pf->ready_n) {
        snprintf(why, why_len, "%u rows are prefetched, the ready list has %u", prefetched, pf->ready_n);
        return HZ_ESTATE;
    }
    for (uint32_t i = 0; i < pf->ready_n; i++) {
        uint32_t r = pf->ready_rows[i];
        if (r >= c->nrows || c->rows[r].state != HZ_ROW_PREFETCHED || c->rows[r].layer != pf->ready_layer ||
            c->rows[r].expert != pf->ready_experts[i]) {
            snprintf(why, why_len, "ready entry %u (layer %u expert %u) names row %u, which does not hold it", i,
                     pf->ready_layer, pf->ready_experts[i], r);
            return HZ_ESTATE;
        }
    }
    const hz_prefetch_counts *n = &pf->n;
    if (n->experts != n->hits + n->wasted_rows + pf->ready_n) {
        snprintf(why, why_len, "%llu experts prefetched, yet %llu hits + %llu wasted + %u ready",
                 (unsigned long long)n->experts, (unsigned long long)n->hits, (unsigned long long)n->wasted_rows,
                 pf->ready_n);
        return HZ_ESTATE;
    }
    if (pf->mode == HZ_PREFETCH_OFF && (n->requests || pf->queued || pf->loading || n->experts || pf->started)) {
        snprintf(why, why_len, "prefetch is off, yet %llu requests, %llu experts, queued %d, loading %d, thread %d",
                 (unsigned long long)n->requests, (unsigned long long)n->experts, pf->queued, pf->loading,
                 pf->started);
        return HZ_ESTATE;
    }
    if ((uint64_t)pf->gate.left > ((uint64_t)pf->gate.pause << HZ_PREFETCH_GATE_MAX_SHIFT) || n->gated > n->requests ||
        (pf->gate.pct == 0 && (n->gated || n->gate_closed || pf->gate.left || pf->gate.strikes)) ||
        pf->gate.strikes > n->gate_closed) {
        snprintf(why, why_len, "prefetch gate: %u predictions left to decline (pause %u), %llu declined of %llu requests, "
                 "%llu closures at %u%%, %u failed windows in a row", pf->gate.left, pf->gate.pause,
                 (unsigned long long)n->gated, (unsigned long long)n->requests, (unsigned long long)n->gate_closed,
                 pf->gate.pct, pf->gate.strikes);
        return HZ_ESTATE;
    }
    if (pf->mode != HZ_PREFETCH_OFF && !pf->started && !pf->stop) {
        snprintf(why, why_len, "prefetch is on but its thread does not run");
        return HZ_ESTATE;
    }
    if (pf->queued) {
        if (pf->q_layer >= c->layers || pf->q_n == 0 || pf->q_n > c->capacity) {
            snprintf(why, why_len, "queued prefetch of layer %u with %u experts", pf->q_layer, pf->q_n);
            return HZ_ESTATE;
        }
        for (uint32_t i = 0; i < pf->q_n; i++)
            if (pf->q_ids[i] >= c->experts) {
                snprintf(why, why_len, "queued prefetch names expert %u of %u", pf->q_ids[i], c->experts);
                return HZ_ESTATE;
            }
    }
    return HZ_OK;
}

int hz_cache_check_invariants_locked(hz_cache *c, int check_content, const uint32_t *rows_to_read,
                                     uint32_t n_rows_to_read, char *why, size_t why_len) {
    int st = HZ_OK;
    uint32_t *refs = calloc(c->nrows, sizeof *refs);
    uint8_t *in_gen = calloc(c->nrows, 1);
    uint8_t *in_current = calloc(c->nrows, 1);
    uint8_t *buf = check_content ? malloc((size_t)c->row_bytes) : NULL;
    if (!refs || !in_gen || !in_current || (check_content && !buf)) {
        snprintf(why, why_len, "out of memory");
        st = HZ_ENOMEM;
        goto done;
    }
    hz_gen *cur = atomic_load_explicit(&c->current, memory_order_relaxed);
    if (!cur || !cur->current) FAIL("no current generation");
    uint64_t leases = 0;
    uint32_t published_expected = 0;
    for (hz_gen *g = cur; g; g = (g == cur) ? c->old : g->next) {
        if (g != cur && g->current) FAIL("old generation %llu is marked current", (unsigned long long)g->id);
        if (g != cur && g->id >= cur->id)
            FAIL("old generation %llu is not older than current %llu", (unsigned long long)g->id,
                 (unsigned long long)cur->id);
        if (g != cur && g->leases == 0 && !g->consumer_recorded &&
            atomic_load(&c->state) == HZ_CACHE_OK)
            FAIL("generation %llu has no lease and no consumer yet was not retired", (unsigned long long)g->id);
        uint32_t nl = 0;
        for (hz_generation *l = g->lease_list; l; l = l->next) {
            if (l->gen != g) FAIL("a lease on generation %llu points elsewhere", (unsigned long long)g->id);
            nl++;
        }
        if (nl != g->leases)
            FAIL("generation %llu counts %u leases but lists %u", (unsigned long long)g->id, g->leases, nl);
        leases += g->leases;
        memset(in_gen, 0, c->nrows);
        for (uint32_t l = 0; l < c->layers; l++) {
            uint32_t n = 0;
            for (uint32_t e = 0; e < c->experts; e++) {
                uint32_t r = g->map[(size_t)l * c->experts + e];
                if (r == HZ_NO_ROW) continue;
                n++;
                if (r >= c->nrows) FAIL("generation %llu maps layer %u expert %u to row %u of %u", (unsigned long long)g->id, l, e, r, c->nrows);
                if (in_gen[r]) FAIL("generation %llu maps row %u twice", (unsigned long long)g->id, r);
                in_gen[r] = 1;
                refs[r]++;
                const hz_row *row = &c->rows[r];
                if (row->layer != l || row->expert != e)
                    FAIL("generation %llu maps layer %u expert %u to row %u, which holds layer %u expert %u",
                         (unsigned long long)g->id, l, e, r, row->layer, row->expert);
                if (g == cur) {
                    in_current[r] = 1;
                    if (row->state != HZ_ROW_PUBLISHED)
                        FAIL("current generation %llu maps row %u in state %s", (unsigned long long)g->id, r,
                             hz_row_state_name(row->state));
                } else if (row->state != HZ_ROW_PUBLISHED && row->state != HZ_ROW_VICTIM_PENDING) {
                    FAIL("live generation %llu maps row %u in state %s", (unsigned long long)g->id, r,
                         hz_row_state_name(row->state));
                }
            }
            if (n != g->resident[l])
                FAIL("generation %llu claims %u resident in layer %u but maps %u", (unsigned long long)g->id,
                     g->resident[l], l, n);
            if (n > c->capacity)
                FAIL("generation %llu has %u resident in layer %u, above capacity %u", (unsigned long long)g->id, n, l,
                     c->capacity);
            if (g == cur) published_expected += n;
        }
    }
    if (leases != c->active_leases)
        FAIL("%llu leases on live generations, %u counted active", (unsigned long long)leases, c->active_leases);
    uint32_t counts[HZ_ROW_STATE_COUNT] = {0};
    for (uint32_t r = 0; r < c->nrows; r++) {
        const hz_row *row = &c->rows[r];
        if (row->state >= HZ_ROW_STATE_COUNT) FAIL("row %u in invalid state %u", r, row->state);
        counts[row->state]++;
        if (refs[r] != row->gen_refs)
            FAIL("row %u: %u live generations map it, gen_refs says %u", r, refs[r], row->gen_refs);
        switch (row->state) {
        case HZ_ROW_FREE:
        case HZ_ROW_REUSABLE:
        case HZ_ROW_RESERVED:
        case HZ_ROW_IN_TRANSFER:
        case HZ_ROW_PREFETCHED:
            /* A live generation is one with a lease or an incomplete consumer event (or the current
             * one): a row it maps must not be handed out or written. */
            if (refs[r]) FAIL("row %u is %s while %u live generation(s) map it", r, hz_row_state_name(row->state), refs[r]);
            break;
        case HZ_ROW_PUBLISHED:
            if (!in_current[r]) FAIL("row %u is published but the current generation does not map it", r);
            break;
        case HZ_ROW_VICTIM_PENDING:
            if (in_current[r]) FAIL("row %u is a pending victim yet mapped by the current generation", r);
            if (!refs[r]) FAIL("row %u is a pending victim that no live generation maps (should be reusable)", r);
            break;
        default:
            break;
        }
    }
    if (counts[HZ_ROW_PUBLISHED] != published_expected)
        FAIL("%u rows published, current generation maps %u", counts[HZ_ROW_PUBLISHED], published_expected);
    if (!c->in_txn && (counts[HZ_ROW_RESERVED] || counts[HZ_ROW_IN_TRANSFER]))
        FAIL("no transaction runs, yet %u rows are reserved and %u in transfer", counts[HZ_ROW_RESERVED],
             counts[HZ_ROW_IN_TRANSFER]);
    if (!c->in_txn) {
        hz_txn_stats ts;
        hz_transactor_stats(c->tx, &ts);
        if (ts.slots_busy) FAIL("no transaction runs, yet %u staging slots are busy", ts.slots_busy);
        if (ts.fills_pending)
            FAIL("no transaction runs, yet %u staging fills are still with the copy threads", ts.fills_pending);
        if (ts.transport == HZ_TXN_REGISTERED && (ts.staging_high_water || ts.staging_copies || ts.staging_bytes))
            FAIL("registered transport, yet %llu staging copies, %llu bytes of staging, high water %llu",
                 (unsigned long long)ts.staging_copies, (unsigned long long)ts.staging_bytes,
                 (unsigned long long)ts.staging_high_water);
    }
    if ((st = check_loads(c, cur, why, why_len))) goto done;
    if ((st = check_prefetch(c, why, why_len))) goto done;
    uint64_t d2h = atomic_load(&c->be->bytes[HZ_D2H][HZ_PURPOSE_EXPERT]);
    if (d2h) FAIL("%llu bytes of expert D2H were counted", (unsigned long long)d2h);
    if (check_content) {
        if (rows_to_read) {
            for (uint32_t i = 0; i < n_rows_to_read; i++)
                if ((st = check_row_content(c, rows_to_read[i], buf, why, why_len))) goto done;
        } else {
            /* Mapped rows, and prefetched ones: their copies are complete, publication may come any time. */
            for (uint32_t r = 0; r < c->nrows; r++)
                if ((refs[r] || c->rows[r].state == HZ_ROW_PREFETCHED) &&
                    (st = check_row_content(c, r, buf, why, why_len)))
                    goto done;
        }
    }
    c->invariant_checks++;
done:
    free(refs);
    free(in_gen);
    free(in_current);
    free(buf);
    return st;
}

int hz_cache_check_invariants(hz_cache *c, int check_content, char *why, size_t why_len) {
    if (!c) {
        snprintf(why, why_len, "NULL cache");
        return HZ_EINVAL;
    }
    hz_txn_waiter w; /* the caller may hold leases: the running transaction must not wait for them */
    pthread_mutex_lock(&c->mu);
    hz_cache_wait_begin_locked(c, &w, 0);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&c->txn_mu);
    pthread_mutex_lock(&c->mu);
    hz_cache_wait_end_locked(c, &w);
    int st = hz_cache_check_invariants_locked(c, check_content, NULL, 0, why, why_len);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->txn_mu);
    return st;
}

#endif
