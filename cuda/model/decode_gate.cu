/* The gate of a layer's routed experts enqueued ahead at partial residency (decode_ops.cuh,
 * hz_decode_gate). */
#include "decode_gate.cuh"
#include "decode_launch.cuh"
#include "decode_ops.cuh"
#include "ops_common.cuh"

namespace {

/* A kernel of one warp between the router and the experts (without hz_dgemv_args.gate). */
__global__ void gate_kernel(hz_dgate_args a) {
    griddep_wait(); /* the router before it, and so everything before the router, has finished */
    /* The executor's grid may be placed while this one polls: it reads the rows only after its own
     * wait, which returns once this grid has ended. */
    griddep_launch();
    gate_pass(a, threadIdx.x);
}

} // namespace

extern "C" int hz_decode_gate(const hz_dgate_args *a, const hz_klaunch *k) {
    if (!a || !k) return hz_error(HZ_EINVAL, "decode gate: NULL argument");
    const int st = gate_args_check(a);
    if (st) return st;
    const cudaError_t e = launch(gate_kernel, 1, 1, 32, 0, k, *a);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the experts' gate kernel");
}
