/* Ordered parallel map (see pack_pipeline.h). One mutex guards the claim counter, the consumer's
 * progress and the slot states; the work itself runs unlocked. */
#include "pack_pipeline.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* The size of hz_error's thread-local buffer, so a worker's message crosses threads untruncated. */
#define MSG_BYTES 1024

typedef struct slot_state {
    int ready; /* the item computed into this slot is complete and not yet consumed */
    int rc;
    char msg[MSG_BYTES];
} slot_state;

typedef struct pipeline pipeline;

typedef struct worker {
    pipeline *p;
    unsigned id;
    pthread_t thread;
} worker;

struct pipeline {
    const pack_pipeline_cfg *cfg;
    pthread_mutex_t mu;
    pthread_cond_t space; /* consumer freed a slot, or stop: workers wait here */
    pthread_cond_t done;  /* a worker completed an item: the consumer waits here */
    uint64_t next;        /* the next item to claim */
    uint64_t consumed;    /* items 0 .. consumed - 1 are consumed and their slots free */
    int stop;
    slot_state *st;
};

static void *worker_main(void *arg) {
    worker *w = arg;
    pipeline *p = w->p;
    const pack_pipeline_cfg *cfg = p->cfg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        /* item i reuses the slot of item i - window, which must be consumed first */
        while (!p->stop && p->next < cfg->n_items && p->next >= p->consumed + cfg->window)
            pthread_cond_wait(&p->space, &p->mu);
        if (p->stop || p->next >= cfg->n_items) break;
        uint64_t i = p->next++;
        unsigned s = (unsigned)(i % cfg->window);
        pthread_mutex_unlock(&p->mu);

        hz_error_clear();
        int rc = cfg->compute(cfg->ctx, i, cfg->slots[s], cfg->scratch[w->id]);

        pthread_mutex_lock(&p->mu);
        slot_state *ss = &p->st[s];
        ss->rc = rc;
        if (rc) snprintf(ss->msg, sizeof ss->msg, "%s", hz_last_error_message());
        ss->ready = 1;
        /* only the consumer waits on `done` */
        pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void request_stop(pipeline *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->space);
    pthread_mutex_unlock(&p->mu);
}

int pack_pipeline_run(const pack_pipeline_cfg *cfg) {
    if (!cfg || !cfg->threads || !cfg->window || !cfg->slots || !cfg->scratch || !cfg->compute ||
        !cfg->consume)
        return hz_error(HZ_EINVAL, "pack_pipeline_run: bad configuration");
    if (!cfg->n_items) return HZ_OK;

    pipeline p;
    memset(&p, 0, sizeof p);
    p.cfg = cfg;
    p.st = calloc(cfg->window, sizeof *p.st);
    worker *ws = calloc(cfg->threads, sizeof *ws);
    if (!p.st || !ws) {
        free(p.st);
        free(ws);
        return hz_error(HZ_ENOMEM, "out of memory for the worker pool");
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.space, NULL);
    pthread_cond_init(&p.done, NULL);

    int rc = HZ_OK;
    unsigned started = 0;
    for (; started < cfg->threads; started++) {
        ws[started].p = &p;
        ws[started].id = started;
        int err = pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]);
        if (err) {
            rc = hz_error(HZ_ENOMEM, "cannot start worker thread %u of %u: %s", started + 1,
                          cfg->threads, strerror(err));
            break;
        }
    }

    for (uint64_t i = 0; i < cfg->n_items && !rc; i++) {
        unsigned s = (unsigned)(i % cfg->window);
        slot_state *ss = &p.st[s];
        pthread_mutex_lock(&p.mu);
        /* item i is claimable (i < consumed + window) and every worker either claims items or has
         * one in flight, so this wait ends as long as a worker runs */
        while (!ss->ready) pthread_cond_wait(&p.done, &p.mu);
        int crc = ss->rc;
        pthread_mutex_unlock(&p.mu);

        if (crc)
            rc = hz_error(crc, "%s", ss->msg);
        else
            rc = cfg->consume(cfg->ctx, i, cfg->slots[s]);

        pthread_mutex_lock(&p.mu);
        ss->ready = 0;
        p.consumed = i + 1;
        if (rc) p.stop = 1;
        pthread_cond_broadcast(&p.space);
        pthread_mutex_unlock(&p.mu);
    }

    /* After success every worker has found nothing left to claim; after a failure they see stop.
     * Either way an item still running completes before its worker exits. */
    if (rc) request_stop(&p);
    for (unsigned k = 0; k < started; k++) pthread_join(ws[k].thread, NULL);

    pthread_cond_destroy(&p.done);
    pthread_cond_destroy(&p.space);
    pthread_mutex_destroy(&p.mu);
    free(ws);
    free(p.st);
    return rc;
}
