/* What a kernel launch costs when its function is not the one the launches before it ran (benchmark, GPU).
 *
 *   bench_fn_switch [launches]
 *
 * A decode step is a chain of kernels launched with programmatic dependent launch; on the H200 the same
 * decode GEMV code launched as a second function made the OLMoE step 5% slower (doc/benchmarks.md,
 * thirty-first round). This isolates that: six functions of one size (fn_switch.cu) launched in a CUDA
 * graph as one function over and over, two in turn, or six in turn, each with and without a 96 MiB
 * read between launches (more than L2 holds, as the weights a step streams). The figure is the graph's
 * time per function launch (with the reads: per function launch and its read); what a function that
 * comes back cold costs is the difference to "one function" at the same setting. Exit status 0 when
 * every graph ran.
 *
 * Measured on the H200 (2026-12-01, thirty-second round): within 0.04 us of "one function" in every
 * pattern, with and without the reads. The GEMV copy's 5% was its shared-memory carveout instead (the
 * decode launcher sets the preference once per parameter list, and the copy shared the generic
 * kernel's). */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "fn_switch.cuh"

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            printf("FAIL: %s: %s\n", #x, cudaGetErrorString(e_));                                            \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)

/* us per launch of the captured sequence (median of 5 replays after one to warm up), or < 0 on failure */
static double time_seq(const int *seq, int len, int count, const void *buf, unsigned long long bytes, uint32_t *sink,
                       int sms, cudaStream_t s) {
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaEvent_t a = NULL, b = NULL;
    float ms[5];
    int ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
        const int le = hz_test_fn_switch(seq, len, count, buf, bytes, sink, sms, s);
        ok = cudaStreamEndCapture(s, &g) == cudaSuccess && le == 0;
    }
    ok = ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess && cudaEventCreate(&a) == cudaSuccess &&
         cudaEventCreate(&b) == cudaSuccess && cudaGraphLaunch(ge, s) == cudaSuccess;
    for (int r = 0; r < 5 && ok; r++)
        ok = cudaEventRecord(a, s) == cudaSuccess && cudaGraphLaunch(ge, s) == cudaSuccess &&
             cudaEventRecord(b, s) == cudaSuccess && cudaEventSynchronize(b) == cudaSuccess &&
             cudaEventElapsedTime(&ms[r], a, b) == cudaSuccess;
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    if (!ok) return -1;
    for (int i = 0; i < 5; i++) /* median */
        for (int j = i + 1; j < 5; j++)
            if (ms[j] < ms[i]) {
                float t = ms[i];
                ms[i] = ms[j];
                ms[j] = t;
            }
    return (double)ms[2] * 1e3 / count;
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 600;
    if (count < 12) count = 12;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const unsigned long long bytes = 96ull << 20;
    void *buf = NULL;
    uint32_t *sink = NULL;
    cudaStream_t s;
    CK(cudaMalloc(&buf, bytes));
    CK(cudaMemset(buf, 1, bytes));
    CK(cudaMalloc((void **)&sink, 16u * (size_t)sms));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static const int one[1] = {0}, two[2] = {0, 1}, six[6] = {0, 1, 2, 3, 4, 5};
    static const struct {
        const char *name;
        const int *seq;
        int len;
    } seqs[3] = {{"one function", one, 1}, {"two in turn", two, 2}, {"six in turn", six, 6}};
    printf("fn_switch: %d SMs, %d launches of 4 x %d blocks, 96 MiB read between launches or not\n", sms, count, sms);
    int bad = 0;
    double plain[3], with[3];
    for (int k = 0; k < 3 && !bad; k++) {
        plain[k] = time_seq(seqs[k].seq, seqs[k].len, count, buf, 0, sink, sms, s);
        with[k] = time_seq(seqs[k].seq, seqs[k].len, count, buf, bytes, sink, sms, s);
        bad = plain[k] < 0 || with[k] < 0;
    }
    if (bad) {
        printf("FAIL: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    for (int k = 0; k < 3; k++)
        printf("  %-13s %8.3f us per launch | with the reads %8.3f us per launch + read (%+.3f us against one "
               "function)\n",
               seqs[k].name, plain[k], with[k], with[k] - with[0]);
    printf("  (no reads: %+.3f us two in turn, %+.3f us six in turn against one function)\n", plain[1] - plain[0],
           plain[2] - plain[0]);
    cudaFree(buf);
    cudaFree(sink);
    cudaStreamDestroy(s);
    printf("bench_fn_switch: OK\n");
    return 0;
}
