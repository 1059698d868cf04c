/* lib/exec: the W4A16 executors on CUDA ("scalar" and "grouped"), wrapping the launch API of
 * cuda/w4a16.cuh. Built only with CUDA (hz_have_cuda).
 *
 * Both accumulate in FP32 (accum_dtype "f32"): every call adds its experts into the caller's FP32
 * device accumulators in the order given (ascending ids), exactly the exec.h contract; the caller
 * rounds to FP16 once the layer's last group is in. A group of more than HZ_W4A16_MAX_EXPERTS experts
 * is split into consecutive launches over the same accumulators, which keeps the order.
 *
 * Work is only enqueued (on hz_moe_call.queue): the rows must stay valid until the queue passes the
 * point after the call, which the model marks with an event it hands to hz_generation_release. */
#ifndef HZ_EXEC_CUDA_H
#define HZ_EXEC_CUDA_H

#include <stdint.h>

#include "exec.h"

int hz_exec_cuda_create(const char *name, const hz_expert_layout *layout, hz_executor **out);

/* The grouped executor's kernels on sm_90: on (two_pass) gate_up and down as two kernels fed by bulk
 * copies, off (the default) one cooperative kernel that holds each multiprocessor's share of the
 * layer in shared memory. The fused kernel is faster alone; the two-pass down kernel holds 84 KB of
 * shared memory per block instead of 221 KB, which leaves room on the multiprocessors for the next
 * kernel's blocks (see hz_gpu_model_create for who chooses). HZ_W4A16_PATH, when set to a known path,
 * overrides this. HZ_EINVAL when `ex` is not a cuda executor; not thread-safe against calls running on
 * `ex` (set it before the model is used). */
int hz_exec_cuda_set_two_pass(hz_executor *ex, int on);

/* The grouped path the executor's calls ask for now: "fused", "twopass", "reg", "cudacores" (where the
 * bulk kernels do not apply to a shape, the first two run the register-streaming kernels), "scalar"
 * (the scalar executor), or "none" when `ex` is not a cuda executor. Static string. */
const char *hz_exec_cuda_path_name(const hz_executor *ex);

/* 1 when the executor's calls take the fused kernel, the only one that starts on the ready flags of
 * hz_exec_cuda_moe_device (the others wait for the previous kernel's end); 0 otherwise or when `ex`
 * is not a cuda executor. */
int hz_exec_cuda_starts_on_flags(const hz_executor *ex);

/* Device scratch one call of either cuda executor needs for experts of `layout`. */
uint64_t hz_exec_cuda_scratch_bytes(const hz_expert_layout *layout);

/* Device-resident routing (full residency): n experts (n <= HZ_W4A16_MAX_EXPERTS) of ONE token whose
 * blob addresses (rows_dev) and FP32 weights (w_dev) are device arrays written by earlier work on
 * `queue`, in ascending expert id; adds into the FP32 device accumulators acc. x: device FP16
 * [hidden]. Same numerics as the moe op. HZ_EINVAL when `ex` is not a cuda executor.
 * ready, ready_epoch (both or neither, device memory): the previous kernel on `queue` stores
 * *ready_epoch into ready[0] and ready[1] once everything above is written; the fused kernel then
 * starts on those flags instead of that kernel's end (hz_w4a16_args.ready).
 * h_in, h_out (both or neither, device FP16 [hidden]): h_out = fp16(h_in + fp16(acc)) once acc is
 * final (hz_w4a16_args.h_in); only where hz_exec_cuda_hands_h says so, else HZ_EUNSUPPORTED. */
int hz_exec_cuda_moe_device(hz_executor *ex, uint32_t n, const void *const *rows_dev, const float *w_dev,
                            const hz_f16 *x, float *acc, void *scratch, uint64_t scratch_bytes,
                            const uint32_t *ready, const uint32_t *ready_epoch, const hz_f16 *h_in, hz_f16 *h_out,
                            void *queue);

/* 1 when the executor's calls of n experts take the two-pass bulk down kernel, which can also store
 * h_out (hz_exec_cuda_moe_device), on this device; 0 otherwise, when the device query fails, or when
 * `ex` is not a cuda executor. */
int hz_exec_cuda_hands_h(const hz_executor *ex, uint32_t n);

#endif
