/* The gate of a layer's routed experts (decode_ops.cuh, hz_dgate_args): its body, run by one whole warp
 * either as a kernel of its own (decode_gate.cu) or by the router's routing warp once it has published
 * the routing (hz_dgemv_args.gate), and the arguments' host-side check both share. */
#ifndef HZ_CUDA_DECODE_GATE_CUH
#define HZ_CUDA_DECODE_GATE_CUH

#include "decode_launch.cuh"
#include "decode_ops.cuh"

namespace {

constexpr uint32_t kGateMaxRows = 32;
/* A host that never opens a gate would otherwise hold the device, and every queue waiting on it, forever.
 * Counted in the multiprocessor's clock (clock64): 10 s at the H200's 1.98 GHz, longer at lower clocks. */
constexpr long long kGateTimeoutClocks = 20000ll * 1000 * 1000;

__device__ __forceinline__ uint64_t gate_ld_acquire_sys(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/* Lane t of a whole warp (all 32 lanes call it). Every lane polls the same word (one request per poll
 * for the warp); each lane that then copies a row address has itself acquired the host's store of
 * `want`, so the host's earlier stores of the rows are visible to its own load. With a table, a group
 * whose every expert has a row there passes at once: the lookup reads device memory only, where a poll
 * of the host's word costs a round trip over the bus. The ids must be visible to the warp (written
 * before a barrier, or by a kernel that has ended). */
__device__ void gate_pass(const hz_dgate_args &a, uint32_t t) {
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
    for (uint32_t i = 1; gate_ld_acquire_sys(a.go) < want; i++) {
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

/* HZ_OK, or HZ_EINVAL with a message that names what is missing. */
inline int gate_args_check(const hz_dgate_args *a) {
    if (!a->go || !a->rows_host || !a->rows_dev || !a->late) return hz_error(HZ_EINVAL, "decode gate: NULL argument");
    if (a->n == 0 || a->n > kGateMaxRows) return hz_error(HZ_EINVAL, "decode gate: %u rows (1 .. %u)", a->n, kGateMaxRows);
    if (a->table && (!a->ids || !a->waited))
        return hz_error(HZ_EINVAL, "decode gate: a table needs the device's ids and the waited word");
    if (a->changes && (!a->table || !a->stage || !a->table_all || a->layers == 0))
        return hz_error(HZ_EINVAL, "decode gate: the table's changes need the table, its staging and its layers");
    if (a->step && a->want > 0xffffu)
        return hz_error(HZ_EINVAL, "decode gate: a gate numbered by the step's epoch takes want < 65536");
    return HZ_OK;
}

} // namespace

#endif
