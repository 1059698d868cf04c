/* W4A16 routed-expert executors on CUDA: the C-callable launch interface shared by the scalar and
 * grouped executors (cuda/w4a16_scalar.cu, cuda/w4a16_grouped.cu).
 *
 * This header is plain C (it is included from C code and from .cu files): no CUDA types appear in it;
 * the stream is a `void *` holding a cudaStream_t (NULL = the legacy default stream).
 *
 * One call applies the routed experts of ONE token (batch-1 decode) to its FP16 hidden state x:
 *   gate_i, up_i = FP32 dot products of the expert's gate / up rows with x
 *   a_i          = fp16_round(silu(gate_i) * up_i)     (silu(g) = g / (1 + expf(-g)), FP32)
 *   y_e[j]       = FP32 dot product of down row j with a (a_i = 0 for the padded K positions)
 *   s_j          = acc_j (or 0) + w_0 * y_0[j] + w_1 * y_1[j] + ...   in FP32, experts in the order given
 * then acc_j = s_j (when acc is given) and y_j = fp16_round(s_j) (when y is given). The weight of a
 * code c with block scale s is (float)(c - 8) * (float)s, as in format/qpack.h. The order of the
 * summation inside one dot product is each kernel's own (checks use a tolerance); the order of the
 * expert sum is the caller's, as lib/exec/exec.h requires.
 *
 * The intermediate a lives at the start of `scratch` as n rows of layout->down.kp FP16 values (the
 * positions from inter to kp are written as zeros), so tests can check it and the down pass can read
 * whole 16-byte chunks without bounds checks.
 *
 * Threading: the launch functions only enqueue work on `stream`; they may be called from any thread
 * holding the CUDA device current. Errors: HZ_EINVAL (bad arguments), HZ_EUNSUPPORTED (a shape the
 * kernels were not built for), HZ_EDEVICE (a CUDA call failed; the message names it).
 */
#ifndef HZ_CUDA_W4A16_CUH
#define HZ_CUDA_W4A16_CUH

#ifdef __cplusplus
/* The C headers below include <math.h>; pull the C++-aware versions in first, outside extern "C". */
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdarg>
#include <cstddef>
extern "C" {
#endif

#include <stdint.h>

#include "format/qpack.h"

/* Experts per call whose blob addresses travel inside the kernel parameters. */
#define HZ_W4A16_MAX_EXPERTS 32

/* hz_w4a16_args.flags */
#define HZ_W4A16_PDL 0x1u /* grouped: launch the down pass with programmatic dependent launch, so its
                             weight loads overlap the tail of the gate/up pass (sm_90) */
#define HZ_W4A16_CUDA_CORES 0x2u /* grouped: expand and accumulate on the FP32 CUDA cores instead of the
                                    tensor cores (a second, independent implementation; slower) */
#define HZ_W4A16_NO_BULK 0x4u /* grouped, tensor cores: stream codes through registers instead of the
                                 sm_90 bulk-copy path (w4a16_bulk.cu), which is otherwise used wherever
                                 the device and shape allow it */
#define HZ_W4A16_TWO_PASS 0x8u /* grouped, bulk path: launch gate_up and down as two kernels instead of
                                  one cooperative kernel (w4a16_bulk.cu) */

typedef struct hz_w4a16_args {
    const hz_expert_layout *layout; /* host pointer: the blob layout of every expert of the call */
    uint32_t n;                     /* experts, 1 .. HZ_W4A16_MAX_EXPERTS */
    /* Blob addresses (device memory, 16-byte aligned): either a HOST array of n device pointers
     * (copied into the kernel parameters at launch) or, when that is NULL, a DEVICE array of n
     * device pointers (read by the kernels, so it may be written by earlier device work). */
    const void *const *blobs;
    const void *const *blobs_dev;
    const float *weights; /* device FP32 [n] routing weights */
    const void *x;        /* device FP16 [hidden], 16-byte aligned */
    void *y;              /* device FP16 [hidden] output, or NULL */
    float *acc;           /* device FP32 [hidden] accumulators (in/out), or NULL */
    void *scratch;        /* device scratch, 256-byte aligned, at least *_scratch_bytes() */
    uint64_t scratch_bytes;
    uint32_t flags; /* HZ_W4A16_* */
    /* Optional, with blobs_dev: two device flags and the device word they must both equal. The
     * fused kernel (w4a16_bulk.cu), launched with programmatic dependent launch while the grid before
     * it still runs, then waits for these (written with release stores once blobs_dev, weights, x and
     * acc are) instead of for that whole grid, and for the grid itself only before its down pass.
     * Every other kernel ignores them: it waits for the grid before it, which sets them. */
    const uint32_t *ready;
    const uint32_t *ready_epoch;
    /* Optional (both or neither, with acc; the two-pass bulk down kernel only: on any other path, which
     * hz_w4a16_grouped_hands_h tells in advance, HZ_EUNSUPPORTED before anything is queued): device
     * FP16 [hidden]. Once acc[j] is final, h_out[j] = fp16(h_in[j] + fp16(acc[j])),
     * the residual add the next layer's RESNORM input would otherwise make from h_in and acc itself
     * (hz_dgemv_args: h with acc, no shared expert), so that it reads h_out alone. h_in is read
     * with acc, after the sums; h_out may not alias h_in. */
    const void *h_in;
    void *h_out;
} hz_w4a16_args;

/* Scratch each executor needs for n experts of `layout`. */
uint64_t hz_w4a16_scalar_scratch_bytes(const hz_expert_layout *layout, uint32_t n);
uint64_t hz_w4a16_grouped_scratch_bytes(const hz_expert_layout *layout, uint32_t n);

/* Validates args for either executor (used by both before they launch). */
int hz_w4a16_args_check(const hz_w4a16_args *args, uint64_t scratch_needed, const char *who);

#ifdef __cplusplus
}
#endif

#endif
