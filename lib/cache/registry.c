/* The process-wide registry of live lease handles.
 *
 * hz_generation_release must reject a pointer that is not a live lease (never issued, or already
 * released) without reading through it: the memory may be freed or belong to the caller. So a lease
 * is looked up by address in a hash set before anything dereferences it. The set is split into
 * stripes, each with its own mutex, so threads releasing different leases rarely contend.
 *
 * Freed lease memory goes through a quarantine ring before it returns to malloc: a stale handle released
 * a second time is then still absent from the set (instead of matching a newer lease that happened to
 * get the same address), for the next HZ_LEASE_QUARANTINE releases process-wide. Beyond that the
 * usual limit of pointer handles applies. */
#include <pthread.h>
#include <stdlib.h>

#include "cache/cache_internal.h"

#define STRIPES 16u
#define HZ_LEASE_QUARANTINE 4096u

typedef struct stripe {
    pthread_mutex_t mu;
    uintptr_t *slot; /* 0 = empty; linear probing, backward-shift deletion */
    size_t cap, count;
} stripe;

static stripe g_stripes[STRIPES] = {
#define S_ {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}
    S_, S_, S_, S_, S_, S_, S_, S_, S_, S_, S_, S_, S_, S_, S_, S_
#undef S_
};

static pthread_mutex_t g_quarantine_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_quarantine[HZ_LEASE_QUARANTINE];
static size_t g_quarantine_next;

static uint64_t mix(uintptr_t p) {
    uint64_t x = (uint64_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static stripe *stripe_of(uintptr_t p) { return &g_stripes[(mix(p) >> 7) % STRIPES]; }

static int grow(stripe *s) {
    size_t ncap = s->cap ? s->cap * 2 : 64;
    uintptr_t *n = calloc(ncap, sizeof *n);
    if (!n) return 0;
    for (size_t i = 0; i < s->cap; i++) {
        uintptr_t v = s->slot[i];
        if (!v) continue;
        size_t j = mix(v) & (ncap - 1);
        while (n[j]) j = (j + 1) & (ncap - 1);
        n[j] = v;
    }
    free(s->slot);
    s->slot = n;
    s->cap = ncap;
    return 1;
}

/* Index of p in s, or SIZE_MAX. Caller holds s->mu. */
static size_t find(const stripe *s, uintptr_t p) {
    if (!s->cap) return SIZE_MAX;
    size_t j = mix(p) & (s->cap - 1);
    while (s->slot[j]) {
        if (s->slot[j] == p) return j;
        j = (j + 1) & (s->cap - 1);
    }
    return SIZE_MAX;
}

int hz_lease_registry_add(const void *lease) {
    uintptr_t p = (uintptr_t)lease;
    stripe *s = stripe_of(p);
    pthread_mutex_lock(&s->mu);
    if ((s->count + 1) * 2 > s->cap && !grow(s)) {
        pthread_mutex_unlock(&s->mu);
        return hz_error(HZ_ENOMEM, "out of memory growing the lease registry");
    }
    size_t j = mix(p) & (s->cap - 1);
    while (s->slot[j] && s->slot[j] != p) j = (j + 1) & (s->cap - 1);
    if (!s->slot[j]) s->count++;
    s->slot[j] = p;
    pthread_mutex_unlock(&s->mu);
    return HZ_OK;
}

int hz_lease_registry_take(const void *lease) {
    uintptr_t p = (uintptr_t)lease;
    stripe *s = stripe_of(p);
    pthread_mutex_lock(&s->mu);
    size_t j = find(s, p);
    if (j == SIZE_MAX) {
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    /* Backward-shift deletion keeps every remaining key reachable from its home slot. */
    size_t mask = s->cap - 1, hole = j, k = (j + 1) & mask;
    s->slot[hole] = 0;
    while (s->slot[k]) {
        size_t home = mix(s->slot[k]) & mask;
        /* Move k into the hole when its home lies cyclically outside (hole, k]. */
        int outside = (hole <= k) ? (home <= hole || home > k) : (home <= hole && home > k);
        if (outside) {
            s->slot[hole] = s->slot[k];
            s->slot[k] = 0;
            hole = k;
        }
        k = (k + 1) & mask;
    }
    s->count--;
    pthread_mutex_unlock(&s->mu);
    return 1;
}

int hz_lease_registry_contains(const void *lease) {
    uintptr_t p = (uintptr_t)lease;
    stripe *s = stripe_of(p);
    pthread_mutex_lock(&s->mu);
    int found = find(s, p) != SIZE_MAX;
    pthread_mutex_unlock(&s->mu);
    return found;
}

void hz_lease_memory_retire(void *lease) {
    pthread_mutex_lock(&g_quarantine_mu);
    void *old = g_quarantine[g_quarantine_next];
    g_quarantine[g_quarantine_next] = lease;
    g_quarantine_next = (g_quarantine_next + 1) % HZ_LEASE_QUARANTINE;
    pthread_mutex_unlock(&g_quarantine_mu);
    free(old);
}
