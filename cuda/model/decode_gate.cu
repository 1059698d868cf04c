/* The gate of a layer's routed experts enqueued ahead at partial residency (decode_ops.cuh,
 * hz_decode_gate). */
#include "decode_launch.cuh"
#include "decode_ops.cuh"
#include "ops_common.cuh"

namespace {

constexpr uint32_t kGateMaxRows = 32;
/* A host that never opens a gate would otherwise hold the device, and every queue waiting on it, forever.
 * Counted in the multiprocessor's clock (clock64): 10 s at the H200's 1.98 GHz, longer at lower clocks. */
constexpr long long kGateTimeoutClocks = 20000ll * 1000 * 1000;

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/* Every lane polls the same word (one request per poll for the warp); each lane that then copies a row
 * address has itself acquired the host's store of `want`, so the host's earlier stores of the rows are
 * visible to its own load. With a table, a group whose every expert has a row there passes at once: the
 * lookup reads device memory only, where a poll of the host's word costs a round trip over the bus. */
__global__ void gate_kernel(hz_dgate_args a) {
    griddep_wait(); /* the router before it, and so everything before the router, has finished */
    /* The executor's grid may be placed while this one polls: it reads the rows only after its own
     * wait, which returns once this grid has ended. */
    griddep_launch();
    const uint32_t t = threadIdx.x;
    if (a.table) {
        const uint32_t id = t < a.n ? a.ids[t] : 0u;
        const void *row = t >= a.n ? reinterpret_cast<const void *>(1) : id < a.experts ? a.table[id] : nullptr;
        if (__all_sync(0xffffffffu, row != nullptr)) {
            if (t < a.n) a.rows_dev[t] = row;
            return;
        }
    }
    const uint64_t want = a.step ? (uint64_t)__ldcg(&a.step->epoch) << 16 | a.want : a.want;
    const long long start = clock64();
    for (uint32_t i = 1; ld_acquire_sys(a.go) < want; i++) {
        if ((i & 255u) == 0 && clock64() - start > kGateTimeoutClocks) {
            if (t == 0) *reinterpret_cast<volatile uint64_t *>(a.late) = want;
            break;
        }
    }
    if (t == 0 && a.waited) {
        volatile uint64_t *w = a.waited;
        *w = *w + 1u;
    }
    if (a.changes) {
        /* Each lane acquired `want` itself above, so the host's earlier stores are visible to it. */
        const uint32_t count = *reinterpret_cast<const volatile uint32_t *>(a.changes);
        for (uint32_t c = 0; c < count && c < a.layers; c++) {
            const uint32_t l = reinterpret_cast<const volatile uint32_t *>(a.changes)[1 + c];
            if (l >= a.layers) continue;
            const size_t at = (size_t)l * a.experts;
            for (uint32_t e = t; e < a.experts; e += 32u)
                a.table_all[at + e] =
                    reinterpret_cast<const void *>(reinterpret_cast<const volatile uint64_t *>(a.stage)[at + e]);
        }
    }
    if (t < a.n)
        a.rows_dev[t] = reinterpret_cast<const void *>(*reinterpret_cast<const volatile uint64_t *>(a.rows_host + t));
}

} // namespace

extern "C" int hz_decode_gate(const hz_dgate_args *a, const hz_klaunch *k) {
    if (!a || !a->go || !a->rows_host || !a->rows_dev || !a->late || !k)
        return hz_error(HZ_EINVAL, "decode gate: NULL argument");
    if (a->n == 0 || a->n > kGateMaxRows) return hz_error(HZ_EINVAL, "decode gate: %u rows (1 .. %u)", a->n, kGateMaxRows);
    if (a->table && (!a->ids || !a->waited))
        return hz_error(HZ_EINVAL, "decode gate: a table needs the device's ids and the waited word");
    if (a->changes && (!a->table || !a->stage || !a->table_all || a->layers == 0))
        return hz_error(HZ_EINVAL, "decode gate: the table's changes need the table, its staging and its layers");
    if (a->step && a->want > 0xffffu)
        return hz_error(HZ_EINVAL, "decode gate: a gate numbered by the step's epoch takes want < 65536");
    const cudaError_t e = launch(gate_kernel, 1, 1, 32, 0, k, *a);
    return e == cudaSuccess ? HZ_OK : cuda_fail(e, "launch of the experts' gate kernel");
}
