/* The `grouped` W4A16 executor: two launches per token and layer, whatever the number of experts.
 *   gate_up: every (expert, row) of gate and up, fused with SiLU-and-multiply; writes the FP16
 *            intermediate [n x kp_inter] at the start of scratch.
 *   down:    every output row j for every expert, fused with the routing-weighted sum; each block owns
 *            a range of output rows and adds the experts in the given order (deterministic, no atomics).
 * Codes are read with 16-byte coalesced loads (one uint4 = one 32-value chunk of the nibble layout)
 * and expanded only in registers; products are exact and sums FP32, on the tensor cores (default) or
 * on the CUDA cores (HZ_W4A16_CUDA_CORES). C-callable; see w4a16.cuh for the arguments and the
 * numerics. Accumulation dtype to declare: f32. */
#ifndef HZ_CUDA_W4A16_GROUPED_CUH
#define HZ_CUDA_W4A16_GROUPED_CUH

#include "w4a16.cuh"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues both passes on `stream` (a cudaStream_t). */
int hz_w4a16_grouped_launch(const hz_w4a16_args *args, void *stream);

/* The two passes on their own, for benchmarks that time them apart. gate_up reads x and writes the
 * intermediate; down reads the intermediate and writes y / acc. */
int hz_w4a16_grouped_gate_up_launch(const hz_w4a16_args *args, void *stream);
int hz_w4a16_grouped_down_launch(const hz_w4a16_args *args, void *stream);

/* 1 when a launch of n experts of `layout` with `flags` takes the two-pass bulk down kernel, the only
 * one that honours hz_w4a16_args.h_out; 0 when it would not; a negative status when the device query
 * failed (the last-error message says why). hz_w4a16_grouped_launch asks the same before it launches
 * anything, so a refused h_out leaves no pass half done. */
int hz_w4a16_grouped_hands_h(const hz_expert_layout *layout, uint32_t n, uint32_t flags);

#ifdef __cplusplus
}
#endif

#endif
