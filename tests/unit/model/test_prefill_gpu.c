/* The batched GPU prefill (lib/model/prefill_cuda.c) against the token-by-token GPU path and the CPU
 * path, on tiny random models of both architectures (suite 'gpu': needs a CUDA device).
 *
 * The chunk size is set to CHUNK tokens (HZ_GPU_PREFILL_CHUNK) so that the tiny models' 256-position
 * context holds prompts of one and of several chunks. For each architecture and each prompt length
 * (1, 7, 64, 150: one token, less than a chunk, more than one chunk, three chunks and a partial one)
 * the same prompt runs on
 *   cpu                       reference executor, full residency                  -- the reference
 *   cuda:0 batched            HZ_GPU_PREFILL=batched (also for a 1-token prompt), full residency and
 *                             partial residency (capacity = top-k: misses, several lease groups)
 *   cuda:0 token              HZ_GPU_PREFILL=token (one decode step per prompt token), full and partial
 * followed by STEPS greedy decode steps on the decode path, which read the K/V the prefill wrote.
 * Checks:
 *   - per step (prefill logits and every decode step), max|gpu - cpu| / max|cpu| <= REL_BOUND, for both
 *     GPU paths, and the greedy tokens equal the CPU's. Justification as tests/unit/model/
 *     test_model_gpu.c: all paths round at the same points (doc/numerics.md) and differ only in the
 *     order of FP32 additions (cuBLAS GEMMs and mma tiles here, warp-reduced GEMVs on the token path,
 *     eight interleaved partial sums on the CPU) and in expf; such differences (~1e-7 relative)
 *     occasionally move an FP16 rounding by one unit (2^-11 relative), and a few of those through two
 *     layers, the final norm and lm_head stay well inside 5e-3;
 *   - the K and V cache rows the batched prefill wrote match the CPU's (per layer, relative to the
 *     largest magnitude, same bound): K/V are visible directly, not only through later tokens;
 *   - full and partial residency give bit-identical prefill logits (same blocks on the same tiles; only
 *     where the blob addresses come from differs);
 *   - the path that ran is the one asked for, seen in the routing D2H count at partial residency: one
 *     count read-back per layer and chunk for the batched path, one per layer and token for the token
 *     path; none at full residency; never an expert byte device -> host;
 *   - a prompt prefilled in two calls (the second chunk starting at position > 0) matches the CPU;
 *   - failures (fault-injecting backend wrapper over cuda, partial residency): the prefill state's
 *     allocation, the token upload, the routing read-back and a cache miss in the middle of a layer's
 *     lease groups each make hz_prefill return the injected error with the position unchanged and no
 *     logits; the next call succeeds with logits bit-identical to an undisturbed run, and the cache
 *     can be destroyed at the end (no lease left behind).
 * HZ_MODEL_GPU_QUICK=1 runs fewer lengths (for compute-sanitizer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/backend_fault.h"
#include "core/core.h"
#include "horizon/horizon.h"
#include "model/forward_cuda.h"
#include "model/model.h"
#include "gpu_stack.h"
#include "tiny_model.h"

#define REL_BOUND 5e-3
#define STEPS 6
#define CHUNK 48u
#define MAX_PROMPT 160u

static void set_mode(const char *mode) {
    if (mode)
        setenv("HZ_GPU_PREFILL", mode, 1);
    else
        unsetenv("HZ_GPU_PREFILL");
}

static uint64_t routing_d2h(const stack *s) { return atomic_load(&s->d->be->copies[HZ_D2H][HZ_PURPOSE_ROUTING]); }

/* A prompt of n ids, a pure function of (n, vocab). */
static void make_prompt(int32_t *p, uint32_t n, uint32_t vocab) {
    uint64_t x = 0x243f6a8885a308d3ull ^ n;
    for (uint32_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (int32_t)((x >> 33) % vocab);
    }
}

/* Prefill prompt[0..n) with the given GPU prefill mode (in two calls when split is in 1..n-1), then
 * STEPS greedy decode steps on the decode path. logits [(STEPS + 1) x vocab], toks [STEPS + 1];
 * *prefill_route: routing D2H copies the prefill made. */
static int run_seq(stack *s, const int32_t *prompt, uint32_t n, const char *mode, uint32_t split, float *logits,
                   int32_t *toks, uint64_t *prefill_route) {
    int32_t next = 0;
    const uint64_t r0 = routing_d2h(s);
    set_mode(mode);
    int st;
    if (split > 0 && split < n) {
        st = hz_prefill(s->s, prompt, split, &next);
        if (!st) st = hz_prefill(s->s, prompt + split, n - split, &next);
    } else {
        st = hz_prefill(s->s, prompt, n, &next);
    }
    set_mode(NULL);
    if (prefill_route) *prefill_route = routing_d2h(s) - r0;
    for (int step = 0; !st && step <= STEPS; step++) {
        const float *h;
        uint32_t nv;
        st = hz_session_logits(s->s, &h, &nv);
        if (st) break;
        memcpy(logits + (size_t)step * s->vocab, h, (size_t)s->vocab * sizeof(float));
        toks[step] = next;
        if ((uint32_t)next != argmax(h, nv))
            FAILF("step %d: greedy token %d is not the argmax %u of the logits", step, (int)next, argmax(h, nv));
        if (step < STEPS) st = hz_decode_step(s->s, next, &next);
    }
    if (st) FAILF("run (%s, %u tokens): %s: %s", mode ? mode : "cpu", n, hz_status_name(st), hz_last_error_message());
    return st;
}

/* Compares a GPU run with the CPU run step by step; returns the worst relative error. */
static double compare(const char *what, const float *gl, const int32_t *gt, const float *cl, const int32_t *ct,
                      uint32_t V) {
    double worst = 0;
    for (int st = 0; st <= STEPS; st++) {
        double rel = max_rel(gl + (size_t)st * V, cl + (size_t)st * V, V);
        if (rel > worst) worst = rel;
        if (gt[st] != ct[st]) {
            FAILF("%s: step %d greedy token %d, cpu %d", what, st, (int)gt[st], (int)ct[st]);
            break;
        }
    }
    if (!(worst <= REL_BOUND)) FAILF("%s: max|gpu - cpu| / max|cpu| = %.3e above %.1e", what, worst, REL_BOUND);
    return worst;
}

/* The K/V rows 0..n-1 of every layer after a batched prefill against the CPU's. */
static void check_kv(const char *arch, const char *path, uint32_t n) {
    stack c, g;
    if (stack_open(&c, path, "cpu", 0, NULL)) return;
    if (stack_open(&g, path, "cuda:0", 0, NULL)) {
        stack_close(&c);
        return;
    }
    int32_t prompt[MAX_PROMPT], next;
    make_prompt(prompt, n, c.vocab);
    int st = hz_prefill(c.s, prompt, n, &next);
    set_mode("batched");
    if (!st) st = hz_prefill(g.s, prompt, n, &next);
    set_mode(NULL);
    const hz_model_config *cfg = &c.m->cfg;
    const size_t KD = (size_t)cfg->kv_heads * cfg->head_dim, ctx = c.s->max_context;
    const size_t layer_elems = ctx * KD, bytes = (size_t)cfg->layers * layer_elems * sizeof(hz_f16);
    hz_f16 *kg = malloc(bytes), *vg = malloc(bytes);
    float *a = malloc(n * KD * sizeof(float)), *r = malloc(n * KD * sizeof(float));
    hz_backend *be = g.d->be;
    if (!st && kg && vg && a && r) {
        st = hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, kg, g.s->gpu->kc, bytes, HZ_PURPOSE_ACTIVATION);
        if (!st) st = hz_backend_copy_d2h(be, HZ_QUEUE_COMPUTE, vg, g.s->gpu->vc, bytes, HZ_PURPOSE_ACTIVATION);
        if (!st) st = be->ops->queue_sync(be, HZ_QUEUE_COMPUTE);
    }
    if (st || !kg || !vg || !a || !r) {
        FAILF("%s kv check (%u tokens): %s", arch, n, st ? hz_last_error_message() : "out of memory");
    } else {
        double worst = 0;
        for (uint32_t l = 0; l < cfg->layers; l++)
            for (int kv = 0; kv < 2; kv++) {
                const hz_f16 *gsrc = (kv ? vg : kg) + l * layer_elems;
                const hz_f16 *csrc = (kv ? c.s->vcache : c.s->kcache) + l * layer_elems;
                for (size_t i = 0; i < n * KD; i++) {
                    a[i] = hz_f16_to_f32(gsrc[i]);
                    r[i] = hz_f16_to_f32(csrc[i]);
                }
                double rel = max_rel(a, r, n * KD);
                if (rel > worst) worst = rel;
                if (!(rel <= REL_BOUND))
                    FAILF("%s kv check (%u tokens): layer %u %s rows differ from the cpu by %.3e", arch, n, l,
                          kv ? "V" : "K", rel);
            }
        printf("%s: %3u tokens: batched prefill K/V rows vs cpu: max rel err %.3e\n", arch, n, worst);
    }
    free(kg);
    free(vg);
    free(a);
    free(r);
    stack_close(&g);
    stack_close(&c);
}

static void run_length(const char *arch, const char *path, uint32_t n) {
    stack ref;
    if (stack_open(&ref, path, "cpu", 0, NULL)) return;
    const uint32_t V = ref.vocab, K = ref.top_k, L = ref.layers;
    int32_t prompt[MAX_PROMPT];
    make_prompt(prompt, n, V);
    const size_t lbytes = (size_t)(STEPS + 1) * V * sizeof(float);
    float *cl = malloc(lbytes), *bl[2] = {malloc(lbytes), malloc(lbytes)}, *tl = malloc(lbytes);
    int32_t ct[STEPS + 1], bt[STEPS + 1], tt[STEPS + 1];
    if (!cl || !bl[0] || !bl[1] || !tl || run_seq(&ref, prompt, n, NULL, 0, cl, ct, NULL)) {
        if (!cl || !bl[0] || !bl[1] || !tl) FAILF("out of memory");
        goto out;
    }
    stack_close(&ref);
    int ran[2] = {0, 0};
    for (int r = 0; r < 2; r++) { /* 0: full residency, 1: capacity = top-k */
        const uint32_t cap = r ? K : 0;
        const char *res = r ? "partial" : "full";
        char what[128];
        uint64_t route_b = 0, route_t = 0;
        stack g;
        if (stack_open(&g, path, "cuda:0", cap, NULL)) continue;
        if (run_seq(&g, prompt, n, "batched", 0, bl[r], bt, &route_b) == 0) {
            ran[r] = 1;
            snprintf(what, sizeof what, "%s %3u tokens %s batched", arch, n, res);
            double eb = compare(what, bl[r], bt, cl, ct, V);
            if (atomic_load(&g.d->be->bytes[HZ_D2H][HZ_PURPOSE_EXPERT]) != 0) FAILF("%s: expert bytes D2H", what);
            const uint64_t want = r ? (uint64_t)L * ((n + CHUNK - 1) / CHUNK) : 0;
            if (route_b != want)
                FAILF("%s: %llu routing D2H copies in the prefill, expected %llu (one per layer and chunk)", what,
                      (unsigned long long)route_b, (unsigned long long)want);
            printf("%s: max rel err vs cpu %.3e over %d steps, routing D2H %llu\n", what, eb,
                   STEPS + 1, (unsigned long long)route_b);
        }
        stack_close(&g);
        if (stack_open(&g, path, "cuda:0", cap, NULL)) continue;
        if (run_seq(&g, prompt, n, "token", 0, tl, tt, &route_t) == 0) {
            snprintf(what, sizeof what, "%s %3u tokens %s token", arch, n, res);
            double et = compare(what, tl, tt, cl, ct, V);
            /* At least one per layer and token at partial residency (the decode step may read more). */
            if (r ? route_t < (uint64_t)L * n : route_t != 0)
                FAILF("%s: %llu routing D2H copies in the prefill, expected %s %llu", what, (unsigned long long)route_t,
                      r ? "at least" : "exactly", r ? (unsigned long long)L * n : 0ull);
            double bvt = ran[r] ? max_rel(bl[r], tl, (size_t)(STEPS + 1) * V) : 0;
            if (ran[r] && !(bvt <= REL_BOUND)) FAILF("%s: batched vs token path %.3e above %.1e", what, bvt, REL_BOUND);
            printf("%s: max rel err vs cpu %.3e, batched vs token %.3e, routing D2H %llu\n", what, et, bvt,
                   (unsigned long long)route_t);
        }
        stack_close(&g);
    }
    /* The prefill's own logits (step 0); the decode steps after it are test_model_gpu's business. */
    if (ran[0] && ran[1]) {
        if (memcmp(bl[0], bl[1], (size_t)V * sizeof(float)) != 0)
            FAILF("%s %u tokens: batched prefill logits differ between full and partial residency (max rel %.3e)",
                  arch, n, max_rel(bl[1], bl[0], V));
        else
            printf("%s %3u tokens: batched prefill logits bit-identical at full and partial residency\n", arch, n);
    }
out:
    if (ref.s) stack_close(&ref);
    free(cl);
    free(bl[0]);
    free(bl[1]);
    free(tl);
}

/* A prompt in two hz_prefill calls (the second starts at position split) against the CPU's single call. */
static void run_split(const char *arch, const char *path, uint32_t n, uint32_t split) {
    stack ref, g;
    if (stack_open(&ref, path, "cpu", 0, NULL)) return;
    const uint32_t V = ref.vocab;
    int32_t prompt[MAX_PROMPT];
    make_prompt(prompt, n, V);
    const size_t lbytes = (size_t)(STEPS + 1) * V * sizeof(float);
    float *cl = malloc(lbytes), *gl = malloc(lbytes);
    int32_t ct[STEPS + 1], gt[STEPS + 1];
    if (cl && gl && run_seq(&ref, prompt, n, NULL, 0, cl, ct, NULL) == 0 &&
        stack_open(&g, path, "cuda:0", 0, NULL) == 0) {
        if (run_seq(&g, prompt, n, "batched", split, gl, gt, NULL) == 0) {
            char what[128];
            snprintf(what, sizeof what, "%s %u tokens as %u + %u batched", arch, n, split, n - split);
            printf("%s: max rel err vs cpu %.3e\n", what, compare(what, gl, gt, cl, ct, V));
        }
        stack_close(&g);
    }
    stack_close(&ref);
    free(cl);
    free(gl);
}

/* One injected failure: hz_prefill fails with `want`, nothing advanced, no logits; the retry matches. */
static void expect_failure(stack *s, hz_fault_op op, uint64_t nth, int want, const char *what, const int32_t *prompt,
                           uint32_t n, const float *ref_logits) {
    int32_t next = -1;
    hz_backend_fault_arm(s->fault, op, nth, want);
    const uint64_t fired = hz_backend_fault_fired(s->fault);
    set_mode("batched");
    int st = hz_prefill(s->s, prompt, n, &next);
    set_mode(NULL);
    hz_backend_fault_arm(s->fault, op, 0, 0);
    if (hz_backend_fault_fired(s->fault) != fired + 1) {
        FAILF("fault %s: the injected fault did not fire", what);
        return;
    }
    if (st != want) FAILF("fault %s: hz_prefill returned %s, expected %s", what, hz_status_name(st), hz_status_name(want));
    printf("fault %s: %s: %s\n", what, hz_status_name(st), hz_last_error_message());
    if (!strstr(hz_last_error_message(), "prefill")) FAILF("fault %s: the message does not name the prefill", what);
    if (hz_session_position(s->s) != 0) FAILF("fault %s: position moved to %u", what, hz_session_position(s->s));
    const float *lg = NULL;
    uint32_t nv = 0;
    if (hz_session_logits(s->s, &lg, &nv) != HZ_ESTATE) FAILF("fault %s: logits readable after a failed prefill", what);
    set_mode("batched");
    st = hz_prefill(s->s, prompt, n, &next);
    set_mode(NULL);
    if (st) {
        FAILF("fault %s: retry: %s: %s", what, hz_status_name(st), hz_last_error_message());
        return;
    }
    st = hz_session_logits(s->s, &lg, &nv);
    if (st || memcmp(lg, ref_logits, (size_t)nv * sizeof(float)) != 0)
        FAILF("fault %s: retry logits differ from an undisturbed run", what);
    hz_session_reset(s->s);
}

static void run_faults(const char *arch, const char *path) {
    stack ref, f;
    if (stack_open(&ref, path, "cuda:0", 0, NULL)) return;
    const uint32_t V = ref.vocab, K = ref.top_k, n = 2 * CHUNK + 5;
    int32_t prompt[MAX_PROMPT], next;
    make_prompt(prompt, n, V);
    float *rl = malloc((size_t)V * sizeof(float));
    const float *lg;
    uint32_t nv;
    set_mode("batched");
    int st = rl ? hz_prefill(ref.s, prompt, n, &next) : HZ_ENOMEM;
    set_mode(NULL);
    if (!st) st = hz_session_logits(ref.s, &lg, &nv);
    if (!st) memcpy(rl, lg, (size_t)V * sizeof(float));
    stack_close(&ref);
    if (st) {
        FAILF("%s fault reference: %s", arch, hz_last_error_message());
        free(rl);
        return;
    }
    if (stack_open(&f, path, "fault", K, NULL) == 0) {
        /* First call: the prefill state is allocated (its mem_alloc is the first one after session
         * creation); then the token ids upload (the first H2D of a call), the routing read-back (the
         * only D2H before the logits) and an expert miss well into layer 0's lease groups. */
        expect_failure(&f, HZ_FAULT_MEM_ALLOC, 1, HZ_ENOMEM, "state allocation", prompt, n, rl);
        expect_failure(&f, HZ_FAULT_COPY_H2D, 1, HZ_EDEVICE, "token upload", prompt, n, rl);
        expect_failure(&f, HZ_FAULT_COPY_D2H, 1, HZ_EDEVICE, "routing read-back", prompt, n, rl);
        expect_failure(&f, HZ_FAULT_COPY_H2D, 4, HZ_EDEVICE, "expert miss mid-layer", prompt, n, rl);
        stack_close(&f);
    }
    free(rl);
}

static void run_arch(const char *arch, const char *path, int quick) {
    static const uint32_t lengths[] = {1, 7, 64, 150};
    /* quick (the sanitizers): 7 and 64 tokens, one chunk and two (the second partial); racecheck did not
     * finish within 300 s with 7 and 150 on the H200 (2026-11-29) */
    const uint32_t n_len = quick ? 2u : (uint32_t)(sizeof lengths / sizeof lengths[0]);
    for (uint32_t i = 0; i < n_len; i++) run_length(arch, path, quick ? lengths[i + 1] : lengths[i]);
    check_kv(arch, path, quick ? 64 : 150);
    run_split(arch, path, 64, 40);
    run_faults(arch, path);
}

int main(void) {
    char chunk[16];
    snprintf(chunk, sizeof chunk, "%u", CHUNK);
    setenv("HZ_GPU_PREFILL_CHUNK", chunk, 1);
    const int quick = getenv("HZ_MODEL_GPU_QUICK") != NULL;
    char *dir = NULL;
    char path[2][TINY_PATH_MAX];
    if (tiny_model_pair(&dir, path)) {
        printf("FAIL: tiny models: %s\n", hz_last_error_message());
        return 1;
    }
    printf("prefill_gpu: chunk %u tokens; bound max|gpu - cpu| / max|cpu| <= %.1e per step, greedy tokens identical\n",
           CHUNK, REL_BOUND);
    run_arch("olmoe", path[0], quick);
    run_arch("qwen2moe", path[1], quick);
    tiny_rmdir(dir);
    free(dir);
    if (g_failures) {
        printf("prefill_gpu: %d failure(s)\n", g_failures);
        return 1;
    }
    printf("prefill_gpu: OK\n");
    return 0;
}
