/* hz-bench: the performance contract of DESIGN.md section 6, measured through the public API only.
 *
 *   hz-bench MODEL.hzq [--device auto|cpu|cuda:N] [--resident N[,N...]] [--executor NAME]
 *            [--prompts 12] [--blocks 3] [--tokens 128] [--warmup 64]
 *            [--transport serial|threaded|registered|auto] [--staging-threads N] [--h2d-ceiling GBPS]
 *            [--prefetch] [--feed greedy|random] [--json OUT.json|-] [--quick]
 *
 * For every residency in the list it creates a fresh cache (canonical initial placement, LRU eviction),
 * a model and one session, runs a warmup request that no figure includes, then runs the fixed prompt
 * set `blocks` times in order, one request at a time, greedy with EOS suppressed. The cache is never
 * recreated inside a residency, so the LRU state evolves across every request of the run.
 *
 * --feed random (not the contract's protocol): each decode step is fed a seeded random token id instead
 * of the previous step's output, as llama-bench's decode test feeds them. The outputs are still sampled
 * greedily and hashed, never fed back, so no EOS is suppressed. Random weights decode greedily into
 * repeated tokens, which reuse their experts; random inputs give partial residency the routing of
 * distinct tokens (doc/bench.md, "Routing of the random-weight shapes"). Sets HZ_GPU_SPECULATE=0: a
 * step queued ahead with the sampled token would be discarded at every step.
 *
 * Figures (doc/bench.md defines them; the code below follows those definitions literally):
 *   pooled decode       = sum(N - 1) / sum(response - TTFT)
 *   overall output rate = sum(N) / sum(response)
 *   TTFT, response time = means over the measured requests
 *   per-block pooled decode and output rates, and their spread (min, max, (max - min) / mean)
 *   H2D bytes, hits, misses, hit rate, expert D2H bytes: deltas of hz_cache_stats_json over the
 *   measured requests (the initial fill and the warmup are reported apart)
 *   VRAM peak: device-wide (total - free) from hz_device_describe_json, sampled outside the timed
 *   sections; the device's own "UNSUPPORTED"/"UNKNOWN" is passed through, never replaced by a number
 *   RSS peak: VmHWM from /proc/self/status (getrusage ru_maxrss when that is unreadable)
 *   miss path: miss_transfer_bytes / miss_transfer_seconds deltas (GB/s), and that over --h2d-ceiling;
 *   prefetch hits and wasted bytes; staging bytes / seconds -- each "UNKNOWN" when the cache stats
 *   lack the counter, never an invented number
 *   per phase: the cache counters summed over each request's prefill and over its decode steps (read
 *   between the two; that read is timed and left out of the response time)
 *
 * Exit status 0 on success, 1 on any error (the message goes to stderr). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include <horizon/horizon.h>

#include "report_file.h"

/* ------------------------------------------------------------------------------------------------
 * The prompt rule. Changing any constant here changes every figure: bump BENCH_SCHEMA with it.
 * ---------------------------------------------------------------------------------------------- */

#define BENCH_SCHEMA 2 /* 2: the cache-stats read between prefill and decode is left out of response times */
#define PROMPT_SEED UINT64_C(0x486f72697a6f6e31) /* "Horizon1" */
#define PROMPT_MIN_LEN 16u
#define PROMPT_MAX_LEN 128u
#define PROMPT_LEN_STEPS 12u /* lengths PROMPT_MIN_LEN .. PROMPT_MAX_LEN in 12 even steps */
#define PROMPT_ORDER_STRIDE 5u /* coprime with 12: interleaves short and long prompts */
#define WARMUP_PROMPT_LEN 16u
/* "HzRandIn": --feed random's decode inputs, seeds apart from the prompts' (PROMPT_SEED + k) */
#define FEED_SEED UINT64_C(0x487a52616e64496e)

#define PROMPT_RULE_TEXT                                                                                   \
    "prompt k (k = 0, 1, ...) has length 16 + (j * 112) / 11 with j = (5 * k) mod 12, i.e. the order "    \
    "16, 66, 117, 46, 97, 26, 77, 128, 56, 107, 36, 87, repeating; its token ids are drawn by "            \
    "splitmix64 seeded with 0x486f72697a6f6e31 + k, token = (x >> 32) mod vocab, redrawn while it "       \
    "equals the EOS id; no BOS is prepended. The warmup prompt is 16 tokens from seed "                   \
    "0x486f72697a6f6e31 - 1 by the same rule."

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint32_t prompt_length(uint32_t k) {
    uint32_t j = (PROMPT_ORDER_STRIDE * k) % PROMPT_LEN_STEPS;
    return PROMPT_MIN_LEN + (j * (PROMPT_MAX_LEN - PROMPT_MIN_LEN)) / (PROMPT_LEN_STEPS - 1);
}

/* Fills `out` with `len` token ids from `seed`. EOS is excluded so that no prompt ends a request early
 * in an implementation that stops at EOS. */
static void prompt_tokens(uint64_t seed, uint32_t len, uint32_t vocab, int32_t eos, int32_t *out) {
    uint64_t s = seed;
    for (uint32_t i = 0; i < len; i++) {
        int32_t t;
        do {
            t = (int32_t)((splitmix64(&s) >> 32) % vocab);
        } while (t == eos);
        out[i] = t;
    }
}

/* ------------------------------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------------------------------- */

static FILE *g_table; /* stdout, or stderr when the JSON report goes to stdout */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail_hz(const char *what, int status) {
    fprintf(stderr, "hz-bench: %s failed: %s (%s): %s\n", what, hz_strerror(status), hz_status_name(status),
            hz_last_error_message());
    return 1;
}

static int fail_oom(void) {
    fprintf(stderr, "hz-bench: out of memory\n");
    return 1;
}

static int parse_u32(const char *s, const char *what, uint32_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || v > UINT32_MAX || s[0] == '-' || s[0] == '+' || s[0] == ' ') {
        fprintf(stderr, "hz-bench: %s must be a non-negative integer, got '%s'\n", what, s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* A positive bandwidth in GB/s ("49.2"). */
static int parse_gbps(const char *s, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v > 0) || v > 1e6) {
        fprintf(stderr, "hz-bench: --h2d-ceiling must be a positive number of GB/s, got '%s'\n", s);
        return -1;
    }
    *out = v;
    return 0;
}

/* "4,8,0": residencies per routed layer (0 = all experts). */
static int parse_residency_list(const char *s, uint32_t **out, uint32_t *out_n) {
    uint32_t n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    uint32_t *v = calloc(n, sizeof *v);
    char *copy = strdup(s);
    if (!v || !copy) {
        free(v);
        free(copy);
        return fail_oom();
    }
    uint32_t i = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (parse_u32(tok, "--resident entry", &v[i])) {
            free(v);
            free(copy);
            return 1;
        }
        i++;
    }
    free(copy);
    if (i != n || n == 0) { /* empty entries ("4,,8", ",4", "") */
        fprintf(stderr, "hz-bench: --resident must be a comma-separated list of integers, got '%s'\n", s);
        free(v);
        return 1;
    }
    *out = v;
    *out_n = n;
    return 0;
}

/* A number from a JSON object, or -1 when the key is absent or not a number (for counters that are
 * always present in the cache stats; a missing one is an error the caller reports). */
static int json_u64(const cJSON *obj, const char *key, double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(it)) return -1;
    *out = it->valuedouble;
    return 0;
}

static const char *json_str(const cJSON *obj, const char *key, const char *fallback) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) && it->valuestring ? it->valuestring : fallback;
}

/* Peak resident set of this process so far, in bytes; 0 when neither source is readable. VmHWM is
 * preferred because it can be reset between residencies (clear_refs), ru_maxrss cannot. */
static uint64_t rss_peak_bytes(const char **source) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        unsigned long long kb = 0;
        int found = 0;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) {
                found = 1;
                break;
            }
        fclose(f);
        if (found) {
            *source = "VmHWM";
            return (uint64_t)kb * 1024u;
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        *source = "ru_maxrss";
        return (uint64_t)ru.ru_maxrss * 1024u; /* kilobytes on Linux */
    }
    *source = "none";
    return 0;
}

/* Resets the kernel's peak-RSS mark (Linux >= 4.0) so each residency gets its own peak. Returns 0 when
 * the reset took effect. */
static int rss_peak_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------------
 * Device memory sampling
 * ---------------------------------------------------------------------------------------------- */

typedef struct vram_peak {
    int numeric;           /* 1 once a numeric sample was seen */
    char verdict[16];      /* "UNSUPPORTED"/"UNKNOWN" when no numeric sample */
    double used_max;       /* bytes, device-wide */
    double total;          /* bytes */
    uint32_t samples;
} vram_peak;

static void vram_init(vram_peak *v) {
    memset(v, 0, sizeof *v);
    snprintf(v->verdict, sizeof v->verdict, "UNKNOWN");
}

/* One sample of device-wide used memory. The device's own verdict string is kept verbatim. */
static int vram_sample(hz_device *dev, vram_peak *v) {
    char *text = NULL;
    int st = hz_device_describe_json(dev, &text);
    if (st) return fail_hz("describing the device", st);
    cJSON *root = cJSON_Parse(text);
    hz_free(text);
    if (!root) {
        fprintf(stderr, "hz-bench: hz_device_describe_json returned text that is not JSON\n");
        return 1;
    }
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(root, "memory");
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(mem, "free_bytes");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(mem, "total_bytes");
    if (cJSON_IsNumber(fr) && cJSON_IsNumber(to)) {
        double used = to->valuedouble - fr->valuedouble;
        if (!v->numeric || used > v->used_max) v->used_max = used;
        v->total = to->valuedouble;
        v->numeric = 1;
        v->samples++;
    } else if (!v->numeric) {
        const char *why = cJSON_IsString(fr) ? fr->valuestring : "UNKNOWN";
        snprintf(v->verdict, sizeof v->verdict, "%s", strcmp(why, "UNSUPPORTED") == 0 ? "UNSUPPORTED" : "UNKNOWN");
    }
    cJSON_Delete(root);
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * One request
 * ---------------------------------------------------------------------------------------------- */

typedef struct request_result {
    uint32_t prompt_len;
    uint32_t tokens; /* N */
    double ttft_s;
    double response_s;   /* ttft_s + decode time; the stats read between the two phases is not in it */
    double stats_read_s; /* that read, excluded */
    uint32_t eos_substitutions;
} request_result;

/* The counters every figure needs; all must be numbers in hz_cache_stats_json. */
static const char *const k_counters[] = {"hits",      "misses",      "h2d_bytes",       "h2d_copies",
                                         "expert_d2h_bytes", "evictions", "publications", "acquires",
                                         "miss_transfer_bytes", "miss_transfer_seconds"};
#define N_COUNTERS (sizeof k_counters / sizeof k_counters[0])

typedef struct bench_ctx {
    hz_session *session;
    int32_t eos;
    uint32_t vocab;
    uint64_t digest; /* FNV-1a over the generated ids of the measured requests */
    int feed_random; /* --feed random: decode inputs from run_request's `feed`, outputs not fed back */
    hz_cache *cache;
    double prefill[N_COUNTERS], decode[N_COUNTERS]; /* counter deltas of the measured requests, by phase */
} bench_ctx;

static int cache_counts(hz_cache *cache, double *v, int settle);

/* Greedy with EOS suppressed: when the sampler picked EOS, the best other token (largest logit,
 * lowest id on ties, the sampler's own tie rule) replaces it. */
static int suppress_eos(bench_ctx *c, int32_t *next, uint32_t *subs) {
    if (c->eos < 0 || *next != c->eos) return 0;
    const float *logits = NULL;
    uint32_t n = 0;
    int st = hz_session_logits(c->session, &logits, &n);
    if (st) return fail_hz("reading the logits to suppress EOS", st);
    int32_t best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if ((int32_t)i == c->eos) continue;
        if (best < 0 || logits[i] > logits[best]) best = (int32_t)i;
    }
    if (best < 0) {
        fprintf(stderr, "hz-bench: the vocabulary has no token other than EOS\n");
        return 1;
    }
    *next = best;
    (*subs)++;
    return 0;
}

static void digest_add(uint64_t *h, int32_t t) {
    uint32_t u = (uint32_t)t;
    for (int b = 0; b < 4; b++) {
        *h ^= (u >> (8 * b)) & 0xffu;
        *h *= UINT64_C(0x100000001b3);
    }
}

/* Runs one request: reset, prefill (its sampled token is the first output), then n_out - 1 decode
 * steps, each fed the previous output (greedy) or, with --feed random, feed[0], feed[1], ... (at least
 * n_out - 1 ids). TTFT ends when the first output token is known, the response when the last one is. A
 * measured request also reads the cache counters before, between the two phases and after, so the decode
 * phase's misses and H2D bytes are known apart from the prefill's (the decode roofline needs them); the
 * read between the phases is timed and left out of the response time. */
static int run_request(bench_ctx *c, const int32_t *prompt, uint32_t len, const int32_t *feed, uint32_t n_out,
                       int measured, request_result *r) {
    int st;
    double c0[N_COUNTERS], c1[N_COUNTERS], c2[N_COUNTERS];
    int split = measured && c->cache;
    memset(r, 0, sizeof *r);
    r->prompt_len = len;
    if ((st = hz_session_reset(c->session))) return fail_hz("resetting the session", st);
    if (split && cache_counts(c->cache, c0, 1)) return 1;
    int32_t next = -1;
    double t0 = now_s();
    if ((st = hz_prefill(c->session, prompt, len, &next))) return fail_hz("prefill", st);
    if (!c->feed_random && suppress_eos(c, &next, &r->eos_substitutions)) return 1;
    double t_first = now_s();
    if (split && cache_counts(c->cache, c1, 0)) return 1;
    double t_resume = now_s();
    if (measured) digest_add(&c->digest, next);
    for (uint32_t i = 1; i < n_out; i++) {
        const int32_t in = c->feed_random ? feed[i - 1] : next;
        if ((st = hz_decode_step(c->session, in, &next))) return fail_hz("decode step", st);
        if (!c->feed_random && suppress_eos(c, &next, &r->eos_substitutions)) return 1;
        if (measured) digest_add(&c->digest, next);
    }
    double t_end = now_s();
    if (split && cache_counts(c->cache, c2, 1)) return 1;
    r->tokens = n_out;
    r->ttft_s = t_first - t0;
    /* N = 1 has no decode step: no decode time either (the clock reads around the empty loop are not
     * a measurement), so the pooled decode rate is null, not 0 */
    r->response_s = r->ttft_s + (n_out > 1 ? t_end - t_resume : 0.0);
    r->stats_read_s = t_resume - t_first;
    for (size_t i = 0; split && i < N_COUNTERS; i++) {
        c->prefill[i] += c1[i] - c0[i];
        c->decode[i] += c2[i] - c1[i];
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Cache counters (k_counters is defined above, with the request that reads them by phase)
 * ---------------------------------------------------------------------------------------------- */

typedef struct cache_snap {
    double v[N_COUNTERS];
    cJSON *raw; /* the whole stats object */
} cache_snap;

/* settle: wait for the prefetch thread first. A load in flight has its H2D (and staging) copies
 * counted but not yet its miss_transfer_bytes or prefetch_experts, so a window's edge inside it would
 * split one load's counters across windows. Every edge settles, all of them between the timed
 * sections; the read between a request's prefill and decode does not, so that a load the prefill
 * started keeps overlapping the decode as it would without the read (that split only apportions
 * counts between the two phases, whose sum the edges fix). */
static int cache_snapshot(hz_cache *cache, cache_snap *s, int settle) {
    char *text = NULL;
    if (settle) hz_cache_prefetch_wait(cache);
    int st = hz_cache_stats_json(cache, &text);
    if (st) return fail_hz("reading the cache stats", st);
    s->raw = cJSON_Parse(text);
    hz_free(text);
    if (!s->raw) {
        fprintf(stderr, "hz-bench: hz_cache_stats_json returned text that is not JSON\n");
        return 1;
    }
    for (size_t i = 0; i < N_COUNTERS; i++)
        if (json_u64(s->raw, k_counters[i], &s->v[i])) {
            fprintf(stderr, "hz-bench: the cache stats lack a numeric '%s' (state %s)\n", k_counters[i],
                    json_str(s->raw, "state", "?"));
            cJSON_Delete(s->raw);
            s->raw = NULL;
            return 1;
        }
    return 0;
}

/* The k_counters values of the cache now, without keeping its JSON (the per-request phase reads). */
static int cache_counts(hz_cache *cache, double *v, int settle) {
    cache_snap s = {{0}, NULL};
    if (cache_snapshot(cache, &s, settle)) return 1;
    memcpy(v, s.v, sizeof s.v);
    cJSON_Delete(s.raw);
    return 0;
}

/* {counter: sum} of one phase's deltas, plus its hit rate (null without acquires). */
static cJSON *phase_json(const double *v) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    double hits = 0, misses = 0;
    for (size_t i = 0; i < N_COUNTERS; i++) {
        cJSON_AddNumberToObject(o, k_counters[i], v[i]);
        if (!strcmp(k_counters[i], "hits")) hits = v[i];
        if (!strcmp(k_counters[i], "misses")) misses = v[i];
    }
    if (hits + misses > 0)
        cJSON_AddNumberToObject(o, "hit_rate", hits / (hits + misses));
    else
        cJSON_AddNullToObject(o, "hit_rate");
    return o;
}

static double snap_get(const cache_snap *s, const char *key) {
    for (size_t i = 0; i < N_COUNTERS; i++)
        if (strcmp(k_counters[i], key) == 0) return s->v[i];
    return 0.0;
}

/* {counter: b - a} for every counter, plus the hit rate of the window (null when nothing was acquired). */
static cJSON *cache_delta_json(const cache_snap *a, const cache_snap *b) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (size_t i = 0; i < N_COUNTERS; i++) cJSON_AddNumberToObject(o, k_counters[i], b->v[i] - a->v[i]);
    double hits = snap_get(b, "hits") - snap_get(a, "hits");
    double misses = snap_get(b, "misses") - snap_get(a, "misses");
    if (hits + misses > 0)
        cJSON_AddNumberToObject(o, "hit_rate", hits / (hits + misses));
    else
        cJSON_AddNullToObject(o, "hit_rate");
    return o;
}

/* Counters a library may or may not have (newer statistics): b - a when both snapshots hold a number
 * under `key`, else -1 (the caller reports "UNKNOWN", never a made-up 0). */
static int opt_delta(const cache_snap *a, const cache_snap *b, const char *key, double *out) {
    double va, vb;
    if (json_u64(a->raw, key, &va) || json_u64(b->raw, key, &vb)) return -1;
    *out = vb - va;
    return 0;
}

/* `key`: the delta, or "UNKNOWN" when the library does not report the counter. */
static void add_opt_delta(cJSON *o, const char *key, const cache_snap *a, const cache_snap *b, const char *stat) {
    double v;
    if (opt_delta(a, b, stat, &v) == 0)
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddStringToObject(o, key, "UNKNOWN");
}

/* A rate in GB/s of two optional deltas: a number when both exist and seconds > 0, null when they exist
 * but nothing was timed (no transfer in the window), "UNKNOWN" when the library lacks either counter.
 * Returns the rate, or -1 when it is not a number. */
static double add_opt_rate(cJSON *o, const char *key, const cache_snap *a, const cache_snap *b, const char *bytes_stat,
                           const char *seconds_stat) {
    double bytes, secs;
    if (opt_delta(a, b, bytes_stat, &bytes) || opt_delta(a, b, seconds_stat, &secs)) {
        cJSON_AddStringToObject(o, key, "UNKNOWN");
        return -1;
    }
    if (secs > 0) {
        cJSON_AddNumberToObject(o, key, bytes / secs * 1e-9);
        return bytes / secs * 1e-9;
    }
    cJSON_AddNullToObject(o, key);
    return -1;
}

/* Rounds of `blobs` blobs in a stats object's miss_round_blobs ([[blobs, rounds], ...]); 0 when absent. */
static double round_count(const cJSON *pairs, double blobs) {
    const cJSON *p;
    cJSON_ArrayForEach(p, pairs) {
        const cJSON *k = cJSON_GetArrayItem(p, 0), *r = cJSON_GetArrayItem(p, 1);
        if (cJSON_IsNumber(k) && cJSON_IsNumber(r) && k->valuedouble == blobs) return r->valuedouble;
    }
    return 0;
}

/* `key`: the window's miss rounds by size, [[blobs, rounds], ...] (b's sizes, rounds b - a, zero deltas
 * left out), or "UNKNOWN" when either snapshot lacks miss_round_blobs (an older library). */
static void add_round_sizes(cJSON *o, const char *key, const cache_snap *a, const cache_snap *b) {
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a->raw, "miss_round_blobs");
    const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b->raw, "miss_round_blobs");
    if (!cJSON_IsArray(pa) || !cJSON_IsArray(pb)) {
        cJSON_AddStringToObject(o, key, "UNKNOWN");
        return;
    }
    cJSON *arr = cJSON_AddArrayToObject(o, key);
    const cJSON *p;
    cJSON_ArrayForEach(p, pb) {
        const cJSON *k = cJSON_GetArrayItem(p, 0), *r = cJSON_GetArrayItem(p, 1);
        if (!arr || !cJSON_IsNumber(k) || !cJSON_IsNumber(r)) continue;
        const double d = r->valuedouble - round_count(pa, k->valuedouble);
        if (d <= 0) continue;
        cJSON *pair = cJSON_CreateArray();
        if (!pair) continue;
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(k->valuedouble));
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(d));
        cJSON_AddItemToArray(arr, pair);
    }
}

/* The miss path over the measured window (doc/bench.md): bytes moved by miss rounds over the wall time
 * from each round's first staging copy to its publication, and that rate against the pinned H2D
 * ceiling measured by hz-ceilings at expert size (--h2d-ceiling). Also the speculative-prefetch and
 * staging counters. Every figure the library does not report is "UNKNOWN". Returns the miss-path GB/s,
 * or -1 when there is none. */
static double miss_path_json(cJSON *run, const cache_snap *a, const cache_snap *b, double h2d_ceiling_gbps) {
    cJSON *mp = cJSON_AddObjectToObject(run, "miss_path");
    add_opt_delta(mp, "bytes", a, b, "miss_transfer_bytes");
    add_opt_delta(mp, "seconds", a, b, "miss_transfer_seconds");
    double g = add_opt_rate(mp, "gbps", a, b, "miss_transfer_bytes", "miss_transfer_seconds");
    add_round_sizes(mp, "round_blobs", a, b);
    if (h2d_ceiling_gbps > 0)
        cJSON_AddNumberToObject(mp, "h2d_ceiling_gbps", h2d_ceiling_gbps);
    else
        cJSON_AddStringToObject(mp, "h2d_ceiling_gbps", "UNKNOWN");
    const cJSON *gj = cJSON_GetObjectItemCaseSensitive(mp, "gbps");
    if (g >= 0 && h2d_ceiling_gbps > 0)
        cJSON_AddNumberToObject(mp, "fraction_of_h2d_ceiling", g / h2d_ceiling_gbps);
    else if (cJSON_IsNull(gj))
        cJSON_AddNullToObject(mp, "fraction_of_h2d_ceiling");
    else
        cJSON_AddStringToObject(mp, "fraction_of_h2d_ceiling", "UNKNOWN");
    cJSON_AddStringToObject(mp, "definition",
                            "gbps = delta miss_transfer_bytes / delta miss_transfer_seconds of hz_cache_stats_json "
                            "over the measured requests (a miss round's wall time from its first staging copy to "
                            "its publication, summed); fraction = gbps / h2d_ceiling_gbps (hz-ceilings pinned H2D "
                            "at expert size, passed with --h2d-ceiling); round_blobs: [[blobs, rounds], ...], the "
                            "window's rounds by the number of blobs they moved (delta of miss_round_blobs); null: no "
                            "miss in the window; UNKNOWN: not reported by this library or no ceiling given");

    cJSON *pf = cJSON_AddObjectToObject(run, "prefetch");
    add_opt_delta(pf, "hits", a, b, "prefetch_hits");
    add_opt_delta(pf, "wasted_bytes", a, b, "prefetch_wasted_bytes");
    add_opt_delta(pf, "bytes", a, b, "prefetch_bytes");
    add_opt_delta(pf, "gated", a, b, "prefetch_gated"); /* predictions the cache's gate declined */

    cJSON *sg = cJSON_AddObjectToObject(run, "staging");
    add_opt_delta(sg, "bytes", a, b, "staging_copy_bytes");
    add_opt_delta(sg, "seconds", a, b, "staging_copy_seconds");
    add_opt_rate(sg, "gbps", a, b, "staging_copy_bytes", "staging_copy_seconds");
    add_opt_delta(sg, "blobs", a, b, "staging_copies");
    add_opt_delta(sg, "fill_wait_seconds", a, b, "staging_fill_wait_seconds"); /* threaded: see the cache's notes */
    add_opt_delta(sg, "fill_span_seconds", a, b, "staging_fill_span_seconds");
    add_opt_delta(sg, "fill_lag_seconds", a, b, "staging_fill_lag_seconds");
    return g;
}

/* ------------------------------------------------------------------------------------------------
 * Options, model shape
 * ---------------------------------------------------------------------------------------------- */

typedef struct bench_opts {
    const char *model_path, *device, *executor, *transport, *json_path, *resident_text;
    uint32_t prompts, blocks, tokens, warmup;
    int quick;
    uint32_t staging_threads; /* threaded transport; 0 = the library's default */
    int prefetch;             /* --prefetch: HZ_PREFETCH_NEXT_LAYER */
    int feed_random;          /* --feed random */
    double h2d_ceiling_gbps;  /* pinned H2D at expert size from hz-ceilings; 0 = not given */
} bench_opts;

/* hz_transport by name; -1 for a name the library does not offer. */
static int transport_from_name(const char *name) {
    if (strcmp(name, "serial") == 0) return HZ_TRANSPORT_SERIAL;
    if (strcmp(name, "threaded") == 0) return HZ_TRANSPORT_THREADED;
    if (strcmp(name, "registered") == 0) return HZ_TRANSPORT_REGISTERED;
    if (strcmp(name, "auto") == 0) return HZ_TRANSPORT_AUTO;
    return -1;
}

typedef struct model_shape {
    char architecture[32];
    char executor[64];
    char accumulation[32];
    double layers, experts, top_k, hidden, expert_width, shared_width, vocab, max_pos;
} model_shape;

static int read_shape(hz_model *model, model_shape *sh) {
    char *text = NULL;
    int st = hz_model_describe_json(model, &text);
    if (st) return fail_hz("describing the model", st);
    cJSON *root = cJSON_Parse(text);
    hz_free(text);
    if (!root) {
        fprintf(stderr, "hz-bench: hz_model_describe_json returned text that is not JSON\n");
        return 1;
    }
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
    const cJSON *prec = cJSON_GetObjectItemCaseSensitive(root, "precision");
    snprintf(sh->architecture, sizeof sh->architecture, "%s", json_str(root, "architecture", "UNKNOWN"));
    snprintf(sh->executor, sizeof sh->executor, "%s", json_str(root, "executor", "UNKNOWN"));
    snprintf(sh->accumulation, sizeof sh->accumulation, "%s", json_str(prec, "accumulation", "UNKNOWN"));
    struct {
        const char *key;
        double *dst;
    } f[] = {{"layers", &sh->layers},
             {"experts", &sh->experts},
             {"top_k", &sh->top_k},
             {"hidden_size", &sh->hidden},
             {"expert_intermediate_size", &sh->expert_width},
             {"shared_expert_intermediate_size", &sh->shared_width},
             {"vocab_size", &sh->vocab},
             {"max_position_embeddings", &sh->max_pos}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (json_u64(cfg, f[i].key, f[i].dst)) {
            fprintf(stderr, "hz-bench: the model description lacks config.%s\n", f[i].key);
            cJSON_Delete(root);
            return 1;
        }
    cJSON_Delete(root);
    return 0;
}

static cJSON *shape_json(const model_shape *sh) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "architecture", sh->architecture);
    cJSON_AddNumberToObject(o, "layers", sh->layers);
    cJSON_AddNumberToObject(o, "experts", sh->experts);
    cJSON_AddNumberToObject(o, "top_k", sh->top_k);
    cJSON_AddNumberToObject(o, "hidden", sh->hidden);
    cJSON_AddNumberToObject(o, "expert_width", sh->expert_width);
    cJSON_AddNumberToObject(o, "shared_expert_width", sh->shared_width);
    cJSON_AddNumberToObject(o, "vocab", sh->vocab);
    return o;
}

/* ------------------------------------------------------------------------------------------------
 * The run of one residency
 * ---------------------------------------------------------------------------------------------- */

typedef struct rate_spread {
    double min, max, rel;
} rate_spread;

static rate_spread spread_of(const double *v, uint32_t n) {
    rate_spread s = {0, 0, 0};
    if (n == 0) return s;
    double sum = 0;
    s.min = s.max = v[0];
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] < s.min) s.min = v[i];
        if (v[i] > s.max) s.max = v[i];
        sum += v[i];
    }
    double mean = sum / n;
    s.rel = mean > 0 ? (s.max - s.min) / mean : 0;
    return s;
}

static cJSON *spread_json(rate_spread s) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "min", s.min);
    cJSON_AddNumberToObject(o, "max", s.max);
    cJSON_AddNumberToObject(o, "relative_spread", s.rel);
    return o;
}

/* A rate, or JSON null when its denominator is zero (e.g. N = 1 gives no decode seconds). */
static void add_rate(cJSON *o, const char *key, double num, double den) {
    if (den > 0)
        cJSON_AddNumberToObject(o, key, num / den);
    else
        cJSON_AddNullToObject(o, key);
}

typedef struct table_row {
    uint32_t resident, experts;
    double pooled; /* NAN when N = 1: no decode step, printed as "-" with its spread */
    double overall, ttft_ms, resp_ms, spread, hit_rate, misses, h2d_mb;
    int invariant_checker;
    int prefetch;                           /* speculative prefetch on, with its counters reported */
    double pf_used, pf_loaded, pf_gated;    /* over the measured window */
    char vram[32], rss[32];
    char miss_bw[16], miss_frac[16]; /* miss-path GB/s and its % of the H2D ceiling, or "-"/"UNKNOWN" */
} table_row;

static void fmt_bytes(char *buf, size_t cap, double bytes) {
    snprintf(buf, cap, "%.1f MiB", bytes / (1024.0 * 1024.0));
}

typedef struct shared_state {
    const bench_opts *o;
    hz_host_backing *backing;
    hz_device *device;
    int32_t **prompts; /* o->prompts prompt arrays */
    int32_t *warmup_prompt;
    int32_t **feeds;   /* --feed random: o->prompts arrays of max(tokens, warmup) + 1 decode inputs */
    int32_t *warmup_feed;
    uint64_t rss_process_peak;
    const char *rss_source;
    int rss_resettable;
    model_shape shape;
    int have_shape;
} shared_state;

/* The table's miss-path cells: GB/s and % of the ceiling; "-" when the window had no miss transfer,
 * "UNKNOWN" when the library does not report the counters (or, for the %, no ceiling was given). */
static void miss_cells(table_row *row, const cJSON *run, double gbps, double ceiling) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "miss_path"), "gbps");
    if (gbps >= 0)
        snprintf(row->miss_bw, sizeof row->miss_bw, "%.2f", gbps);
    else
        snprintf(row->miss_bw, sizeof row->miss_bw, "%s", cJSON_IsNull(g) ? "-" : "UNKNOWN");
    if (gbps >= 0 && ceiling > 0)
        snprintf(row->miss_frac, sizeof row->miss_frac, "%.1f%%", 100.0 * gbps / ceiling);
    else
        snprintf(row->miss_frac, sizeof row->miss_frac, "%s", cJSON_IsNull(g) ? "-" : "UNKNOWN");
}

/* Runs one residency and appends its report object to `runs`. */
static int run_residency(shared_state *S, uint32_t resident, cJSON *runs, table_row *row) {
    const bench_opts *o = S->o;
    int rc = 1, st;
    hz_cache *cache = NULL;
    hz_model *model = NULL;
    hz_session *session = NULL;
    cache_snap s_create = {{0}, NULL}, s_warm = {{0}, NULL}, s_end = {{0}, NULL};
    request_result *req = NULL;
    double *blk_pooled = NULL, *blk_overall = NULL;
    char *sess_text = NULL;
    cJSON *run = NULL;
    vram_peak vp;
    vram_init(&vp);

    /* Per-residency peak RSS: fold the mark so far into the process peak, then reset it. */
    uint64_t before = rss_peak_bytes(&S->rss_source);
    if (before > S->rss_process_peak) S->rss_process_peak = before;
    S->rss_resettable = rss_peak_reset() == 0;

    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = resident;
    co.eviction = HZ_EVICT_LRU;
    co.transport = transport_from_name(o->transport); /* main() checked the name */
    co.staging_threads = o->staging_threads;
    co.prefetch = o->prefetch ? HZ_PREFETCH_NEXT_LAYER : HZ_PREFETCH_OFF;
    co.initial_placement = NULL; /* canonical: experts 0..capacity-1 of every layer */
    if ((st = hz_cache_create(S->backing, S->device, &co, &cache))) {
        char what[64];
        snprintf(what, sizeof what, "creating the cache with %u resident experts", resident);
        rc = fail_hz(what, st);
        goto done;
    }
    hz_model_options mo;
    hz_model_options_init(&mo);
    mo.executor = o->executor;
    if ((st = hz_model_create(S->backing, S->device, cache, &mo, &model))) {
        rc = fail_hz("creating the model", st);
        goto done;
    }
    hz_model_info info;
    hz_model_info_init(&info);
    if ((st = hz_model_get_info(model, &info))) {
        rc = fail_hz("reading the model info", st);
        goto done;
    }
    model_shape sh;
    if (read_shape(model, &sh)) goto done;
    if (!S->have_shape) {
        S->shape = sh;
        S->have_shape = 1;
    }

    /* Prompts depend on the vocabulary, known only now; they are made once and reused. */
    uint32_t need_ctx = 0, longest = 0;
    if (!S->prompts) {
        if (!(S->prompts = calloc(o->prompts, sizeof *S->prompts))) {
            rc = fail_oom();
            goto done;
        }
        for (uint32_t k = 0; k < o->prompts; k++) {
            uint32_t len = prompt_length(k);
            if (!(S->prompts[k] = malloc((size_t)len * sizeof(int32_t)))) {
                rc = fail_oom();
                goto done;
            }
            prompt_tokens(PROMPT_SEED + k, len, info.vocab_size, info.eos_token, S->prompts[k]);
        }
        if (!(S->warmup_prompt = malloc(WARMUP_PROMPT_LEN * sizeof(int32_t)))) {
            rc = fail_oom();
            goto done;
        }
        prompt_tokens(PROMPT_SEED - 1, WARMUP_PROMPT_LEN, info.vocab_size, info.eos_token, S->warmup_prompt);
    }
    /* --feed random: each request's decode inputs, made once like the prompts (outside every timing) */
    if (o->feed_random && !S->feeds) {
        const uint32_t nf = o->tokens > o->warmup ? o->tokens : o->warmup; /* one array length serves both */
        if (!(S->feeds = calloc(o->prompts, sizeof *S->feeds)) ||
            !(S->warmup_feed = malloc(((size_t)nf + 1u) * sizeof(int32_t)))) {
            rc = fail_oom();
            goto done;
        }
        for (uint32_t k = 0; k < o->prompts; k++) {
            if (!(S->feeds[k] = malloc(((size_t)nf + 1u) * sizeof(int32_t)))) {
                rc = fail_oom();
                goto done;
            }
            prompt_tokens(FEED_SEED + k, nf + 1u, info.vocab_size, info.eos_token, S->feeds[k]);
        }
        prompt_tokens(FEED_SEED - 1, nf + 1u, info.vocab_size, info.eos_token, S->warmup_feed);
    }
    /* A request occupies len + N - 1 positions (the last token is sampled, never run). */
    for (uint32_t k = 0; k < o->prompts; k++)
        if (prompt_length(k) > longest) longest = prompt_length(k);
    need_ctx = longest + o->tokens - 1;
    if (o->warmup && WARMUP_PROMPT_LEN + o->warmup - 1 > need_ctx) need_ctx = WARMUP_PROMPT_LEN + o->warmup - 1;
    if (need_ctx > info.max_context) {
        fprintf(stderr,
                "hz-bench: the longest request needs %u positions (prompt of %u + %u tokens - 1, or the "
                "warmup) but the model's context is %u; lower --tokens, --warmup or --prompts\n",
                need_ctx, longest, o->tokens, info.max_context);
        goto done;
    }
    hz_session_options so;
    hz_session_options_init(&so);
    so.max_context = need_ctx;
    if ((st = hz_session_create(model, &so, &session))) {
        rc = fail_hz("creating the session", st);
        goto done;
    }
    bench_ctx c;
    memset(&c, 0, sizeof c);
    c.session = session;
    c.eos = info.eos_token;
    c.vocab = info.vocab_size;
    c.digest = UINT64_C(0xcbf29ce484222325);
    c.cache = cache;
    c.feed_random = o->feed_random;

    if (cache_snapshot(cache, &s_create, 1)) goto done;
    if (vram_sample(S->device, &vp)) goto done;

    /* Warmup: excluded from every figure, but it does move the cache (that is its purpose). */
    request_result wr;
    if (o->warmup && run_request(&c, S->warmup_prompt, WARMUP_PROMPT_LEN, S->warmup_feed, o->warmup, 0, &wr))
        goto done;
    if (cache_snapshot(cache, &s_warm, 1)) goto done;
    if (vram_sample(S->device, &vp)) goto done;

    uint32_t n_req = o->prompts * o->blocks;
    req = calloc(n_req, sizeof *req);
    blk_pooled = calloc(o->blocks, sizeof *blk_pooled);
    blk_overall = calloc(o->blocks, sizeof *blk_overall);
    if (!req || !blk_pooled || !blk_overall) {
        rc = fail_oom();
        goto done;
    }
    for (uint32_t b = 0; b < o->blocks; b++)
        for (uint32_t k = 0; k < o->prompts; k++) {
            if (run_request(&c, S->prompts[k], prompt_length(k), S->feeds ? S->feeds[k] : NULL, o->tokens, 1,
                            &req[b * o->prompts + k]))
                goto done;
            /* Outside the timed section: a memory query per request is cheap next to 128 tokens. */
            if (vram_sample(S->device, &vp)) goto done;
        }
    if (cache_snapshot(cache, &s_end, 1)) goto done;
    if ((st = hz_session_stats_json(session, &sess_text))) {
        rc = fail_hz("reading the session stats", st);
        goto done;
    }
    const char *rss_src = "none";
    uint64_t rss = rss_peak_bytes(&rss_src);
    if (rss > S->rss_process_peak) S->rss_process_peak = rss;

    /* Figures. */
    double sum_n = 0, sum_n1 = 0, sum_resp = 0, sum_dec = 0, sum_ttft = 0, sum_pause = 0;
    uint32_t subs = 0;
    cJSON *blocks = cJSON_CreateArray(), *reqs = cJSON_CreateArray();
    run = cJSON_CreateObject();
    if (!blocks || !reqs || !run) {
        cJSON_Delete(blocks);
        cJSON_Delete(reqs);
        rc = fail_oom();
        goto done;
    }
    for (uint32_t b = 0; b < o->blocks; b++) {
        double bn = 0, bn1 = 0, bresp = 0, bdec = 0;
        for (uint32_t k = 0; k < o->prompts; k++) {
            const request_result *r = &req[b * o->prompts + k];
            bn += r->tokens;
            bn1 += r->tokens - 1;
            bresp += r->response_s;
            bdec += r->response_s - r->ttft_s;
            sum_ttft += r->ttft_s;
            sum_pause += r->stats_read_s;
            subs += r->eos_substitutions;
            cJSON *rj = cJSON_CreateObject();
            if (!rj) {
                cJSON_Delete(blocks);
                cJSON_Delete(reqs);
                rc = fail_oom();
                goto done;
            }
            cJSON_AddNumberToObject(rj, "block", b);
            cJSON_AddNumberToObject(rj, "prompt", k);
            cJSON_AddNumberToObject(rj, "prompt_tokens", r->prompt_len);
            cJSON_AddNumberToObject(rj, "tokens", r->tokens);
            cJSON_AddNumberToObject(rj, "ttft_s", r->ttft_s);
            cJSON_AddNumberToObject(rj, "response_s", r->response_s);
            cJSON_AddNumberToObject(rj, "stats_read_s", r->stats_read_s);
            cJSON_AddNumberToObject(rj, "eos_substitutions", r->eos_substitutions);
            cJSON_AddItemToArray(reqs, rj);
        }
        blk_pooled[b] = bdec > 0 ? bn1 / bdec : 0;
        blk_overall[b] = bresp > 0 ? bn / bresp : 0;
        sum_n += bn;
        sum_n1 += bn1;
        sum_resp += bresp;
        sum_dec += bdec;
        cJSON *bj = cJSON_CreateObject();
        if (!bj) {
            cJSON_Delete(blocks);
            cJSON_Delete(reqs);
            rc = fail_oom();
            goto done;
        }
        cJSON_AddNumberToObject(bj, "block", b);
        cJSON_AddNumberToObject(bj, "tokens_generated", bn);
        add_rate(bj, "pooled_decode_tok_s", bn1, bdec);
        add_rate(bj, "overall_output_tok_s", bn, bresp);
        cJSON_AddItemToArray(blocks, bj);
    }
    uint32_t experts = (uint32_t)sh.experts;
    uint32_t res_eff = resident ? resident : experts;

    /* The label every figure carries. */
    cJSON *label = cJSON_AddObjectToObject(run, "label");
    cJSON_AddItemToObject(label, "model_shape", shape_json(&sh));
    cJSON_AddStringToObject(label, "executor", sh.executor);
    cJSON_AddStringToObject(label, "accumulation", sh.accumulation);
    cJSON_AddNumberToObject(label, "resident", res_eff);
    cJSON_AddNumberToObject(label, "experts", experts);
    char res_label[32];
    snprintf(res_label, sizeof res_label, "c%u/%u", res_eff, experts);
    cJSON_AddStringToObject(label, "residency", res_label);
    /* the threaded transport with whole-blob H2D (HZ_TXN_PIECEWISE=0; piecewise is its default) is
     * labelled apart: its figures differ */
    const char *tname = json_str(s_end.raw, "transport", "UNKNOWN");
    const int pw = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s_end.raw, "staging_piecewise"));
    cJSON_AddStringToObject(label, "transport", !pw && strcmp(tname, "threaded") == 0 ? "threaded-whole" : tname);
    cJSON_AddStringToObject(label, "prefetch", json_str(s_end.raw, "prefetch", "UNKNOWN"));
    cJSON_AddStringToObject(label, "eviction", json_str(s_end.raw, "eviction", "UNKNOWN"));
    cJSON_AddStringToObject(label, "initial_placement", "canonical");
    cJSON_AddStringToObject(label, "device", hz_device_name(S->device));
    /* Debug builds verify rows after every transaction (extra device reads): such figures are not the
     * library's speed, so the label says so. */
    const cJSON *inv = cJSON_GetObjectItemCaseSensitive(s_end.raw, "invariant_checker");
    row->invariant_checker = cJSON_IsTrue(inv);
    /* the table's prefetch line (stats_end below takes s_end.raw) */
    row->prefetch = strcmp(json_str(s_end.raw, "prefetch", "off"), "next_layer") == 0 &&
                    opt_delta(&s_warm, &s_end, "prefetch_hits", &row->pf_used) == 0 &&
                    opt_delta(&s_warm, &s_end, "prefetch_experts", &row->pf_loaded) == 0 &&
                    opt_delta(&s_warm, &s_end, "prefetch_gated", &row->pf_gated) == 0;
    if (cJSON_IsBool(inv))
        cJSON_AddBoolToObject(label, "invariant_checker", cJSON_IsTrue(inv));
    else
        cJSON_AddStringToObject(label, "invariant_checker", "UNKNOWN");

    cJSON_AddNumberToObject(run, "requests", n_req);
    cJSON_AddNumberToObject(run, "tokens_generated", sum_n);
    cJSON_AddNumberToObject(run, "decode_tokens", sum_n1);
    cJSON_AddNumberToObject(run, "decode_seconds", sum_dec);
    cJSON_AddNumberToObject(run, "response_seconds", sum_resp);
    add_rate(run, "pooled_decode_tok_s", sum_n1, sum_dec);
    add_rate(run, "overall_output_tok_s", sum_n, sum_resp);
    cJSON_AddNumberToObject(run, "ttft_mean_s", n_req ? sum_ttft / n_req : 0);
    cJSON_AddNumberToObject(run, "response_mean_s", n_req ? sum_resp / n_req : 0);
    cJSON_AddNumberToObject(run, "eos_substitutions", subs);
    cJSON_AddNumberToObject(run, "stats_read_seconds_excluded", sum_pause);
    char dig[24];
    snprintf(dig, sizeof dig, "%016" PRIx64, c.digest);
    cJSON_AddStringToObject(run, "generated_tokens_fnv1a64", dig);
    cJSON_AddItemToObject(run, "blocks", blocks);
    cJSON *spread = cJSON_AddObjectToObject(run, "block_spread");
    rate_spread sp_pooled = spread_of(blk_pooled, o->blocks), sp_overall = spread_of(blk_overall, o->blocks);
    if (sum_dec > 0)
        cJSON_AddItemToObject(spread, "pooled_decode_tok_s", spread_json(sp_pooled));
    else
        cJSON_AddNullToObject(spread, "pooled_decode_tok_s");
    cJSON_AddItemToObject(spread, "overall_output_tok_s", spread_json(sp_overall));

    cJSON *cj = cJSON_AddObjectToObject(run, "cache");
    cJSON *measured = cache_delta_json(&s_warm, &s_end);
    cJSON *warm = cache_delta_json(&s_create, &s_warm);
    cJSON_AddItemToObject(cj, "measured", measured);
    cJSON_AddItemToObject(cj, "measured_prefill", phase_json(c.prefill));
    cJSON_AddItemToObject(cj, "measured_decode", phase_json(c.decode));
    cJSON_AddItemToObject(cj, "warmup", warm);
    {
        double v;
        if (json_u64(s_end.raw, "initial_fill_bytes", &v) == 0)
            cJSON_AddNumberToObject(cj, "initial_fill_bytes", v);
        else
            cJSON_AddStringToObject(cj, "initial_fill_bytes", "UNKNOWN");
    }
    /* Since creation: the initial fill is a placement, not a miss, so this counts every miss after it. */
    cJSON_AddNumberToObject(cj, "misses_since_creation", snap_get(&s_end, "misses"));
    cJSON_AddNumberToObject(cj, "expert_d2h_bytes_since_creation",
                            snap_get(&s_end, "expert_d2h_bytes") - snap_get(&s_create, "expert_d2h_bytes"));
    double miss_gbps = miss_path_json(run, &s_warm, &s_end, o->h2d_ceiling_gbps);
    miss_cells(row, run, miss_gbps, o->h2d_ceiling_gbps);
    cJSON_AddItemToObject(cj, "stats_end", s_end.raw);
    s_end.raw = NULL;

    cJSON *vj = cJSON_AddObjectToObject(run, "vram");
    if (vp.numeric) {
        cJSON_AddNumberToObject(vj, "peak_bytes", vp.used_max);
        cJSON_AddNumberToObject(vj, "total_bytes", vp.total);
    } else {
        cJSON_AddStringToObject(vj, "peak_bytes", vp.verdict);
        cJSON_AddStringToObject(vj, "total_bytes", vp.verdict);
    }
    cJSON_AddStringToObject(vj, "scope", "device-wide (total - free), all processes on the device");
    cJSON_AddStringToObject(vj, "method",
                            "hz_device_describe_json memory sampled after setup, after the warmup and after "
                            "every request, outside the timed sections");
    cJSON_AddNumberToObject(vj, "samples", vp.samples);

    cJSON *rj = cJSON_AddObjectToObject(run, "rss");
    if (rss)
        cJSON_AddNumberToObject(rj, "peak_bytes", (double)rss);
    else
        cJSON_AddStringToObject(rj, "peak_bytes", "UNSUPPORTED");
    cJSON_AddStringToObject(rj, "source", rss_src);
    cJSON_AddStringToObject(rj, "scope", S->rss_resettable ? "this residency (peak reset before the cache was created)"
                                                            : "process so far (the peak could not be reset)");

    cJSON *sj = cJSON_Parse(sess_text);
    if (sj)
        cJSON_AddItemToObject(run, "session_stats", sj);
    else
        cJSON_AddStringToObject(run, "session_stats", "UNKNOWN");
    cJSON_AddItemToObject(run, "requests_detail", reqs);

    /* The table row. */
    row->resident = res_eff;
    row->experts = experts;
    row->pooled = sum_dec > 0 ? sum_n1 / sum_dec : NAN;
    row->overall = sum_resp > 0 ? sum_n / sum_resp : 0;
    row->ttft_ms = n_req ? 1e3 * sum_ttft / n_req : 0;
    row->resp_ms = n_req ? 1e3 * sum_resp / n_req : 0;
    row->spread = sp_pooled.rel;
    {
        double h = snap_get(&s_end, "hits") - snap_get(&s_warm, "hits");
        double m = snap_get(&s_end, "misses") - snap_get(&s_warm, "misses");
        row->hit_rate = h + m > 0 ? h / (h + m) : 0;
        row->misses = m;
        row->h2d_mb = (snap_get(&s_end, "h2d_bytes") - snap_get(&s_warm, "h2d_bytes")) / (1024.0 * 1024.0);
    }
    if (vp.numeric)
        fmt_bytes(row->vram, sizeof row->vram, vp.used_max);
    else
        snprintf(row->vram, sizeof row->vram, "%s", vp.verdict);
    if (rss)
        fmt_bytes(row->rss, sizeof row->rss, (double)rss);
    else
        snprintf(row->rss, sizeof row->rss, "UNSUPPORTED");

    cJSON_AddItemToArray(runs, run);
    run = NULL;
    rc = 0;

done:
    cJSON_Delete(run);
    cJSON_Delete(s_create.raw);
    cJSON_Delete(s_warm.raw);
    cJSON_Delete(s_end.raw);
    hz_free(sess_text);
    free(req);
    free(blk_pooled);
    free(blk_overall);
    hz_session_destroy(session);
    /* Children before parents; a destroy fails only while a child lives, which cannot happen here. */
    if ((st = hz_model_destroy(model)) || (st = hz_cache_destroy(cache))) rc = fail_hz("tearing down a residency", st);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * main
 * ---------------------------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: hz-bench MODEL.hzq [--device auto|cpu|cuda:N] [--resident N[,N...]] [--executor NAME]\n"
            "                [--prompts 12] [--blocks 3] [--tokens 128] [--warmup 64]\n"
            "                [--transport serial|threaded|registered|auto] [--staging-threads N]\n"
            "                [--h2d-ceiling GBPS] [--prefetch] [--feed greedy|random] [--json OUT.json|-] [--quick]\n"
            "Measures the performance contract (DESIGN.md section 6, doc/bench.md): for each residency a\n"
            "fresh cache (canonical initial placement: experts 0..N-1 of every layer, then LRU evolving over\n"
            "the whole run), a warmup request excluded from every figure, then the fixed prompts run --blocks\n"
            "times in order at concurrency 1, greedy, EOS suppressed (when the sampler picks EOS the best\n"
            "other token from the logits is taken), --tokens generated per request.\n"
            "  --device     device (default auto)\n"
            "  --resident   routed experts per layer, comma-separated for a sweep; 0 = all (default 0)\n"
            "  --executor   routed-expert executor: auto, reference, scalar, grouped (default auto)\n"
            "  --prompts    prompts per block (default 12)\n"
            "  --blocks     passes over the prompt set (default 3)\n"
            "  --tokens     tokens generated per request, N (default 128)\n"
            "  --warmup     tokens generated by the warmup request, 0 = none (default 64)\n"
            "  --transport  miss transport: serial (the acquiring thread stages each blob), threaded (staging\n"
            "               copies split over a thread pool), registered (no staging: the backing is\n"
            "               registered for direct DMA), auto (registered where experts miss, else threaded;\n"
            "               the label names the one chosen) (default auto)\n"
            "  --staging-threads  copy threads of the threaded transport (default 0 = 3/4 of the online CPUs, at most 12)\n"
            "  --prefetch   speculative next-layer prefetch (HZ_PREFETCH_NEXT_LAYER; default off)\n"
            "  --feed       decode inputs: greedy (the previous output; the contract's) or random (seeded random\n"
            "               ids, as llama-bench's decode test; outputs still greedy, not fed back; sets\n"
            "               HZ_GPU_SPECULATE=0) (default greedy)\n"
            "  --h2d-ceiling  pinned H2D GB/s at expert size (hz-ceilings): the miss-path bandwidth is also\n"
            "               reported as a fraction of it\n"
            "  --json       write the JSON report to this file ('-': to stdout, the table then goes to stderr)\n"
            "  --quick      2 prompts x 1 block x 16 tokens, warmup 4 (for tests); explicit options win\n"
            "Figures: pooled decode = sum(N-1) / sum(response - TTFT); overall output rate = sum(N) /\n"
            "sum(response); TTFT and response time are request means; per-block rates and their spread\n"
            "(min, max, (max-min)/mean); H2D bytes, hits, misses and hit rate are cache-stat deltas over the\n"
            "measured requests; VRAM peak is device-wide (UNSUPPORTED/UNKNOWN when the device cannot say);\n"
            "RSS peak from VmHWM; miss-path GB/s = miss_transfer_bytes / miss_transfer_seconds of the cache\n"
            "stats over the measured requests (both counters required; null when nothing moved).\n"
            "Prompt rule: " PROMPT_RULE_TEXT "\n");
}


int main(int argc, char **argv) {
    bench_opts o = {NULL, "auto", "auto", "auto", NULL, "0", 12, 3, 128, 64, 0, 0, 0, 0, 0.0};
    int set_prompts = 0, set_blocks = 0, set_tokens = 0, set_warmup = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            o.quick = 1;
        } else if (strcmp(a, "--device") == 0 && has_value) {
            o.device = argv[++i];
        } else if (strcmp(a, "--executor") == 0 && has_value) {
            o.executor = argv[++i];
        } else if (strcmp(a, "--transport") == 0 && has_value) {
            o.transport = argv[++i];
        } else if (strcmp(a, "--prefetch") == 0) {
            o.prefetch = 1;
        } else if (strcmp(a, "--feed") == 0 && has_value) {
            const char *v = argv[++i];
            if (strcmp(v, "random") == 0) {
                o.feed_random = 1;
            } else if (strcmp(v, "greedy") != 0) {
                fprintf(stderr, "hz-bench: --feed: '%s' is neither greedy nor random\n", v);
                return 1;
            }
        } else if (strcmp(a, "--staging-threads") == 0 && has_value) {
            if (parse_u32(argv[++i], "--staging-threads", &o.staging_threads)) return 1;
        } else if (strcmp(a, "--json") == 0 && has_value) {
            o.json_path = argv[++i];
        } else if (strcmp(a, "--h2d-ceiling") == 0 && has_value) {
            if (parse_gbps(argv[++i], &o.h2d_ceiling_gbps)) return 1;
        } else if (strcmp(a, "--resident") == 0 && has_value) {
            o.resident_text = argv[++i];
        } else if (strcmp(a, "--prompts") == 0 && has_value) {
            if (parse_u32(argv[++i], "--prompts", &o.prompts)) return 1;
            set_prompts = 1;
        } else if (strcmp(a, "--blocks") == 0 && has_value) {
            if (parse_u32(argv[++i], "--blocks", &o.blocks)) return 1;
            set_blocks = 1;
        } else if (strcmp(a, "--tokens") == 0 && has_value) {
            if (parse_u32(argv[++i], "--tokens", &o.tokens)) return 1;
            set_tokens = 1;
        } else if (strcmp(a, "--warmup") == 0 && has_value) {
            if (parse_u32(argv[++i], "--warmup", &o.warmup)) return 1;
            set_warmup = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "hz-bench: unknown option or missing value: %s\n", a);
            usage(stderr);
            return 1;
        } else if (!o.model_path) {
            o.model_path = a;
        } else {
            fprintf(stderr, "hz-bench: unexpected argument '%s'\n", a);
            usage(stderr);
            return 1;
        }
    }
    if (!o.model_path) {
        fprintf(stderr, "hz-bench: no model given\n");
        usage(stderr);
        return 1;
    }
    /* read when a session is created: a step queued ahead with the sampled token would never be the next */
    if (o.feed_random && setenv("HZ_GPU_SPECULATE", "0", 1) != 0) {
        fprintf(stderr, "hz-bench: setting HZ_GPU_SPECULATE: %s\n", strerror(errno));
        return 1;
    }
    if (o.quick) {
        if (!set_prompts) o.prompts = 2;
        if (!set_blocks) o.blocks = 1;
        if (!set_tokens) o.tokens = 16;
        if (!set_warmup) o.warmup = 4;
    }
    if (o.prompts == 0 || o.blocks == 0 || o.tokens == 0) {
        fprintf(stderr, "hz-bench: --prompts, --blocks and --tokens must be at least 1\n");
        return 1;
    }
    if (o.prompts > 100000 || o.blocks > 100000 || (uint64_t)o.prompts * o.blocks > 1000000 || o.tokens > 1000000 ||
        o.warmup > 1000000) {
        fprintf(stderr, "hz-bench: --prompts, --blocks, --tokens or --warmup is unreasonably large\n");
        return 1;
    }
    if (transport_from_name(o.transport) < 0) {
        fprintf(stderr, "hz-bench: unknown transport '%s' (this library offers: serial, threaded, registered, auto)\n",
                o.transport);
        return 1;
    }
    uint32_t *res = NULL, n_res = 0;
    if (parse_residency_list(o.resident_text, &res, &n_res)) return 1;
    g_table = (o.json_path && strcmp(o.json_path, "-") == 0) ? stderr : stdout;

    int rc = 1, st;
    shared_state S;
    memset(&S, 0, sizeof S);
    S.o = &o;
    S.rss_source = "none";
    cJSON *report = NULL;
    char *text = NULL, *dev_text = NULL;
    table_row *rows = calloc(n_res, sizeof *rows);
    if (!rows) {
        rc = fail_oom();
        goto done;
    }

    double t_open = now_s();
    if ((st = hz_host_backing_open(o.model_path, NULL, &S.backing))) {
        rc = fail_hz("opening the model", st);
        goto done;
    }
    double backing_s = now_s() - t_open;
    if ((st = hz_device_open(o.device, &S.device))) {
        rc = fail_hz("opening the device", st);
        goto done;
    }

    report = cJSON_CreateObject();
    cJSON *runs = cJSON_CreateArray();
    if (!report || !runs) {
        cJSON_Delete(runs);
        rc = fail_oom();
        goto done;
    }
    for (uint32_t i = 0; i < n_res; i++)
        if (run_residency(&S, res[i], runs, &rows[i])) {
            cJSON_Delete(runs);
            goto done;
        }

    /* The report: identification first, then the protocol, then one object per residency. */
    {
        char date[32];
        time_t t = time(NULL);
        struct tm tmv;
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tmv));
        cJSON_AddStringToObject(report, "tool", "hz-bench");
        cJSON_AddNumberToObject(report, "schema", BENCH_SCHEMA);
        cJSON_AddStringToObject(report, "date_utc", date);
        cJSON_AddStringToObject(report, "library_version", hz_version());

        cJSON *mj = cJSON_AddObjectToObject(report, "model");
        cJSON_AddStringToObject(mj, "path", o.model_path);
        cJSON_AddStringToObject(mj, "identity", hz_host_backing_identity(S.backing));
        cJSON_AddItemToObject(mj, "shape", shape_json(&S.shape));
        cJSON_AddNumberToObject(mj, "backing_open_s", backing_s);

        cJSON *dj = cJSON_AddObjectToObject(report, "device");
        cJSON_AddStringToObject(dj, "name", hz_device_name(S.device));
        if ((st = hz_device_describe_json(S.device, &dev_text))) {
            rc = fail_hz("describing the device", st);
            cJSON_Delete(runs);
            goto done;
        }
        cJSON *desc = cJSON_Parse(dev_text);
        if (desc) {
            cJSON_AddStringToObject(dj, "backend", json_str(desc, "backend", "UNKNOWN"));
            cJSON_AddItemToObject(dj, "describe", desc);
        } else {
            cJSON_AddStringToObject(dj, "backend", "UNKNOWN");
        }

        cJSON *pj = cJSON_AddObjectToObject(report, "protocol");
        cJSON_AddNumberToObject(pj, "prompts", o.prompts);
        cJSON_AddNumberToObject(pj, "blocks", o.blocks);
        cJSON_AddNumberToObject(pj, "tokens", o.tokens);
        cJSON_AddNumberToObject(pj, "warmup_tokens", o.warmup);
        cJSON_AddNumberToObject(pj, "concurrency", 1);
        cJSON_AddStringToObject(pj, "sampling", "greedy");
        cJSON_AddBoolToObject(pj, "eos_suppressed", !o.feed_random);
        cJSON_AddStringToObject(pj, "decode_input", o.feed_random ? "random" : "greedy");
        if (o.feed_random)
            cJSON_AddStringToObject(pj, "decode_input_rule",
                                    "each decode step is fed a random token id (splitmix64 from seed "
                                    "0x487a52616e64496e + prompt index, EOS excluded) instead of the previous "
                                    "output; the outputs are sampled greedily, hashed and never fed back; "
                                    "HZ_GPU_SPECULATE=0");
        cJSON_AddStringToObject(pj, "initial_placement", "canonical");
        cJSON_AddStringToObject(pj, "eviction", "lru");
        cJSON_AddStringToObject(pj, "transport", o.transport);
        cJSON_AddStringToObject(pj, "executor_requested", o.executor);
        cJSON_AddBoolToObject(pj, "quick", o.quick);
        cJSON_AddStringToObject(pj, "prompt_rule", PROMPT_RULE_TEXT);
        cJSON *lens = cJSON_AddArrayToObject(pj, "prompt_lengths");
        for (uint32_t k = 0; k < o.prompts; k++) cJSON_AddItemToArray(lens, cJSON_CreateNumber(prompt_length(k)));
        cJSON_AddNumberToObject(pj, "warmup_prompt_length", WARMUP_PROMPT_LEN);
        cJSON_AddStringToObject(pj, "definitions",
                                "pooled_decode_tok_s = sum(N-1)/sum(response_s - ttft_s); overall_output_tok_s = "
                                "sum(N)/sum(response_s); ttft and response are request means; response_s = ttft_s + "
                                "decode time, the cache-stats read between prefill and decode (stats_read_s) left "
                                "out; cache figures are deltas over the measured requests (warmup and initial fill "
                                "apart), also split by phase (measured_prefill, measured_decode); "
                                "relative_spread = (max - min) / mean of the block rates");

        /* Process-wide RSS peak: the largest mark seen across all residencies and setup. */
        const char *src = "none";
        uint64_t now_peak = rss_peak_bytes(&src);
        if (now_peak > S.rss_process_peak) S.rss_process_peak = now_peak;
        if (S.rss_process_peak)
            cJSON_AddNumberToObject(report, "rss_process_peak_bytes", (double)S.rss_process_peak);
        else
            cJSON_AddStringToObject(report, "rss_process_peak_bytes", "UNSUPPORTED");
        cJSON_AddItemToObject(report, "runs", runs);
    }
    if (!(text = cJSON_Print(report))) {
        rc = fail_oom();
        goto done;
    }

    /* The table. */
    {
        const model_shape *sh = &S.shape;
        FILE *t = g_table;
        fprintf(t,
                "hz-bench: %s (layers %.0f, experts %.0f, top-k %.0f, hidden %.0f, expert width %.0f%s), device %s, "
                "executor %s, transport %s\n",
                sh->architecture, sh->layers, sh->experts, sh->top_k, sh->hidden, sh->expert_width,
                sh->shared_width > 0 ? ", shared expert" : "", hz_device_name(S.device), sh->executor, o.transport);
        fprintf(t, "protocol: %u prompts x %u blocks x %u tokens, warmup %u tokens, %s, concurrency 1\n", o.prompts,
                o.blocks, o.tokens, o.warmup,
                o.feed_random ? "random decode inputs (--feed random), greedy outputs" : "greedy, EOS suppressed");
        fprintf(t, "%-9s %11s %11s %9s %10s %8s %8s %8s %10s %9s %8s %12s %12s\n", "resident", "decode t/s",
                "output t/s", "TTFT ms", "resp ms", "spread", "hit", "misses", "H2D MiB", "miss GB/s", "of H2D",
                "VRAM peak", "RSS peak");
        for (uint32_t i = 0; i < n_res; i++) {
            const table_row *r = &rows[i];
            char rl[24];
            snprintf(rl, sizeof rl, "c%u/%u", r->resident, r->experts);
            char pooled[24] = "-", spread[24] = "-"; /* the pooled rate and its spread need a decode step */
            if (!isnan(r->pooled)) {
                snprintf(pooled, sizeof pooled, "%.1f", r->pooled);
                snprintf(spread, sizeof spread, "%.1f%%", 100.0 * r->spread);
            }
            fprintf(t, "%-9s %11s %11.1f %9.2f %10.2f %8s %7.1f%% %8.0f %10.2f %9s %8s %12s %12s\n", rl,
                    pooled, r->overall, r->ttft_ms, r->resp_ms, spread, 100.0 * r->hit_rate, r->misses,
                    r->h2d_mb, r->miss_bw, r->miss_frac, r->vram, r->rss);
        }
        for (uint32_t i = 0; i < n_res; i++)
            if (rows[i].prefetch)
                fprintf(t, "prefetch c%u/%u: %.0f of %.0f prefetched experts used (%.1f%%), %.0f predictions declined by "
                           "the gate\n",
                        rows[i].resident, rows[i].experts, rows[i].pf_used, rows[i].pf_loaded,
                        rows[i].pf_loaded > 0 ? 100.0 * rows[i].pf_used / rows[i].pf_loaded : 0.0, rows[i].pf_gated);
        for (uint32_t i = 0; i < n_res; i++)
            if (rows[i].invariant_checker) {
                fprintf(t, "note: this build runs the cache invariant checker (debug build); publish figures "
                           "from a release build only\n");
                break;
            }
        fflush(t);
    }
    if (o.json_path && report_file_write("hz-bench", o.json_path, text)) goto done;
    rc = 0;

done:
    if (S.prompts)
        for (uint32_t k = 0; k < o.prompts; k++) free(S.prompts[k]);
    free(S.prompts);
    if (S.feeds)
        for (uint32_t k = 0; k < o.prompts; k++) free(S.feeds[k]);
    free(S.feeds);
    free(S.warmup_feed);
    free(S.warmup_prompt);
    if ((st = hz_device_close(S.device)) || (st = hz_host_backing_close(S.backing))) rc = fail_hz("shutting down", st);
    cJSON_Delete(report);
    cJSON_free(text);
    hz_free(dev_text);
    free(rows);
    free(res);
    return rc;
}
