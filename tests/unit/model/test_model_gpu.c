/* The GPU decode path against the CPU path on tiny random models of both architectures (suite 'gpu':
 * needs a CUDA device).
 *
 * For each architecture, the same prompt and greedy continuation run on
 *   cpu   (reference executor, full residency)                       -- the reference
 *   cuda:0 with the grouped and the scalar executor, each at full residency (device routing table) and
 *          at partial residency (capacity = top-k: misses on most layers, routing read back per layer)
 *          three ways: stored into pinned memory by the router itself with each layer's experts queued
 *          ahead behind a gate (the default), stored with the experts queued after the routing
 *          (HZ_GPU_EXPERTS_AHEAD=0), and copied back (HZ_GPU_ROUTE_MIRROR=0); and at capacity = experts
 *          - 1 (hits on most layers) with the experts ahead, the gates resolving all-hit groups from the
 *          device's table of rows (the default: from the session's third step on each step is a
 *          captured graph), the same launched kernel by kernel (HZ_GPU_PARTIAL_GRAPH=0), every gate
 *          waiting for the host (HZ_GPU_DEVICE_HITS=0), and each gate a kernel of its own instead of
 *          the router's work (HZ_GPU_GATE_IN_ROUTER=0); the stats' decode_path and experts_gate say which
 * and the test checks, per step:
 *   - every greedy token equals the CPU's, and equals the argmax of the returned logits (the token comes
 *     from the device argmax);
 *   - max|gpu - cpu| / max|cpu| over the logits <= GPU_REL_BOUND. Justification: both paths round at
 *     the same points (doc/numerics.md) and differ only in the order of FP32 additions inside dot
 *     products (warp reductions vs eight interleaved partial sums) and in expf; those differences
 *     (~1e-7 relative) occasionally move an FP16 rounding by one unit (2^-11 = 4.9e-4 relative), and a
 *     few such flips through two layers, the final norm and lm_head stay well inside 5e-3, the same
 *     budget tests/golden allows against transformers;
 *   - the session stats say how the routing came back ("routing_readback"), and the stored way was taken;
 *     and where the experts were queued ("experts_queued"), the gated ones counted (experts_gated), and
 *     how many gates passed on the device's table (gate_hits: some at capacity experts - 1, none with
 *     HZ_GPU_DEVICE_HITS=0) or waited for the host (gates_waited: some at capacity top-k), the two
 *     adding up to the gated ones, and the table copied (gate_table_copies);
 *   - full and partial residency with the same executor give bit-identical logits (the kernels see the
 *     same experts in the same ascending order; only where the row addresses come from differs);
 *   - the grouped executor's sessions report the expert kernels chosen for the model: the two-pass
 *     kernels for OLMoE (nothing runs beside its experts), the fused kernel for Qwen;
 *   - no expert bytes ever travel device -> host; ROUTING D2H copies happen at partial residency only.
 * The decode step itself (lib/model/forward_cuda.c, cuda/model/decode_ops.cu), on the grouped executor
 * at full residency:
 *   - the CUDA graph, eager launches with programmatic dependent launch, plain eager launches, and the
 *     graph with the router tail in its own kernel instead of inside the router GEMV or the reverse
 *     (HZ_GPU_ROUTE_KERNEL), and OLMoE's router as one thread-block cluster or as two kernels
 *     (HZ_GPU_ROUTE_CLUSTER) give bit-identical logits for the whole sequence, the session stats name
 *     where the router tail ran, and the graph really ran
 *     (the session stats say "graph" with graph steps > 0; a capture failure is a test failure and
 *     prints why);
 *   - greedy steps bring 4 bytes (the argmax) back per step, not the logits (stored into pinned memory
 *     by the argmax kernel where kernels can address it: no copy at all); hz_session_logits and a
 *     non-greedy sampler fetch them, and the fetched logits equal those of a greedy session;
 *   - the step queued ahead (a greedy graph session launches the next position's step with the device's
 *     argmax as its token before it returns): same tokens and bit-identical logits as a session without
 *     it, through a greedy chain, a step with another token, a prefill and a reset in the middle;
 *   - long context: 200 teacher-forced steps (positions past several attention chunks of 64) against
 *     the CPU path within GPU_REL_BOUND per step: with the attention's group count by position (two
 *     groups per block: every position's chunks in one block), and with one group at the default split
 *     count and at 1 and 3 splits (one block walking every chunk; splits that do not divide the chunks).
 * It prints decode tokens/s for each configuration (tiny models: launch-bound, not a bandwidth figure).
 * A lease of another thread held past a gate's 10 s fails that step, and the session then decodes as a
 * fresh one ("late", OLMoE, about 14 s; not with HZ_MODEL_GPU_QUICK).
 * HZ_MODEL_GPU_PARTS (a comma-separated subset of run,modes,queued,long,late; default all) runs only those
 * checks, so that compute-sanitizer, which makes every kernel slow, can cover the test in pieces that
 * each fit one device call (scripts/gpu-check-model). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cache/cache.h"
#include "core/core.h"
#include "horizon/horizon.h"
#include "model/forward_cuda.h"
#include "gpu_stack.h"
#include "tiny_model.h"

#include "../../../cuda/model/model_ops.cuh"

#define GPU_REL_BOUND 5e-3
#define N_PROMPT 8
#define N_STEPS 24
#define N_BENCH 64
#define N_LONG 200 /* teacher-forced positions of the long-context check (tiny max_context: 256) */

/* Prompt, then N_STEPS greedy steps; logits[(N_STEPS + 1) x vocab], tokens[N_STEPS + 1]. */
static int run_seq(stack *s, float *logits, int32_t *tokens) {
    static const int32_t prompt[N_PROMPT] = {1, 17, 42, 99, 256, 3, 500, 7};
    int32_t next = 0;
    int st = hz_prefill(s->s, prompt, N_PROMPT, &next);
    for (int step = 0; !st && step <= N_STEPS; step++) {
        const float *h;
        uint32_t n;
        st = hz_session_logits(s->s, &h, &n);
        if (st) break;
        memcpy(logits + (size_t)step * s->vocab, h, (size_t)s->vocab * sizeof(float));
        tokens[step] = next;
        if ((uint32_t)next != argmax(h, n))
            FAILF("step %d: sampled greedy token %d is not the argmax %u of the logits", step, (int)next,
                  argmax(h, n));
        if (step < N_STEPS) st = hz_decode_step(s->s, next, &next);
    }
    if (st) FAILF("run: %s: %s", hz_status_name(st), hz_last_error_message());
    return st;
}

/* Decode tokens/s over N_BENCH steps after the sequence above (session continues). */
static double bench(stack *s, int32_t tok) {
    if (getenv("HZ_MODEL_GPU_QUICK")) return 0; /* under compute-sanitizer: correctness only */
    double t0 = hz_now_seconds();
    int32_t next = tok;
    for (int i = 0; i < N_BENCH; i++) {
        int st = hz_decode_step(s->s, next, &next);
        if (st) {
            FAILF("bench: %s", hz_last_error_message());
            return 0;
        }
    }
    return N_BENCH / (hz_now_seconds() - t0);
}

static uint64_t json_u64(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
}

/* The string value of `key` in a flat JSON object, into out (n bytes, truncated; "" when absent). */
static void json_str(const char *json, const char *key, char *out, size_t n) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(json, pat);
    size_t i = 0;
    if (p)
        for (p += strlen(pat); p[i] && p[i] != '"' && i + 1 < n; i++) out[i] = p[i];
    out[i] = '\0';
}

static void run_arch(const char *path, const char *arch) {
    stack ref;
    if (stack_open(&ref, path, "cpu", 0, "reference")) return;
    const uint32_t V = ref.vocab, K = ref.top_k, E = ref.experts;
    float *cl = malloc((size_t)(N_STEPS + 1) * V * sizeof(float));
    int32_t ctok[N_STEPS + 1];
    if (!cl || run_seq(&ref, cl, ctok)) {
        free(cl);
        stack_close(&ref);
        return;
    }
    double cpu_tps = bench(&ref, ctok[N_STEPS]);
    stack_close(&ref);
    printf("%s: cpu reference decode %.1f tok/s\n", arch, cpu_tps);

    static const char *execs[] = {"grouped", "scalar"};
    const size_t seq_bytes = (size_t)(N_STEPS + 1) * V * sizeof(float);
    enum { WAYS = 8 };
    static const char *way_name[WAYS] = {"full", "stored, experts ahead", "stored, experts after", "copied",
                                         "stored, experts ahead, hits on the device",
                                         "stored, experts ahead, every gate waiting",
                                         "stored, experts ahead, hits on the device, eager",
                                         "stored, experts ahead, hits on the device, gate kernel"};
    float *gl[WAYS];
    int have_all = 1;
    for (int r = 0; r < WAYS; r++) have_all &= (gl[r] = malloc(seq_bytes)) != NULL;
    for (int e = 0; e < 2 && have_all; e++) {
        int ran[WAYS] = {0};
        /* r = 0: full residency; r = 1: capacity = top-k, the routing stored into pinned memory by the
         * router and the experts queued ahead of it; r = 2: the same with the experts queued after the
         * routing (HZ_GPU_EXPERTS_AHEAD=0); r = 3: the routing copied back (HZ_GPU_ROUTE_MIRROR=0);
         * r = 4: as r = 1 at capacity experts - 1; r = 5: the same with HZ_GPU_DEVICE_HITS=0; r = 6: as
         * r = 4 with HZ_GPU_PARTIAL_GRAPH=0 (r = 1 and 4 capture their steps as graphs); r = 7: as r = 4
         * with each gate a kernel of its own (HZ_GPU_GATE_IN_ROUTER=0; elsewhere the router runs it) */
        for (int r = 0; r < WAYS; r++) {
            const uint32_t cap = r == 0 ? 0 : r < 4 ? K : E - 1;
            stack g;
            /* read at session creation */
            setenv("HZ_GPU_ROUTE_MIRROR", r == 3 ? "0" : "1", 1);
            setenv("HZ_GPU_EXPERTS_AHEAD", r == 2 ? "0" : "1", 1);
            setenv("HZ_GPU_DEVICE_HITS", r == 5 ? "0" : "1", 1);
            setenv("HZ_GPU_PARTIAL_GRAPH", r == 6 ? "0" : "1", 1);
            setenv("HZ_GPU_GATE_IN_ROUTER", r == 7 ? "0" : "1", 1);
            const int open_failed = stack_open(&g, path, "cuda:0", cap, execs[e]);
            unsetenv("HZ_GPU_ROUTE_MIRROR");
            unsetenv("HZ_GPU_EXPERTS_AHEAD");
            unsetenv("HZ_GPU_DEVICE_HITS");
            unsetenv("HZ_GPU_PARTIAL_GRAPH");
            unsetenv("HZ_GPU_GATE_IN_ROUTER");
            if (open_failed) continue;
            int32_t gtok[N_STEPS + 1];
            if (run_seq(&g, gl[r], gtok) == 0) {
                ran[r] = 1;
                double worst = 0;
                int tok_ok = 1;
                for (int st = 0; st <= N_STEPS; st++) {
                    double rel = max_rel(gl[r] + (size_t)st * V, cl + (size_t)st * V, V);
                    if (rel > worst) worst = rel;
                    if (gtok[st] != ctok[st]) {
                        FAILF("%s %s cap %u: step %d greedy token %d, cpu %d", arch, execs[e], cap, st, (int)gtok[st],
                              (int)ctok[st]);
                        tok_ok = 0;
                        break;
                    }
                }
                if (!(worst <= GPU_REL_BOUND))
                    FAILF("%s %s cap %u: max|gpu - cpu| / max|cpu| = %.3e above %.1e", arch, execs[e], cap, worst,
                          GPU_REL_BOUND);
                const hz_backend *be = g.d->be;
                uint64_t route_d2h = atomic_load(&be->copies[HZ_D2H][HZ_PURPOSE_ROUTING]);
                uint64_t expert_d2h = atomic_load(&be->bytes[HZ_D2H][HZ_PURPOSE_EXPERT]);
                uint64_t w_h2d = atomic_load(&be->bytes[HZ_H2D][HZ_PURPOSE_WEIGHTS]);
                char *js = NULL;
                uint64_t misses = UINT64_MAX;
                if (hz_cache_stats_json(g.c, &js) == HZ_OK) {
                    misses = json_u64(js, "misses");
                    if (json_u64(js, "expert_d2h_bytes") != 0) FAILF("%s: cache reports expert D2H bytes", arch);
                    hz_free(js);
                }
                if (expert_d2h != 0) FAILF("%s %s cap %u: %llu expert bytes D2H", arch, execs[e], cap,
                                           (unsigned long long)expert_d2h);
                if (cap == 0 && route_d2h != 0)
                    FAILF("%s %s full residency: %llu routing D2H copies (the table should stay on the device)", arch,
                          execs[e], (unsigned long long)route_d2h);
                if (cap != 0 && route_d2h == 0) FAILF("%s %s partial residency: no routing D2H", arch, execs[e]);
                /* How the decode steps' routing came back: at r = 1, 2 through the router's own stores (these
                 * tests run the cluster or in-GEMV router tail, without prediction; the batched prefill still
                 * copies its routing, so the stored ones are some of the routing D2H), at r = 3 never; and
                 * where the experts were queued: behind gates at r = 1 (every stored routing from the
                 * second step on: the first step runs without gates, see forward_cuda.c). */
                char readback[32] = "?", queued[32] = "?", path_s[40] = "?", gate_s[32] = "?";
                uint64_t stored = UINT64_MAX, gated = UINT64_MAX, hits = UINT64_MAX, waited = UINT64_MAX,
                         copies = UINT64_MAX;
                if (hz_session_stats_json(g.s, &js) == HZ_OK) {
                    json_str(js, "routing_readback", readback, sizeof readback);
                    json_str(js, "experts_queued", queued, sizeof queued);
                    json_str(js, "decode_path", path_s, sizeof path_s);
                    json_str(js, "experts_gate", gate_s, sizeof gate_s); /* "" where null */
                    stored = json_u64(js, "routing_stored");
                    gated = json_u64(js, "experts_gated");
                    hits = json_u64(js, "gate_hits");
                    waited = json_u64(js, "gates_waited");
                    copies = json_u64(js, "gate_table_copies");
                    hz_free(js);
                }
                const int ahead = r == 1 || r >= 4, stores = ahead || r == 2;
                const char *want = r == 0 ? "none (routing on the device)" : stores ? "router store" : "copy";
                const int stored_ok = stores ? stored > 0 && stored <= route_d2h : stored == 0;
                if (strcmp(readback, want) != 0 || !stored_ok)
                    FAILF("%s %s cap %u: routing_readback \"%s\" with %llu of %llu routing D2H stored, expected \"%s\"",
                          arch, execs[e], cap, readback, (unsigned long long)stored, (unsigned long long)route_d2h, want);
                const char *want_q = r == 0 ? "on the device" : ahead ? "ahead of the routing" : "after the routing";
                const int gated_ok = ahead ? gated > 0 && gated + g.layers >= stored && gated < stored : gated == 0;
                if (strcmp(queued, want_q) != 0 || !gated_ok)
                    FAILF("%s %s %s: experts_queued \"%s\" with %llu gated (%llu routings stored), expected \"%s\"",
                          arch, execs[e], way_name[r], queued, (unsigned long long)gated, (unsigned long long)stored,
                          want_q);
                /* The gates that passed on the device's table and those that waited for the host add up to
                 * the gated ones where the table is on (r = 1, 4), and are 0 where it is not. */
                const int dev = r == 1 || r == 4 || r == 6 || r == 7;
                const int table_ok = dev ? hits + waited == gated && copies > 0 && (r >= 4 ? hits > 0 : waited > 0)
                                         : hits == 0 && waited == 0 && copies == 0;
                if (!table_ok)
                    FAILF("%s %s %s: %llu gates passed on the device's table, %llu waited, %llu gated, %llu layers "
                          "copied into the table",
                          arch, execs[e], way_name[r], (unsigned long long)hits, (unsigned long long)waited,
                          (unsigned long long)gated, (unsigned long long)copies);
                /* Partial-residency steps are captured as graphs with the hits on the device (r = 1, 4) */
                const char *want_p = r == 0                 ? "graph"
                                     : r == 1 || r == 4 || r == 7 ? "graph (partial residency)"
                                                        : "eager (partial residency)";
                if (strcmp(path_s, want_p) != 0)
                    FAILF("%s %s %s: decode_path \"%s\", expected \"%s\"", arch, execs[e], way_name[r], path_s, want_p);
                /* Behind the gates (the experts ahead), the router runs each gate except at r = 7 */
                const char *want_g = !ahead ? "" : r == 7 ? "own kernel" : "router";
                if (strcmp(gate_s, want_g) != 0)
                    FAILF("%s %s %s: experts_gate \"%s\", expected \"%s\"", arch, execs[e], way_name[r], gate_s, want_g);
                double tps = bench(&g, gtok[N_STEPS]);
                printf("%s: cuda:0 %-7s %-7s (capacity %u, %s): %d steps, tokens %s, max rel err %.3e, "
                       "misses %llu, routing D2H %llu, gates %llu (%llu passed on the device), weights H2D %llu B, "
                       "decode %.1f tok/s\n",
                       arch, execs[e], cap ? "partial" : "full", cap ? cap : 0u, way_name[r], N_STEPS + 1,
                       tok_ok ? "identical" : "DIFFER", worst, (unsigned long long)misses,
                       (unsigned long long)route_d2h, (unsigned long long)gated, (unsigned long long)(dev ? hits : 0),
                       (unsigned long long)w_h2d, tps);
            }
            stack_close(&g);
        }
        for (int r = 1; r < WAYS; r++) {
            if (!ran[0] || !ran[r]) continue;
            if (memcmp(gl[0], gl[r], seq_bytes) != 0)
                FAILF("%s %s: full and partial residency (routing %s) logits differ (max rel %.3e)", arch, execs[e],
                      way_name[r], max_rel(gl[r], gl[0], (N_STEPS + 1) * V));
            else
                printf("%s: cuda:0 %s: full and partial residency (routing %s) logits bit-identical\n", arch,
                       execs[e], way_name[r]);
        }
    }
    if (!have_all) FAILF("%s: out of memory for the logits of %d ways", arch, WAYS);
    for (int r = 0; r < WAYS; r++) free(gl[r]);
    free(cl);
}

/* The "decode_path" string of a session's stats JSON (into out), and its graph_steps. */
static uint64_t decode_path(hz_session *s, char *out, size_t n) {
    char *js = NULL;
    out[0] = '\0';
    if (hz_session_stats_json(s, &js) != HZ_OK) {
        FAILF("hz_session_stats_json: %s", hz_last_error_message());
        return 0;
    }
    json_str(js, "decode_path", out, n);
    uint64_t steps = json_u64(js, "graph_steps");
    const char *why = strstr(js, "\"graph_fallback\":");
    if (why && strncmp(why + strlen("\"graph_fallback\":"), "null", 4) != 0) printf("  %s\n", why);
    hz_free(js);
    return steps;
}

/* Graph, eager + PDL, plain eager, the graph with the router tail placed the other way (its own
 * kernel or inside the router GEMV: HZ_GPU_ROUTE_KERNEL, read when a session is created), and the graph
 * with the routed experts waiting for the router GEMV's end instead of its ready flags
 * (HZ_GPU_ROUTE_READY=0), and the graph with Qwen's side shared down GEMV after a full edge from the
 * router GEMV instead of a programmatic one (HZ_GPU_SIDE_EDGE=0), and the graph with the router rows
 * spread over every warp of the router GEMV instead of on warps of their own (HZ_GPU_ROUTER_ALONE=0),
 * and the graph with the router rows handing over through a ticket instead of tagged words
 * (HZ_GPU_ROUTE_TAGS=0) on the same model: bit-identical logits; the stats say where the experts and the shared down start;
 * greedy steps copy 4 bytes back, not the logits; a sampling session fetches them. */
#define N_MODES 9
static void check_decode_modes(const char *path, const char *arch) {
    static const struct {
        const char *name;
        int graph, pdl, other_route, no_ready, full_edge, spread, ticket, no_cluster;
    } modes[N_MODES] = {{"graph+pdl", 1, 1, 0, 0, 0, 0, 0, 0}, {"eager+pdl", 0, 1, 0, 0, 0, 0, 0, 0},
                        {"eager", 0, 0, 0, 0, 0, 0, 0, 0},
                        {"graph+pdl, other router tail", 1, 1, 1, 0, 0, 0, 0, 0},
                        {"graph+pdl, experts after the router's end", 1, 1, 0, 1, 0, 0, 0, 0},
                        {"graph+pdl, shared down after the router's end", 1, 1, 0, 0, 1, 0, 0, 0},
                        {"graph+pdl, router rows spread over all warps", 1, 1, 0, 0, 0, 1, 0, 0},
                        {"graph+pdl, router rows through a ticket", 1, 1, 0, 0, 0, 0, 1, 0},
                        {"graph+pdl, router tail in its own kernel, not the router's cluster", 1, 1, 0, 0, 0, 0, 0, 1}};
    /* the default places OLMoE's tail out of the GEMV (in the router's cluster where clusters launch, else
     * in its own kernel) and Qwen's inside the GEMV (forward_cuda.c, route_placement) */
    const char *other_route = strcmp(arch, "olmoe") == 0 ? "0" : "all";
    stack g;
    if (stack_open(&g, path, "cuda:0", 0, "grouped")) return;
    const uint32_t V = g.vocab;
    float *lg[N_MODES] = {NULL};
    int ok = 1;
    for (int md = 0; md < N_MODES && ok; md++) {
        lg[md] = malloc((size_t)(N_STEPS + 1) * V * sizeof(float));
        if (modes[md].other_route) setenv("HZ_GPU_ROUTE_KERNEL", other_route, 1);
        if (modes[md].no_ready) setenv("HZ_GPU_ROUTE_READY", "0", 1);
        if (modes[md].full_edge) setenv("HZ_GPU_SIDE_EDGE", "0", 1);
        if (modes[md].spread) setenv("HZ_GPU_ROUTER_ALONE", "0", 1);
        if (modes[md].ticket) setenv("HZ_GPU_ROUTE_TAGS", "0", 1);
        if (modes[md].no_cluster) setenv("HZ_GPU_ROUTE_CLUSTER", "0", 1);
        hz_session *s = NULL;
        int st = hz_session_create(g.m, NULL, &s);
        unsetenv("HZ_GPU_ROUTE_READY");
        unsetenv("HZ_GPU_SIDE_EDGE");
        unsetenv("HZ_GPU_ROUTER_ALONE");
        unsetenv("HZ_GPU_ROUTE_TAGS");
        unsetenv("HZ_GPU_ROUTE_CLUSTER");
        if (!st) st = hz_gpu_session_set_decode(s, modes[md].graph, modes[md].pdl, 0);
        if (st || !lg[md]) {
            FAILF("%s %s: session: %s", arch, modes[md].name, hz_last_error_message());
            hz_session_destroy(s);
            unsetenv("HZ_GPU_ROUTE_KERNEL");
            ok = 0;
            break;
        }
        hz_session *keep = g.s;
        g.s = s;
        int32_t tok[N_STEPS + 1];
        ok = run_seq(&g, lg[md], tok) == 0;
        char dp[64];
        uint64_t gsteps = decode_path(s, dp, sizeof dp);
        if (modes[md].graph && (strcmp(dp, "graph") != 0 || gsteps == 0 || gsteps == UINT64_MAX))
            FAILF("%s %s: decode path \"%s\" with %llu graph steps, expected the CUDA graph", arch, modes[md].name,
                  dp, (unsigned long long)gsteps);
        if (!modes[md].graph && gsteps != 0) FAILF("%s %s: %llu graph steps with the graph disabled", arch,
                                                   modes[md].name, (unsigned long long)gsteps);
        { /* the flags are used where the router runs inside its GEMV: Qwen by default, OLMoE when moved */
            const int tail_in_gemv = strcmp(arch, "olmoe") == 0 ? modes[md].other_route : !modes[md].other_route;
            /* ... and where the routed experts take the fused kernel (Qwen; OLMoE takes the two-pass
             * kernels, which wait for the router's end) */
            const int fused = strcmp(arch, "olmoe") != 0;
            const char *want = fused && tail_in_gemv && !modes[md].no_ready ? "\"experts_start\":\"router flags\""
                                                                   : "\"experts_start\":\"router end\"";
            /* Qwen's shared down runs on the side stream; its edge is programmatic in captured steps */
            const char *want_sd = strcmp(arch, "olmoe") == 0 ? "\"shared_down_start\":null"
                                  : modes[md].graph && modes[md].pdl && !modes[md].full_edge
                                      ? "\"shared_down_start\":\"router trigger\""
                                      : "\"shared_down_start\":\"router end\"";
            /* the routed experts take the two-pass kernels where nothing runs beside them (OLMoE), the
             * fused kernel beside Qwen's shared down (hz_gpu_model_create); HZ_W4A16_PATH is not set here */
            const char *want_k = strcmp(arch, "olmoe") == 0 ? "\"expert_kernels\":\"twopass\""
                                                            : "\"expert_kernels\":\"fused\"";
            /* where the router tail ran: OLMoE's router GEMV holds the router rows alone, so by default
             * it runs as one cluster that routes (on a device that launches clusters: the tiny model
             * then has 8 blocks of one row each); Qwen's routes inside its GEMV */
            const char *want_rt = tail_in_gemv                                     ? "\"router_tail\":\"router GEMV\""
                                  : strcmp(arch, "olmoe") != 0 || modes[md].no_cluster ? "\"router_tail\":\"own kernel\""
                                  : g.m->gpu->dev.clusters                          ? "\"router_tail\":\"router cluster\""
                                                                                   : "\"router_tail\":\"own kernel\"";
            char *js = NULL;
            if (hz_session_stats_json(s, &js) != HZ_OK || !strstr(js, want) || !strstr(js, want_sd) ||
                !strstr(js, want_k) || !strstr(js, want_rt))
                FAILF("%s %s: stats without %s, %s, %s or %s", arch, modes[md].name, want, want_sd, want_k, want_rt);
            hz_free(js);
        }
        if (ok && md == 0) { /* lazy logits: greedy steps bring back the argmax only */
            const hz_backend *be = g.d->be;
            uint64_t b0 = atomic_load(&be->bytes[HZ_D2H][HZ_PURPOSE_ACTIVATION]);
            int32_t next = tok[N_STEPS];
            for (int i = 0; i < 10 && ok; i++) ok = hz_decode_step(s, next, &next) == HZ_OK;
            uint64_t b1 = atomic_load(&be->bytes[HZ_D2H][HZ_PURPOSE_ACTIVATION]);
            /* the argmax kernel stores the token in pinned memory itself where kernels can address it
             * (then nothing is copied), else a 4-byte copy follows each step */
            char *js = NULL;
            const int store = hz_session_stats_json(s, &js) == HZ_OK && strstr(js, "\"argmax_readback\":\"kernel store\"");
            hz_free(js);
            const uint64_t want = store ? 0u : 10u * 4u;
            if (!ok) FAILF("%s: decode: %s", arch, hz_last_error_message());
            else if (b1 - b0 != want)
                FAILF("%s: 10 greedy steps copied %llu activation bytes back, expected %llu (argmax %s)", arch,
                      (unsigned long long)(b1 - b0), (unsigned long long)want, store ? "stored by the kernel" : "only");
            else
                printf("%s: cuda:0 grouped full: 10 greedy steps copied %llu bytes back (argmax %s)\n", arch,
                       (unsigned long long)(b1 - b0), store ? "stored in pinned memory by the kernel" : "only");
        }
        g.s = keep;
        hz_session_destroy(s);
        unsetenv("HZ_GPU_ROUTE_KERNEL");
    }
    for (int md = 1; md < N_MODES && ok; md++) {
        if (memcmp(lg[0], lg[md], (size_t)(N_STEPS + 1) * V * sizeof(float)) != 0)
            FAILF("%s: %s and %s logits differ (max rel %.3e)", arch, modes[0].name, modes[md].name,
                  max_rel(lg[md], lg[0], (N_STEPS + 1) * V));
        else
            printf("%s: cuda:0 grouped full: %s and %s logits bit-identical over %d steps\n", arch, modes[0].name,
                   modes[md].name, N_STEPS + 1);
    }

    /* A sampling session fetches the logits itself; they equal a greedy session's at the same point. */
    if (ok) {
        static const int32_t prompt[4] = {5, 9, 33, 77};
        hz_session *gs = NULL, *ss = NULL;
        hz_sampler_options so;
        hz_sampler_options_init(&so);
        so.temperature = 0.8f;
        so.seed = 7;
        int32_t a = -1, b = -1;
        const float *la = NULL, *lb = NULL;
        int st = hz_session_create(g.m, NULL, &gs);
        if (!st) st = hz_session_create(g.m, NULL, &ss);
        if (!st) st = hz_session_set_sampler(ss, &so);
        if (!st) st = hz_prefill(gs, prompt, 4, &a);
        if (!st) st = hz_prefill(ss, prompt, 4, &b);
        if (!st) st = hz_decode_step(gs, 3, &a);
        if (!st) st = hz_decode_step(ss, 3, &b);
        if (!st) st = hz_session_logits(gs, &la, NULL);
        if (!st) st = hz_session_logits(ss, &lb, NULL);
        if (st)
            FAILF("%s: sampling session: %s", arch, hz_last_error_message());
        else if (b < 0 || (uint32_t)b >= V || memcmp(la, lb, (size_t)V * sizeof(float)) != 0)
            FAILF("%s: sampling session: token %d, logits %s the greedy session's", arch, (int)b,
                  memcmp(la, lb, (size_t)V * sizeof(float)) ? "differ from" : "equal");
        else
            printf("%s: cuda:0 sampling session: token %d, fetched logits equal the greedy session's\n", arch, (int)b);
        hz_session_destroy(gs);
        hz_session_destroy(ss);
    }
    for (int md = 0; md < N_MODES; md++) free(lg[md]);
    stack_close(&g);
}

/* The step queued ahead (forward_cuda.c): a greedy graph session queues the step at the next position
 * with the device's argmax as its token before returning. Against a session with it off
 * (HZ_GPU_SPECULATE=0), on the same model: a greedy chain with no logits read in between gives the same
 * tokens and, read at the end, the same logits; then, reading the logits after every run, a step with a
 * token other than the one returned (the step queued ahead is discarded), a prefill in the middle, a
 * reset: same tokens and bit-identical logits throughout. The stats say how many steps were adopted and
 * discarded. */
static uint64_t session_u64(hz_session *s, const char *key) {
    char *js = NULL;
    if (hz_session_stats_json(s, &js) != HZ_OK) return UINT64_MAX;
    uint64_t v = json_u64(js, key);
    hz_free(js);
    return v;
}

static void check_queued_ahead(const char *path, const char *arch) {
    stack g;
    if (stack_open(&g, path, "cuda:0", 0, "grouped")) return;
    const uint32_t V = g.vocab;
    hz_session *s[2] = {NULL, NULL}; /* 0: queued ahead (the default), 1: off */
    int st = hz_session_create(g.m, NULL, &s[0]);
    setenv("HZ_GPU_SPECULATE", "0", 1);
    if (!st) st = hz_session_create(g.m, NULL, &s[1]);
    unsetenv("HZ_GPU_SPECULATE");
    static const int32_t prompt[5] = {3, 14, 15, 92, 65}, extra[2] = {35, 89};
    int32_t next[2] = {0, 0};
    const float *lg[2] = {NULL, NULL};
    int ok = st == HZ_OK;
    for (int k = 0; k < 2 && ok; k++) ok = hz_prefill(s[k], prompt, 5, &next[k]) == HZ_OK;
    /* a greedy chain, nothing read in between (shorter under compute-sanitizer: racecheck runs every
     * kernel of every step slowly, and the kernels are those of the other checks) */
    const int n_chain = getenv("HZ_MODEL_GPU_QUICK") ? 6 : N_STEPS;
    int32_t chain[2][N_STEPS];
    for (int k = 0; k < 2 && ok; k++)
        for (int i = 0; i < n_chain && ok; i++) {
            ok = hz_decode_step(s[k], next[k], &next[k]) == HZ_OK;
            chain[k][i] = next[k];
        }
    for (int k = 0; k < 2 && ok; k++) ok = hz_session_logits(s[k], &lg[k], NULL) == HZ_OK;
    if (ok && (memcmp(chain[0], chain[1], (size_t)n_chain * sizeof chain[0][0]) ||
               memcmp(lg[0], lg[1], (size_t)V * sizeof(float))))
        FAILF("%s: queued ahead: a greedy chain of %d steps gives other tokens or logits than without", arch, n_chain);
    /* logits after every run; another token at step 4, a prefill at step 8, a reset at step 12 */
    float *keep = malloc((size_t)V * sizeof(float));
    for (int i = 0; i < 16 && ok && keep; i++) {
        for (int k = 0; k < 2 && ok; k++) {
            if (i == 4) ok = hz_decode_step(s[k], (int32_t)(((uint32_t)next[k] + 1u) % V), &next[k]) == HZ_OK;
            else if (i == 8) ok = hz_prefill(s[k], extra, 2, &next[k]) == HZ_OK;
            else if (i == 12) ok = hz_session_reset(s[k]) == HZ_OK && hz_prefill(s[k], prompt, 3, &next[k]) == HZ_OK;
            else ok = hz_decode_step(s[k], next[k], &next[k]) == HZ_OK;
            if (ok) ok = hz_session_logits(s[k], &lg[k], NULL) == HZ_OK;
            if (ok && k == 0) memcpy(keep, lg[0], (size_t)V * sizeof(float)); /* s[1]'s run comes next */
        }
        if (ok && (next[0] != next[1] || memcmp(keep, lg[1], (size_t)V * sizeof(float)) != 0)) {
            FAILF("%s: queued ahead: run %d gives token %d and %d, logits max rel %.3e", arch, i, (int)next[0],
                  (int)next[1], max_rel(keep, lg[1], V));
            ok = 0;
        }
    }
    if (!ok && st == HZ_OK) FAILF("%s: queued ahead: %s", arch, hz_last_error_message());
    else if (st) FAILF("%s: queued ahead: sessions: %s", arch, hz_last_error_message());
    const uint64_t adopted = session_u64(s[0], "steps_ahead_adopted"), dropped = session_u64(s[0], "steps_ahead_discarded");
    const uint64_t adopted_off = session_u64(s[1], "steps_ahead_adopted");
    /* The chain's first step runs eagerly and the second is the first graph step (the session's
     * graphs are captured then), so n_chain - 2 are adopted; then 4 before the other token, 3 before
     * the prefill, 2 after the step that follows it, 2 after the reset; the runs at 4, 8 and 12 each
     * discard one; reading the logits keeps the one queued ahead. */
    const uint64_t want = (uint64_t)n_chain - 2u + 4u + 3u + 2u + 2u;
    if (ok && (adopted != want || dropped != 3 || adopted_off != 0))
        FAILF("%s: queued ahead: %llu adopted, %llu discarded (expected %llu and 3), %llu adopted with it off", arch,
              (unsigned long long)adopted, (unsigned long long)dropped, (unsigned long long)want,
              (unsigned long long)adopted_off);
    else if (ok)
        printf("%s: cuda:0 step queued ahead: %llu adopted, %llu discarded; tokens and logits equal to a session "
               "without it\n", arch, (unsigned long long)adopted, (unsigned long long)dropped);
    free(keep);
    hz_session_destroy(s[0]); /* with a step queued ahead */
    hz_session_destroy(s[1]);
    stack_close(&g);
}

/* Another thread's lease that pins every spare row: it holds the current generation, then loads two
 * experts of layer 0 that were not resident (into the two free spare rows; the two it evicts stay
 * pinned by its hold), and lets go after hold_s seconds. */
typedef struct pinner {
    hz_cache *c;
    uint32_t experts; /* at most 64 */
    unsigned hold_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pinned; /* 1 pinned, -1 failed */
    char msg[256];
} pinner;

static void *pinner_main(void *arg) {
    pinner *p = arg;
    hz_generation *pin = NULL, *l = NULL;
    const void *rows[64];
    uint32_t want[2], n = 0;
    int st = hz_cache_hold(p->c, &pin);
    if (!st) st = hz_generation_layer_rows(pin, 0, rows);
    for (uint32_t e = 0; !st && e < p->experts && n < 2; e++)
        if (!rows[e]) want[n++] = e;
    if (!st && n < 2) st = HZ_ESTATE;
    if (!st) st = hz_generation_acquire(p->c, 0, want, 2, &l);
    if (!st) st = hz_generation_release(l, NULL);
    pthread_mutex_lock(&p->mu);
    p->pinned = st ? -1 : 1;
    if (st) snprintf(p->msg, sizeof p->msg, "%s: %s", hz_status_name(st), hz_last_error_message());
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (!st) sleep(p->hold_s);
    if (pin) hz_generation_release(pin, NULL);
    return NULL;
}

/* A lease of another thread held past a gate's 10 s (doc/api.md): the step whose miss needs those rows
 * fails with HZ_EDEVICE once the lease is released, and the session recovers: it goes on decoding from
 * there, and after a reset and the same prompt it decodes the tokens and logits of a fresh session of
 * the same model and cache. Before,
 * the failure could leave the device's table of rows behind the host's copy (the gate gave up before
 * the host's miss was served and never copied the layer's new rows), and the next steps failed or read
 * rows that were not leased. OLMoE only: one ~14 s wait. */
static void check_late_gate(const char *path, const char *arch) {
    stack g = {0};
    hz_cache_options co;
    hz_cache_options_init(&co);
    co.capacity = 4; /* of 8; spare rows: the top-k (2) */
    hz_model_options mo;
    hz_model_options_init(&mo);
    hz_model_info info;
    hz_model_info_init(&info);
    hz_session *fresh = NULL;
    int st = hz_host_backing_open(path, NULL, &g.b);
    if (!st) st = hz_device_open("cuda:0", &g.d);
    if (!st) st = hz_cache_create(g.b, g.d, &co, &g.c);
    if (!st) st = hz_model_create(g.b, g.d, g.c, &mo, &g.m);
    if (!st) st = hz_model_get_info(g.m, &info);
    if (!st) st = hz_session_create(g.m, NULL, &g.s);
    if (st) {
        FAILF("%s: late gate: setup: %s: %s", arch, hz_status_name(st), hz_last_error_message());
        stack_close(&g);
        return;
    }
    static const int32_t prompt[N_PROMPT] = {1, 17, 42, 99, 256, 3, 500, 7};
    int32_t next = 0;
    st = hz_prefill(g.s, prompt, N_PROMPT, &next);
    for (int i = 0; i < 3 && !st; i++) st = hz_decode_step(g.s, next, &next); /* gates armed */
    if (!st && info.experts > 64) st = HZ_EUNSUPPORTED;
    pinner p = {.c = g.c, .experts = info.experts, .hold_s = 14, .mu = PTHREAD_MUTEX_INITIALIZER,
                .cv = PTHREAD_COND_INITIALIZER};
    pthread_t t;
    int started = 0;
    if (!st) started = pthread_create(&t, NULL, pinner_main, &p) == 0;
    if (!st && !started) st = HZ_ESTATE;
    if (started) {
        pthread_mutex_lock(&p.mu);
        while (!p.pinned) pthread_cond_wait(&p.cv, &p.mu);
        pthread_mutex_unlock(&p.mu);
        if (p.pinned < 0) FAILF("%s: late gate: pinning: %s", arch, p.msg);
    }
    /* decode until a step misses: it waits for the pin, its gate gives up, and once the pin goes the
     * step fails */
    int failed = 0, steps = 0;
    const double t0 = hz_now_seconds();
    for (; !st && started && p.pinned > 0 && steps < 64 && !failed; steps++) {
        int r = hz_decode_step(g.s, next, &next);
        if (r) {
            failed = 1;
            if (r != HZ_EDEVICE || !strstr(hz_last_error_message(), "did not open that gate"))
                FAILF("%s: late gate: step %d failed with %s: %s (expected the late gate)", arch, steps,
                      hz_status_name(r), hz_last_error_message());
        }
    }
    const double waited = hz_now_seconds() - t0;
    if (started) pthread_join(t, NULL);
    if (!st && started && p.pinned > 0 && !failed)
        FAILF("%s: late gate: %d steps and none missed (the test needs a miss while the rows are pinned)", arch, steps);
    /* the session goes on from where it failed: every step must succeed (a layer whose new rows the
     * device's table never got makes a step wait for a host that thinks it a hit, or pass on a row
     * that is not leased: both fail the step) */
    int cont = 0;
    for (; !st && failed && cont < 48; cont++) {
        st = hz_decode_step(g.s, next, &next);
        if (st)
            FAILF("%s: late gate: step %d after the failed one: %s: %s", arch, cont, hz_status_name(st),
                  hz_last_error_message());
    }
    /* the same prompt and 24 greedy steps on the recovered session and on a fresh one */
    int32_t tok[2][N_STEPS];
    float *lg = malloc((size_t)2 * info.vocab_size * sizeof(float));
    if (!st) st = hz_session_create(g.m, NULL, &fresh);
    hz_session *ss[2] = {g.s, fresh};
    if (!st) st = hz_session_reset(g.s);
    for (int k = 0; k < 2 && !st && lg; k++) {
        st = hz_prefill(ss[k], prompt, N_PROMPT, &next);
        for (int i = 0; i < N_STEPS && !st; i++) {
            st = hz_decode_step(ss[k], next, &next);
            tok[k][i] = next;
        }
        const float *h = NULL;
        if (!st) st = hz_session_logits(ss[k], &h, NULL);
        if (!st) memcpy(lg + (size_t)k * info.vocab_size, h, (size_t)info.vocab_size * sizeof(float));
    }
    if (st && !g_failures)
        FAILF("%s: late gate: after the failed step: %s: %s", arch, hz_status_name(st), hz_last_error_message());
    else if (lg && (memcmp(tok[0], tok[1], sizeof tok[0]) ||
                    memcmp(lg, lg + info.vocab_size, (size_t)info.vocab_size * sizeof(float))))
        FAILF("%s: late gate: the recovered session decodes other tokens or logits than a fresh one", arch);
    else if (failed)
        printf("%s: cuda:0 a lease of another thread held past the gate: the step failed after %.1f s (%d steps); "
               "%d more steps went on from there, then after a reset the session decoded as a fresh one\n", arch,
               waited, steps, cont);
    free(lg);
    hz_session_destroy(fresh);
    stack_close(&g);
}

/* N_LONG teacher-forced decode steps on the cpu and on cuda:0 (full residency, graph), logits compared
 * at every step; `splits` overrides the attention's split count (0: default); `groups`: the attention's
 * group count by position (1) or one group everywhere (0). */
static void check_long_context(const char *path, const char *arch, uint32_t splits, int groups) {
    stack ref, g;
    if (stack_open(&ref, path, "cpu", 0, "reference")) return;
    if (stack_open(&g, path, "cuda:0", 0, "grouped")) {
        stack_close(&ref);
        return;
    }
    int st = hz_gpu_session_set_decode(g.s, 1, 1, splits);
    if (st) FAILF("%s: set_decode(splits %u): %s", arch, splits, hz_last_error_message());
    if (!st) st = hz_gpu_session_set_attention_groups(g.s, groups);
    if (st) FAILF("%s: set_attention_groups(%d): %s", arch, groups, hz_last_error_message());
    const uint32_t V = ref.vocab;
    const int n_long = getenv("HZ_MODEL_GPU_QUICK") ? 72 : N_LONG; /* under compute-sanitizer: 2 chunks */
    double worst = 0;
    int worst_step = -1, flips = 0;
    for (int t = 0; t < n_long && !st; t++) {
        const int32_t tok = (int32_t)(((uint32_t)t * 37u + 11u) % V);
        int32_t a = 0, b = 0;
        const float *lc = NULL, *lgp = NULL;
        st = hz_decode_step(ref.s, tok, &a);
        if (!st) st = hz_decode_step(g.s, tok, &b);
        if (!st) st = hz_session_logits(ref.s, &lc, NULL);
        if (!st) st = hz_session_logits(g.s, &lgp, NULL);
        if (st) {
            FAILF("%s long context step %d: %s", arch, t, hz_last_error_message());
            break;
        }
        double rel = max_rel(lgp, lc, V);
        if (!(rel <= worst)) {
            worst = rel;
            worst_step = t;
        }
        if (a != b) flips++;
    }
    char dp[64];
    uint64_t gsteps = decode_path(g.s, dp, sizeof dp);
    uint32_t used = splits;
    char *js = NULL;
    if (hz_session_stats_json(g.s, &js) == HZ_OK) {
        if (!used) used = (uint32_t)json_u64(js, "attention_splits");
        const char *want = groups ? "\"attention_groups\":\"by position\"" : "\"attention_groups\":\"one\"";
        if (!strstr(js, want)) FAILF("%s long context: the stats do not say %s: %s", arch, want, js);
        hz_free(js);
    } else {
        FAILF("%s long context: stats: %s", arch, hz_last_error_message());
    }
    if (!st) {
        if (!(worst <= GPU_REL_BOUND))
            FAILF("%s long context (%u splits): max|gpu - cpu| / max|cpu| = %.3e at step %d above %.1e", arch, used,
                  worst, worst_step, GPU_REL_BOUND);
        if (strcmp(dp, "graph") != 0 || gsteps != (uint64_t)n_long - 1u) /* the first step runs eagerly */
            FAILF("%s long context: decode path \"%s\", %llu graph steps of %d", arch, dp, (unsigned long long)gsteps,
                  n_long);
        printf("%s: cuda:0 long context %d positions, attention groups %s, %u splits (chunks of %u): max rel "
               "err %.3e (step %d), %d greedy picks differ (near ties allowed: logits within bound)\n",
               arch, n_long, groups ? "by position" : "one", used, HZ_DECODE_ATTN_CHUNK, worst, worst_step, flips);
    }
    stack_close(&g);
    stack_close(&ref);
}

/* Whether the comma-separated `list` holds the name [name, name + len). */
/* The lm_head screen (forward_cuda.c, lm_screen_setup): a model built with it and one without
 * (HZ_GPU_LM_SCREEN=0) run the same script: one sampled step right after the prompt (its eager step arms
 * the graph capture with the GEMV) and then greedy (one more eager step, then the capture with the
 * screen), a greedy chain without reading the logits, the logits read at its end, a switch to sampling
 * and back to greedy (the graphs are captured again each time), the logits read after every run there.
 * Tokens identical and logits bit-identical throughout; the screened session ends on its graph, with no
 * capture failure; the stats say which sessions screen, and the screen summed again at least one row
 * per greedy step and fewer than half of all rows. */
#define SCREEN_CHAIN 20
static int screen_script(stack *g, int32_t *tok, float *logits) {
    static const int32_t prompt[5] = {2, 40, 81, 7, 300};
    const uint32_t V = g->vocab;
    hz_session *s = NULL;
    hz_sampler_options so;
    hz_sampler_options_init(&so);
    int32_t next = 0, n = 0;
    const float *h = NULL;
    int st = hz_session_create(g->m, NULL, &s);
    if (!st) st = hz_prefill(s, prompt, 5, &next);
    so.temperature = 0.8f;
    so.seed = 5;
    if (!st) st = hz_session_set_sampler(s, &so);
    if (!st) st = hz_decode_step(s, next, &next);
    tok[n++] = next;
    so.temperature = 0.0f;
    if (!st) st = hz_session_set_sampler(s, &so);
    for (int i = 0; i < SCREEN_CHAIN && !st; i++) {
        st = hz_decode_step(s, next, &next);
        tok[n++] = next;
    }
    if (!st) st = hz_session_logits(s, &h, NULL);
    if (!st) memcpy(logits, h, (size_t)V * 4u);
    for (int phase = 0; phase < 3 && !st; phase++) {
        so.temperature = phase == 1 ? 0.8f : 0.0f;
        so.seed = 11;
        st = hz_session_set_sampler(s, &so);
        for (int i = 0; i < 6 && !st; i++) {
            st = hz_decode_step(s, next, &next);
            tok[n++] = next;
            if (!st) st = hz_session_logits(s, &h, NULL);
            if (!st) memcpy(logits + (size_t)(1 + phase * 6 + i) * V, h, (size_t)V * 4u);
        }
    }
    if (st) FAILF("screen script: %s: %s", hz_status_name(st), hz_last_error_message());
    g->s = s; /* closed by the caller */
    return st;
}

static void check_screen(const char *path, const char *arch) {
    stack ga, gb;
    setenv("HZ_GPU_LM_SCREEN", "0", 1);
    const int sa = stack_open(&ga, path, "cuda:0", 0, "grouped");
    unsetenv("HZ_GPU_LM_SCREEN");
    if (sa) return;
    if (stack_open(&gb, path, "cuda:0", 0, "grouped")) {
        stack_close(&ga);
        return;
    }
    const uint32_t V = ga.vocab, n_tok = SCREEN_CHAIN + 19, n_log = 1 + 18;
    int32_t ta[SCREEN_CHAIN + 19], tb[SCREEN_CHAIN + 19];
    float *la = malloc((size_t)n_log * V * 4u), *lb = malloc((size_t)n_log * V * 4u);
    hz_session *ka = ga.s, *kb = gb.s;
    if (la && lb && !screen_script(&ga, ta, la) && !screen_script(&gb, tb, lb)) {
        const uint64_t summed = session_u64(gb.s, "lm_head_rows_summed");
        char *ja = NULL, *jb = NULL, path_b[64];
        decode_path(gb.s, path_b, sizeof path_b);
        const int stats = hz_session_stats_json(ga.s, &ja) == HZ_OK && hz_session_stats_json(gb.s, &jb) == HZ_OK;
        /* greedy steps of the screened model: 20 + 6 + 6 (the sampled ones read every row) */
        const uint64_t greedy = SCREEN_CHAIN + 12;
        if (memcmp(ta, tb, sizeof ta) != 0)
            FAILF("%s: screen: tokens differ from the model without it", arch);
        else if (memcmp(la, lb, (size_t)n_log * V * 4u) != 0)
            FAILF("%s: screen: logits differ from the model without it (max rel %.3e)", arch,
                  max_rel(lb, la, n_log * V));
        else if (!stats || !strstr(ja, "\"lm_head_screen\":false") || !strstr(jb, "\"lm_head_screen\":true"))
            FAILF("%s: screen: stats do not say which model screens", arch);
        else if (strcmp(path_b, "graph") != 0 || !strstr(jb, "\"graph_fallback\":null"))
            FAILF("%s: screen: the screened session ends on decode path \"%s\" (a capture failed?)", arch, path_b);
        else if (summed != UINT64_MAX && (summed < greedy || summed * 2u >= greedy * V))
            FAILF("%s: screen: %llu rows summed again over %llu greedy steps of %u rows", arch,
                  (unsigned long long)summed, (unsigned long long)greedy, V);
        else
            printf("%s: cuda:0 lm_head screen: %u tokens and %u logit rows bit-identical to the lm_head GEMV "
                   "(greedy, sampling, greedy again); %.1f rows of %u summed again per greedy step\n",
                   arch, n_tok, n_log, summed == UINT64_MAX ? -1.0 : (double)summed / (double)greedy, V);
        hz_free(ja);
        hz_free(jb);
    } else if (!la || !lb) {
        FAILF("%s: screen: allocation", arch);
    }
    if (ga.s != ka) hz_session_destroy(ga.s);
    if (gb.s != kb) hz_session_destroy(gb.s);
    ga.s = ka;
    gb.s = kb;
    free(la);
    free(lb);
    stack_close(&ga);
    stack_close(&gb);
}

static int list_has(const char *list, const char *name, size_t len) {
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, len) == 0) return 1;
        p += n + (end ? 1u : 0u);
    }
    return 0;
}

#define MODEL_GPU_PARTS "run,modes,queued,long,late,screen"

/* Whether HZ_MODEL_GPU_PARTS selects `part` (unset or empty: every part). */
static int part_on(const char *part) {
    const char *v = getenv("HZ_MODEL_GPU_PARTS");
    return !v || !*v || list_has(v, part, strlen(part));
}

/* Every name in HZ_MODEL_GPU_PARTS is a part this test has: a misspelt name would otherwise run nothing
 * and pass. */
static int parts_valid(void) {
    const char *v = getenv("HZ_MODEL_GPU_PARTS");
    for (const char *p = v ? v : ""; *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (!list_has(MODEL_GPU_PARTS, p, len)) {
            printf("FAIL: HZ_MODEL_GPU_PARTS: unknown part '%.*s' (parts: " MODEL_GPU_PARTS ")\n", (int)len, p);
            return 0;
        }
        p += len + (end ? 1u : 0u);
    }
    return 1;
}

int main(void) {
    if (!parts_valid()) return 1;
    char *dir = NULL;
    char path[2][TINY_PATH_MAX];
    if (tiny_model_pair(&dir, path)) {
        printf("FAIL: tiny models: %s\n", hz_last_error_message());
        return 1;
    }
    printf("model_gpu: bound max|gpu - cpu| / max|cpu| <= %.1e per step, greedy tokens identical\n", GPU_REL_BOUND);
    if (part_on("run")) {
        run_arch(path[0], "olmoe");
        run_arch(path[1], "qwen2moe");
    }
    if (part_on("modes")) {
        check_decode_modes(path[0], "olmoe");
        check_decode_modes(path[1], "qwen2moe");
    }
    if (part_on("screen")) {
        check_screen(path[0], "olmoe");
        check_screen(path[1], "qwen2moe");
    }
    if (part_on("queued")) {
        check_queued_ahead(path[0], "olmoe");
        check_queued_ahead(path[1], "qwen2moe");
    }
    /* Not under HZ_MODEL_GPU_QUICK (compute-sanitizer): the pin must outlast the gate's 10 s from the
     * step's start, which a sanitizer's slowed steps would make a matter of luck. */
    if (part_on("late") && !getenv("HZ_MODEL_GPU_QUICK")) check_late_gate(path[0], "olmoe");
    if (part_on("long"))
        for (int a = 0; a < 2; a++) {
            /* Quick (72 positions, two chunks): one group keeps both chunks in one block at any split
             * count, so the 1- and 3-split runs would repeat the default one. */
            static const uint32_t splits[3] = {0, 1, 3};
            const int n_splits = getenv("HZ_MODEL_GPU_QUICK") ? 1 : 3;
            check_long_context(path[a], a ? "qwen2moe" : "olmoe", 0, 1);
            for (int k = 0; k < n_splits; k++) check_long_context(path[a], a ? "qwen2moe" : "olmoe", splits[k], 0);
        }
    tiny_rmdir(dir);
    free(dir);
    if (g_failures) {
        printf("model_gpu: %d failure(s)\n", g_failures);
        return 1;
    }
    printf("model_gpu: OK\n");
    return 0;
}
