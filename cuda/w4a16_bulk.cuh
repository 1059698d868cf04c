/* The grouped executor's bulk-copy path (cuda/w4a16_bulk.cu), internal to cuda/: C++ only.
 *
 * Default for the grouped executor on sm_90: gate_up and down as ONE cooperative kernel (fused); with
 * HZ_W4A16_TWO_PASS, two kernels whose copies go through the bulk-copy engine (TMA), the down kernel
 * launched with programmatic dependent launch so its copies overlap gate_up.
 *
 * Why it exists. At batch 1 a routed-expert layer is a pure stream of codes (OLMoE: 8 experts x 3 MiB)
 * and the register-streaming kernels of w4a16_grouped.cu cannot keep enough bytes in flight: each lane
 * holds its ring of 16-byte loads in registers, which caps the resident warps, and the grid is latency
 * bound at about a quarter of HBM bandwidth. Hopper's bulk-copy engine (cp.async.bulk, completion
 * counted on an mbarrier) moves a warp's whole tile of codes and scales into shared memory with a
 * handful of instructions and no registers, so every SM has all of its share of the layer requested in
 * the first microsecond; the math then reads shared memory. The arithmetic is the tensor-core path's
 * (hz_mma_segment / hz_mma_fold of w4a16_device.cuh, the same segment order), so the results are the
 * same numbers as that path's.
 *
 * Both launchers return kHzBulkNotApplicable (without touching the last-error message) when the shape
 * or the device does not suit the path (not sm_90+, a tile that does not fit in shared memory, more
 * experts than one down block can stage); the caller then uses the register-streaming kernels. Any
 * other status is a real result (HZ_OK, or HZ_EDEVICE naming the CUDA call). */
#ifndef HZ_CUDA_W4A16_BULK_CUH
#define HZ_CUDA_W4A16_BULK_CUH

#include "w4a16.cuh"

/* Status for "this path does not apply; use another", distinct from any real failure. */
constexpr int kHzBulkNotApplicable = -1000;

int hz_w4a16_bulk_gate_up_launch(const hz_w4a16_args *a, void *stream);
int hz_w4a16_bulk_down_launch(const hz_w4a16_args *a, void *stream);
/* 1 when hz_w4a16_bulk_down_launch takes n experts of layout l on this device, 0 when it would return
 * kHzBulkNotApplicable, or the status of a failed device query. */
int hz_w4a16_bulk_down_applies(const hz_expert_layout *l, uint32_t n);
/* Both passes in one cooperative launch (the default where it fits: see w4a16_bulk.cu). */
int hz_w4a16_bulk_fused_launch(const hz_w4a16_args *a, void *stream);

#endif
