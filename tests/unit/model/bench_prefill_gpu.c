/* Timing of the batched GPU prefill (lib/model/prefill_cuda.c) on an artifact, normally one with the
 * full OLMoE-1B-7B or Qwen1.5-MoE-A2.7B layer shapes but few layers (hz-mkmodel --layers N, then
 * hz-pack), next to the token-by-token path on the same prompt.
 *
 * Usage: bench_prefill_gpu MODEL.hzq [--tokens N] [--reps R] [--token-reps R] [--capacity C]
 *                          [--transport serial|threaded|registered]
 *   --tokens      prompt length (default 512)
 *   --reps        timed batched prefills (default 5; median reported) after one warm-up run
 *   --token-reps  timed token-by-token prefills (default 1; 0 skips the token path)
 *   --capacity    experts per layer in the cache (default 0 = all: full residency)
 *   --transport   the cache's miss transport at partial residency (default threaded, the one scripts/bench
 *                 gives hz-bench; the library's own default is serial)
 * Every run starts from position 0 (hz_session_reset) with the same prompt; a run is timed from the
 * hz_prefill call to its return, which includes the final device synchronisation.
 *
 * Prints one line, `key=value` fields: arch, layers, tokens, residency, capacity, transport, batched_ms,
 * batched_tok_s, token_ms, token_tok_s, speedup, max_rel (max|batched - token| / max|token| over the last
 * token's logits) and greedy (same / differ: random full-size models have nearly flat logits, so a differing
 * greedy token is reported, not failed). Exit status 1 when a run fails or max_rel exceeds BENCH_REL_BOUND,
 * the full-size bound of doc/numerics.md: both paths round at the same points and differ only in FP32
 * summation order, which through a few full-width layers stays far below it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "horizon/horizon.h"

#define BENCH_REL_BOUND 2e-2

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what, int st) {
    printf("FAIL: %s: %s: %s\n", what, hz_status_name(st), hz_last_error_message());
    return 1;
}

static int parse_u32(const char *s, uint32_t *out) {
    char *end = NULL;
    unsigned long v = strtoul(s, &end, 10);
    if (!s[0] || !end || *end || v > 0xffffffffu) return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Runs `reps` prefills of prompt[0..n) from position 0; median seconds in *sec. */
static int time_prefill(hz_session *s, const int32_t *prompt, uint32_t n, uint32_t reps, double *sec) {
    double *t = calloc(reps ? reps : 1, sizeof *t);
    if (!t) return HZ_ENOMEM;
    int st = HZ_OK;
    for (uint32_t r = 0; r < reps && !st; r++) {
        int32_t next;
        st = hz_session_reset(s);
        double t0 = hz_now_seconds();
        if (!st) st = hz_prefill(s, prompt, n, &next);
        t[r] = hz_now_seconds() - t0;
    }
    if (!st) {
        qsort(t, reps, sizeof *t, cmp_d);
        *sec = t[reps / 2];
    }
    free(t);
    return st;
}

int main(int argc, char **argv) {
    uint32_t tokens = 512, reps = 5, token_reps = 1, capacity = 0;
    const char *path = NULL, *transport = "threaded";
    int bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        uint32_t *dst = NULL;
        if (strcmp(argv[i], "--tokens") == 0) dst = &tokens;
        else if (strcmp(argv[i], "--reps") == 0) dst = &reps;
        else if (strcmp(argv[i], "--token-reps") == 0) dst = &token_reps;
        else if (strcmp(argv[i], "--capacity") == 0) dst = &capacity;
        if (strcmp(argv[i], "--transport") == 0) {
            bad = i + 1 >= argc;
            if (!bad) transport = argv[++i];
        } else if (dst)
            bad = i + 1 >= argc || parse_u32(argv[++i], dst);
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            bad = 1;
    }
    const int tr = strcmp(transport, "serial") == 0     ? HZ_TRANSPORT_SERIAL
                   : strcmp(transport, "threaded") == 0   ? HZ_TRANSPORT_THREADED
                   : strcmp(transport, "registered") == 0 ? HZ_TRANSPORT_REGISTERED
                                                          : -1;
    if (bad || !path || tokens == 0 || reps == 0 || tr < 0) {
        printf("usage: bench_prefill_gpu MODEL.hzq [--tokens N] [--reps R] [--token-reps R] [--capacity C]\n"
               "                         [--transport serial|threaded|registered]\n");
        return 2;
    }
    hz_host_backing *b = NULL;
    hz_device *d = NULL;
    hz_cache *c = NULL;
    hz_model *m = NULL;
    hz_session *s = NULL;
    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = capacity;
    co.transport = tr;
    hz_session_options so;
    hz_session_options_init(&so);
    so.max_context = tokens;
    hz_model_info info;
    hz_model_info_init(&info);
    int st = hz_host_backing_open(path, NULL, &b);
    if (!st) st = hz_device_open("cuda:0", &d);
    if (!st) st = hz_cache_create(b, d, &co, &c);
    if (!st) st = hz_model_create(b, d, c, NULL, &m);
    if (!st) st = hz_model_get_info(m, &info);
    if (!st) st = hz_session_create(m, &so, &s);
    if (st) return fail("opening the model on cuda:0", st);
    const char *arch = "unknown";
    char *js = NULL;
    if (hz_model_describe_json(m, &js) == HZ_OK) arch = strstr(js, "\"qwen") ? "qwen2moe" : "olmoe";

    int32_t *prompt = malloc((size_t)tokens * sizeof *prompt);
    float *lb = malloc((size_t)info.vocab_size * sizeof *lb);
    if (!prompt || !lb) return fail("allocating", HZ_ENOMEM);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; i < tokens; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = (int32_t)((x >> 33) % info.vocab_size);
    }

    /* Batched: one warm-up (state, cuBLAS handle, first launches), then the timed runs. */
    double tb = 0, tt = 0;
    int32_t next_b = -1, next_t = -1;
    unsetenv("HZ_GPU_PREFILL");
    st = time_prefill(s, prompt, tokens, 1, &tb);
    if (!st) st = time_prefill(s, prompt, tokens, reps, &tb);
    const float *lg = NULL;
    uint32_t nv = 0;
    if (!st) st = hz_session_logits(s, &lg, &nv);
    if (st) return fail("batched prefill", st);
    memcpy(lb, lg, (size_t)nv * sizeof *lb);
    next_b = (int32_t)0;
    for (uint32_t i = 1; i < nv; i++)
        if (lb[i] > lb[next_b]) next_b = (int32_t)i;

    double max_rel = 0;
    if (token_reps) {
        setenv("HZ_GPU_PREFILL", "token", 1);
        st = time_prefill(s, prompt, tokens < 8 ? tokens : 8, 1, &tt); /* warm-up of the decode path */
        if (!st) st = time_prefill(s, prompt, tokens, token_reps, &tt);
        unsetenv("HZ_GPU_PREFILL");
        if (!st) st = hz_session_logits(s, &lg, &nv);
        if (st) return fail("token-by-token prefill", st);
        double md = 0, mr = 0;
        next_t = 0;
        for (uint32_t i = 0; i < nv; i++) {
            double dd = fabs((double)lb[i] - (double)lg[i]);
            if (!isfinite(lb[i])) dd = INFINITY;
            if (dd > md) md = dd;
            if (fabs((double)lg[i]) > mr) mr = fabs((double)lg[i]);
            if (lg[i] > lg[next_t]) next_t = (int32_t)i;
        }
        max_rel = mr > 0 ? md / mr : md;
    }
    printf("bench_prefill: arch=%s layers=%u tokens=%u residency=%s capacity=%u transport=%s batched_ms=%.3f "
           "batched_tok_s=%.1f",
           arch, info.layers, tokens, capacity && capacity < info.experts ? "partial" : "full", capacity, transport,
           tb * 1e3, tokens / tb);
    if (token_reps)
        printf(" token_ms=%.3f token_tok_s=%.1f speedup=%.1f max_rel=%.3e greedy=%s", tt * 1e3, tokens / tt, tt / tb,
               max_rel, next_b == next_t ? "same" : "differ");
    printf("\n");
    hz_free(js);
    free(prompt);
    free(lb);
    hz_session_destroy(s);
    int cst = hz_model_destroy(m);
    if (!cst) cst = hz_cache_destroy(c);
    if (!cst) cst = hz_device_close(d);
    if (!cst) cst = hz_host_backing_close(b);
    if (cst) return fail("closing", cst);
    if (token_reps && !(max_rel <= BENCH_REL_BOUND)) {
        printf("FAIL: batched vs token-by-token logits differ by %.3e (bound %.1e)\n", max_rel, BENCH_REL_BOUND);
        return 1;
    }
    return 0;
}
