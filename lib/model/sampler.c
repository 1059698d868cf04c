/* Token sampler: greedy, or temperature + top-k + top-p with a seeded PRNG (xoshiro256**, seeded
 * through splitmix64), so a seed reproduces a sequence exactly on every platform. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(hz_sampler *sp) {
    uint64_t *s = sp->s;
    uint64_t r = rotl(s[1] * 5u, 7) * 9u, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(hz_sampler *sp) { return (double)(next_u64(sp) >> 11) * (1.0 / 9007199254740992.0); }

void hz_sampler_restart(hz_sampler *sp) {
    uint64_t x = sp->seed;
    for (int i = 0; i < 4; i++) sp->s[i] = splitmix64(&x);
}

int hz_sampler_init(hz_sampler *sp, uint32_t vocab) {
    memset(sp, 0, sizeof *sp);
    sp->top_p = 1.0f;
    sp->idx = hz_malloc((size_t)vocab * sizeof(uint32_t));
    sp->prob = hz_malloc((size_t)vocab * sizeof(float));
    if (!sp->idx || !sp->prob) {
        hz_sampler_free(sp);
        return HZ_ENOMEM;
    }
    hz_sampler_restart(sp);
    return HZ_OK;
}

void hz_sampler_free(hz_sampler *sp) {
    free(sp->idx);
    free(sp->prob);
    sp->idx = NULL;
    sp->prob = NULL;
}

int hz_sampler_configure(hz_sampler *sp, const hz_sampler_options *opts) {
    hz_sampler_options o;
    hz_sampler_options_init(&o);
    int st = hz_options_merge(&o, sizeof o, opts, offsetof(hz_sampler_options, temperature) + sizeof(float),
                              "sampler options");
    if (st) return st;
    if (!(o.temperature >= 0.0f) || !isfinite(o.temperature))
        return hz_error(HZ_EINVAL, "sampler options: temperature %g must be finite and >= 0", (double)o.temperature);
    if (!(o.top_p > 0.0f && o.top_p <= 1.0f))
        return hz_error(HZ_EINVAL, "sampler options: top_p %g must be in (0, 1]", (double)o.top_p);
    sp->temperature = o.temperature;
    sp->top_k = o.top_k;
    sp->top_p = o.top_p;
    sp->seed = o.seed;
    hz_sampler_restart(sp);
    return HZ_OK;
}

/* Larger logit first; equal logits: lower id first. */
static int cmp_desc_ids(const void *a, const void *b, const float *lg) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (lg[x] > lg[y]) return -1;
    if (lg[x] < lg[y]) return 1;
    return (x > y) - (x < y);
}

/* qsort has no context argument: the logits being sorted, per thread. */
static _Thread_local const float *tl_sort_logits;
static int cmp_desc(const void *a, const void *b) { return cmp_desc_ids(a, b, tl_sort_logits); }

int32_t hz_sampler_sample(hz_sampler *sp, const float *logits, uint32_t vocab) {
    if (sp->temperature == 0.0f) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < vocab; i++)
            if (logits[i] > logits[best]) best = i;
        return (int32_t)best;
    }
    /* Candidates, largest first. With top_k, keep a sorted array of k by insertion (k is small);
     * otherwise sort the whole vocabulary. */
    uint32_t n;
    if (sp->top_k > 0 && sp->top_k < vocab) {
        uint32_t k = sp->top_k;
        n = 0;
        for (uint32_t i = 0; i < vocab; i++) {
            if (n == k && !(logits[i] > logits[sp->idx[k - 1]])) continue;
            uint32_t j = n < k ? n++ : k - 1;
            while (j > 0 && logits[i] > logits[sp->idx[j - 1]]) {
                sp->idx[j] = sp->idx[j - 1];
                j--;
            }
            sp->idx[j] = i;
        }
    } else {
        n = vocab;
        for (uint32_t i = 0; i < vocab; i++) sp->idx[i] = i;
        tl_sort_logits = logits;
        qsort(sp->idx, n, sizeof(uint32_t), cmp_desc);
    }
    /* softmax(logits / temperature) over the candidates, in double for a stable cumulative sum */
    double inv_t = 1.0 / (double)sp->temperature, mx = (double)logits[sp->idx[0]] * inv_t, sum = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        double e = exp((double)logits[sp->idx[i]] * inv_t - mx);
        sp->prob[i] = (float)e;
        sum += e;
    }
    /* top-p: the smallest prefix whose probability reaches top_p (at least one token) */
    uint32_t keep = n;
    if (sp->top_p < 1.0f) {
        double cum = 0.0;
        for (uint32_t i = 0; i < n; i++) {
            cum += (double)sp->prob[i] / sum;
            if (cum >= (double)sp->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double mass = 0.0;
    for (uint32_t i = 0; i < keep; i++) mass += (double)sp->prob[i];
    double r = next_unit(sp) * mass, cum = 0.0;
    for (uint32_t i = 0; i < keep; i++) {
        cum += (double)sp->prob[i];
        if (r < cum) return (int32_t)sp->idx[i];
    }
    return (int32_t)sp->idx[keep - 1];
}
