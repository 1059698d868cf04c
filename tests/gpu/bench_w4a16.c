/* Benchmark of the W4A16 routed-expert executors at batch 1 (not a test; run by scripts/gpu-check).
 *
 * For each model shape a pool of expert blobs as large as the model's routed experts (OLMoE: 64
 * experts x 16 layers, ~3.3 GB; Qwen1.5-MoE: 60 x 24, ~6.6 GB) is filled with random codes and valid
 * random scales (never zeros). Each timed call runs one layer: a fresh random choice of the routed
 * experts of the next layer in turn, so consecutive calls never find their codes in the 60 MB L2.
 *
 * Timing: CUDA events after a warm-up, medians over >= 200 repeats.
 *  - graph: 16 consecutive layers captured once as a CUDA graph, replayed; time per replay / 16.
 *    This is how a decode step runs (no host launch cost between layers).
 *  - stream: the same 16 layers launched on the stream between two events; includes host launch cost
 *    when the host is slower than the GPU.
 * The effective bandwidth counts the bytes of the routed blobs (all three projections and scales);
 * the reference ceiling is a device-to-device cudaMemcpy measured in the same run (bytes read +
 * written / time). "grouped" is the tensor-core expansion, "grouped-cc" the CUDA-core one.
 * Usage: bench_w4a16 [repeats [shape]]   (shape: olmoe or qwen; default both); HZ_BENCH_POOL_EXPERTS=N
 * shrinks the pool to N experts per layer; HZ_BENCH_EXECUTORS=a,b runs only the executors of those names
 * (as printed, e.g. grouped+pdl,read-ceiling); HZ_BENCH_READ_PDL_BLOCKS=1..4 sets the read-ceiling+pdl
 * row's blocks per SM (default 2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/core.h"
#include "format/qpack.h"
#include "read_ceiling.cuh"
#include "w4a16_grouped.cuh"
#include "w4a16_scalar.cuh"

#define CK(call)                                                                                               \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));             \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

enum { kBatch = 16, kWarm = 10 };

static uint64_t g_rng = 0xbe7cbe7cull;
static uint64_t rng_u64(void) {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
static float median(float *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_f);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

typedef enum {
    EX_SCALAR,
    EX_GROUPED,
    EX_GROUPED_PDL,
    EX_GATE_UP,
    EX_DOWN,
    EX_CC_PDL,
    EX_CC_GATE_UP,
    EX_CC_DOWN,
    EX_REG_PDL,
    EX_REG_GATE_UP,
    EX_REG_DOWN,
    EX_2P_PDL,
    EX_READ_ALL,
    EX_READ_GU,
    EX_READ_DN,
    EX_READ_PDL,
    EX_COUNT
} executor;
/* "grouped" is the default (the sm_90 bulk-copy path where it applies), "-reg" the register-streaming
 * tensor-core kernels, "-cc" the CUDA-core ones. */
static const char *const kExName[EX_COUNT] = {"scalar",          "grouped",         "grouped+pdl",    "grouped:gate_up",
                                              "grouped:down",    "grouped-cc+pdl",  "grouped-cc:g_u", "grouped-cc:down",
                                              "grouped-reg+pdl", "grouped-reg:g_u", "grouped-reg:down",
                                              "grouped-2p+pdl",  "read-ceiling",    "read:g_u",
                                              "read:down",       "read-ceiling+pdl"};

/* The read-ceiling rows: the same blobs' bytes read by a plain streaming kernel (read_ceiling.cu). */
static uint32_t *g_sink;
static int g_sms;

static int launch_read(const hz_w4a16_args *a, uint64_t offset, uint64_t bytes, int pdl_blocks, cudaStream_t s) {
    const void *p[HZ_W4A16_MAX_EXPERTS];
    for (uint32_t e = 0; e < a->n; e++) p[e] = (const uint8_t *)a->blobs[e] + offset;
    return hz_test_launch_read(p, a->n, bytes, g_sink, g_sms, pdl_blocks, s);
}

/* The read-ceiling+pdl row's blocks per SM: HZ_BENCH_READ_PDL_BLOCKS (1 to 4), default 2, the fastest
 * on an H200 (OLMoE layer 7.67 us against 8.21 with 1 and 8.59 with 4; doc/benchmarks.md, twenty-ninth
 * round). */
static int read_pdl_blocks(void) {
    static int blocks; /* read once: the stream rows time the host's launches too */
    if (!blocks) {
        const char *v = getenv("HZ_BENCH_READ_PDL_BLOCKS");
        const int b = v ? atoi(v) : 2;
        blocks = b >= 1 && b <= 4 ? b : 2;
    }
    return blocks;
}

/* HZ_BENCH_EXECUTORS: a comma-separated list of executor names to run (all when unset). */
static int executor_selected(const char *name) {
    const char *list = getenv("HZ_BENCH_EXECUTORS");
    if (!list || !*list) return 1;
    const size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

typedef struct shape {
    const char *name;
    uint32_t hidden, inter, experts, layers, n;
} shape;

typedef struct result {
    const char *shape, *ex;
    float us_graph, us_stream;
    double bytes;
} result;

static result g_res[64];
static int g_nres;

static int launch(executor ex, hz_w4a16_args *a, cudaStream_t s) {
    switch (ex) {
    case EX_SCALAR: return hz_w4a16_scalar_launch(a, s);
    case EX_GROUPED: a->flags = 0; return hz_w4a16_grouped_launch(a, s);
    case EX_GROUPED_PDL: a->flags = HZ_W4A16_PDL; return hz_w4a16_grouped_launch(a, s);
    case EX_GATE_UP: a->flags = 0; return hz_w4a16_grouped_gate_up_launch(a, s);
    case EX_DOWN: a->flags = 0; return hz_w4a16_grouped_down_launch(a, s);
    case EX_CC_PDL: a->flags = HZ_W4A16_PDL | HZ_W4A16_CUDA_CORES; return hz_w4a16_grouped_launch(a, s);
    case EX_CC_GATE_UP: a->flags = HZ_W4A16_CUDA_CORES; return hz_w4a16_grouped_gate_up_launch(a, s);
    case EX_CC_DOWN: a->flags = HZ_W4A16_CUDA_CORES; return hz_w4a16_grouped_down_launch(a, s);
    case EX_REG_PDL: a->flags = HZ_W4A16_PDL | HZ_W4A16_NO_BULK; return hz_w4a16_grouped_launch(a, s);
    case EX_REG_GATE_UP: a->flags = HZ_W4A16_NO_BULK; return hz_w4a16_grouped_gate_up_launch(a, s);
    case EX_REG_DOWN: a->flags = HZ_W4A16_NO_BULK; return hz_w4a16_grouped_down_launch(a, s);
    case EX_2P_PDL: a->flags = HZ_W4A16_PDL | HZ_W4A16_TWO_PASS; return hz_w4a16_grouped_launch(a, s);
    case EX_READ_ALL: return launch_read(a, 0, a->layout->blob_bytes, 0, s);
    case EX_READ_GU: return launch_read(a, 0, a->layout->down_q, 0, s);
    case EX_READ_DN: return launch_read(a, a->layout->down_q, a->layout->blob_bytes - a->layout->down_q, 0, s);
    case EX_READ_PDL: return launch_read(a, 0, a->layout->blob_bytes, read_pdl_blocks(), s);
    default: return -1;
    }
}

static float memcpy_gbps(int repeats) {
    const size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 0x3c, bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *t = malloc(sizeof(float) * (size_t)repeats);
    for (int r = -3; r < repeats; r++) {
        CK(cudaEventRecord(e0, 0));
        CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        if (r >= 0) CK(cudaEventElapsedTime(&t[r], e0, e1));
    }
    float ms = median(t, repeats);
    free(t);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(a));
    CK(cudaFree(b));
    return (float)(2.0 * bytes / (ms * 1e-3) / 1e9);
}

static void bench_shape(const shape *sh, int repeats) {
    hz_expert_layout l;
    hz_expert_layout_init(&l, sh->hidden, sh->inter);
    const uint64_t bb = l.blob_bytes, nblob = (uint64_t)sh->experts * sh->layers;
    printf("shape %s: hidden %u inter %u, %u of %u experts, %u layers, blob %.3f MB, pool %.2f GB\n", sh->name,
           sh->hidden, sh->inter, sh->n, sh->experts, sh->layers, bb / 1e6, nblob * bb / 1e9);

    /* The first `experts` blobs get random content on the host; the other layers are device copies of
     * them at their own addresses (content does not change the timing; addresses defeat the L2). */
    uint8_t *host = malloc((size_t)(sh->experts * bb));
    for (uint64_t e = 0; e < sh->experts; e++) {
        uint8_t *b = host + e * bb;
        for (uint64_t i = 0; i < bb; i += 8) {
            uint64_t r = rng_u64();
            memcpy(b + i, &r, bb - i < 8 ? bb - i : 8);
        }
        const uint64_t sp[3][2] = {{l.gate_s, l.gate.s_bytes}, {l.up_s, l.up.s_bytes}, {l.down_s, l.down.s_bytes}};
        for (int p = 0; p < 3; p++) {
            hz_f16 *s = (hz_f16 *)(void *)(b + sp[p][0]);
            for (uint64_t i = 0; i < sp[p][1] / 2; i++)
                s[i] = hz_f32_to_f16((float)(0.002 + 0.02 * (double)(rng_u64() >> 40) / 16777216.0));
        }
    }
    uint8_t *pool = NULL;
    CK(cudaMalloc((void **)&pool, nblob * bb));
    CK(cudaMemcpy(pool, host, sh->experts * bb, cudaMemcpyHostToDevice));
    for (uint32_t L = 1; L < sh->layers; L++)
        CK(cudaMemcpy(pool + (uint64_t)L * sh->experts * bb, pool, sh->experts * bb, cudaMemcpyDeviceToDevice));
    free(host);

    const uint32_t n = sh->n;
    uint64_t scratch_bytes = hz_w4a16_scalar_scratch_bytes(&l, n);
    void *scratch = NULL, *x = NULL, *y = NULL, *w = NULL;
    CK(cudaMalloc(&scratch, scratch_bytes));
    CK(cudaMalloc(&x, 2u * sh->hidden));
    CK(cudaMalloc(&y, 2u * sh->hidden));
    CK(cudaMalloc(&w, 4u * n));
    {
        hz_f16 *hx = malloc(2u * sh->hidden);
        for (uint32_t i = 0; i < sh->hidden; i++) hx[i] = hz_f32_to_f16((float)((double)(rng_u64() >> 40) / 8388608.0 - 1.0));
        float hw[HZ_W4A16_MAX_EXPERTS];
        for (uint32_t e = 0; e < n; e++) hw[e] = 1.0f / (float)n;
        CK(cudaMemcpy(x, hx, 2u * sh->hidden, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(w, hw, 4u * n, cudaMemcpyHostToDevice));
        CK(cudaMemset(scratch, 0, scratch_bytes));
        free(hx);
    }

    /* kBatch layers' routing, redrawn for every repeat of the stream mode. */
    const void *ptrs[kBatch][HZ_W4A16_MAX_EXPERTS];
    uint32_t layer_cursor = 0;
#define DRAW_BATCH()                                                                                           \
    for (int b = 0; b < kBatch; b++) {                                                                         \
        uint32_t L = layer_cursor++ % sh->layers, ids[HZ_W4A16_MAX_EXPERTS];                                   \
        for (uint32_t e = 0; e < n; e++) {                                                                     \
            for (;;) {                                                                                         \
                uint32_t c = (uint32_t)(rng_u64() % sh->experts), dup = 0;                                     \
                for (uint32_t f = 0; f < e; f++) dup |= ids[f] == c;                                           \
                if (!dup) {                                                                                    \
                    ids[e] = c;                                                                                \
                    break;                                                                                     \
                }                                                                                              \
            }                                                                                                  \
            ptrs[b][e] = pool + ((uint64_t)L * sh->experts + ids[e]) * bb;                                     \
        }                                                                                                      \
    }

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *tg = malloc(sizeof(float) * (size_t)repeats), *ts = malloc(sizeof(float) * (size_t)repeats);
    const double bytes = (double)n * (double)bb;

    for (int ex = 0; ex < EX_COUNT; ex++) {
        if (!executor_selected(kExName[ex])) continue;
        hz_w4a16_args a;
        memset(&a, 0, sizeof a);
        a.layout = &l;
        a.n = n;
        a.weights = w;
        a.x = x;
        a.y = y;
        a.scratch = scratch;
        a.scratch_bytes = scratch_bytes;
        double part_bytes = bytes;
        if (ex == EX_GATE_UP || ex == EX_CC_GATE_UP || ex == EX_REG_GATE_UP || ex == EX_READ_GU) part_bytes = (double)n * (double)l.down_q;
        if (ex == EX_DOWN || ex == EX_CC_DOWN || ex == EX_REG_DOWN || ex == EX_READ_DN) part_bytes = (double)n * (double)(bb - l.down_q);

        /* stream mode */
        for (int r = -kWarm; r < repeats; r++) {
            DRAW_BATCH();
            CK(cudaEventRecord(e0, s));
            for (int b = 0; b < kBatch; b++) {
                a.blobs = ptrs[b];
                if (launch((executor)ex, &a, s) != 0) {
                    fprintf(stderr, "launch failed: %s\n", hz_last_error_message());
                    exit(1);
                }
            }
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            if (r >= 0) CK(cudaEventElapsedTime(&ts[r], e0, e1));
        }
        /* graph mode: a few graphs of kBatch layers each (different routings), replayed in turn. A
         * capture that fails is reported and leaves the graph column empty rather than ending the run. */
        enum { kGraphs = 4 };
        cudaGraphExec_t ge[kGraphs];
        int graphs = 0, graph_ok = 1;
        for (int g = 0; g < kGraphs && graph_ok; g++) {
            cudaGraph_t graph = NULL;
            DRAW_BATCH();
            if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
                graph_ok = 0;
                break;
            }
            for (int b = 0; b < kBatch; b++) {
                a.blobs = ptrs[b];
                if (launch((executor)ex, &a, s) != 0) {
                    fprintf(stderr, "  capture launch failed: %s\n", hz_last_error_message());
                    graph_ok = 0;
                    break;
                }
            }
            cudaError_t ce = cudaStreamEndCapture(s, &graph);
            if (ce == cudaSuccess && graph_ok) ce = cudaGraphInstantiate(&ge[g], graph, 0);
            if (graph) cudaGraphDestroy(graph);
            if (ce != cudaSuccess || !graph_ok) {
                fprintf(stderr, "  graph capture of %s failed: %s\n", kExName[ex], cudaGetErrorString(ce));
                (void)cudaGetLastError();
                graph_ok = 0;
                break;
            }
            graphs++;
        }
        for (int r = -kWarm; graph_ok && r < repeats; r++) {
            CK(cudaEventRecord(e0, s));
            CK(cudaGraphLaunch(ge[(r + kWarm) % kGraphs], s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            if (r >= 0) CK(cudaEventElapsedTime(&tg[r], e0, e1));
        }
        for (int g = 0; g < graphs; g++) CK(cudaGraphExecDestroy(ge[g]));

        result *res = &g_res[g_nres++];
        res->shape = sh->name;
        res->ex = kExName[ex];
        res->us_graph = graph_ok ? median(tg, repeats) * 1000.0f / kBatch : NAN;
        res->us_stream = median(ts, repeats) * 1000.0f / kBatch;
        res->bytes = part_bytes;
        printf("  %-16s graph %8.2f us/layer (%7.1f GB/s)   stream %8.2f us/layer\n", kExName[ex], res->us_graph,
               part_bytes / (res->us_graph * 1e-6) / 1e9, res->us_stream);
    }
#undef DRAW_BATCH
    free(tg);
    free(ts);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(pool));
    CK(cudaFree(scratch));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(w));
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 300;
    if (repeats < 10) repeats = 10;
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %.0f MB, %.1f GiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6,
           prop.totalGlobalMem / 1073741824.0);
    g_sms = prop.multiProcessorCount;
    CK(cudaMalloc((void **)&g_sink, 16u * (size_t)g_sms));
    const float copy = memcpy_gbps(50);
    printf("device-to-device cudaMemcpy (1 GiB, read + write): %.0f GB/s\n", copy);

    const shape shapes[] = {
        {"olmoe", 2048, 1024, 64, 16, 8},
        {"qwen", 2048, 1408, 60, 24, 4},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (argc <= 2 || strcmp(argv[2], shapes[i].name) == 0) {
            /* HZ_BENCH_POOL_EXPERTS=N: a pool of N experts per layer instead of the model's (N >= the
             * routed count): how much the layer time depends on how much memory the experts span. */
            shape sh = shapes[i];
            const char *pe = getenv("HZ_BENCH_POOL_EXPERTS");
            if (pe && atoi(pe) > 0) {
                const uint32_t want = (uint32_t)atoi(pe);
                sh.experts = want < sh.n ? sh.n : (want > sh.experts ? sh.experts : want);
            }
            bench_shape(&sh, repeats);
        }

    printf("\n%-6s %-16s %10s %10s %10s %8s %12s\n", "shape", "executor", "us(graph)", "us(stream)", "GB/s", "%copy",
           "MB/layer");
    for (int i = 0; i < g_nres; i++) {
        const result *r = &g_res[i];
        double gbps = r->bytes / (r->us_graph * 1e-6) / 1e9;
        printf("%-6s %-16s %10.2f %10.2f %10.1f %7.1f%% %12.2f\n", r->shape, r->ex, r->us_graph, r->us_stream, gbps,
               100.0 * gbps / copy, r->bytes / 1e6);
    }
    printf("copy ceiling: %.0f GB/s (D2D cudaMemcpy, read + write). llama.cpp MUL_MAT_ID Q4_0 reference for the "
           "OLMoE layer on this H200 (DEVICE.md): 8.28 + 8.28 + 8.92 = 25.48 us\n",
           copy);
    return 0;
}
