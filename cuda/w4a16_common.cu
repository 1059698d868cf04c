/* Argument checks and scratch sizes shared by the W4A16 executors. */
#include "w4a16_device.cuh"

static uint64_t align256(uint64_t v) { return (v + 255u) / 256u * 256u; }

/* The FP16 intermediate: n rows of down.kp values. */
static uint64_t inter_bytes(const hz_expert_layout *l, uint32_t n) {
    return align256((uint64_t)n * l->down.kp * 2u);
}

extern "C" uint64_t hz_w4a16_grouped_scratch_bytes(const hz_expert_layout *layout, uint32_t n) {
    if (!layout) return 0;
    return inter_bytes(layout, n);
}

/* scalar: intermediate | gate FP32 [inter] | up FP32 [inter] | y_e FP32 [n x hidden] */
extern "C" uint64_t hz_w4a16_scalar_scratch_bytes(const hz_expert_layout *layout, uint32_t n) {
    if (!layout) return 0;
    return inter_bytes(layout, n) + 2u * align256((uint64_t)layout->inter * 4u) +
           align256((uint64_t)n * layout->hidden * 4u);
}

extern "C" int hz_w4a16_args_check(const hz_w4a16_args *a, uint64_t scratch_needed, const char *who) {
    if (!a) return hz_error(HZ_EINVAL, "%s: NULL arguments", who);
    const hz_expert_layout *l = a->layout;
    if (!l) return hz_error(HZ_EINVAL, "%s: NULL layout", who);
    if (a->n == 0 || a->n > HZ_W4A16_MAX_EXPERTS)
        return hz_error(HZ_EINVAL, "%s: %u experts (1..%u per call)", who, a->n, HZ_W4A16_MAX_EXPERTS);
    if (l->hidden == 0 || l->inter == 0 || l->gate.rows != l->inter || l->up.rows != l->inter ||
        l->down.rows != l->hidden || l->gate.k != l->hidden || l->up.k != l->hidden || l->down.k != l->inter ||
        l->gate.kp != l->up.kp || l->gate.kp % HZ_QBLOCK != 0 || l->down.kp % HZ_QBLOCK != 0 ||
        l->gate.kp < l->hidden || l->down.kp < l->inter)
        return hz_error(HZ_EINVAL, "%s: inconsistent expert layout (hidden %u, inter %u)", who, l->hidden, l->inter);
    /* Every part must allow 16-byte code loads and 2-byte scale loads from a 16-byte aligned blob. */
    if ((l->gate_q | l->up_q | l->down_q) % 16u != 0 || (l->gate_s | l->up_s | l->down_s) % 2u != 0)
        return hz_error(HZ_EINVAL, "%s: expert layout parts are not aligned", who);
    if (!a->blobs && !a->blobs_dev) return hz_error(HZ_EINVAL, "%s: no blob addresses", who);
    if (a->blobs)
        for (uint32_t e = 0; e < a->n; e++)
            if (!a->blobs[e] || ((uintptr_t)a->blobs[e] & 15u) != 0)
                return hz_error(HZ_EINVAL, "%s: blob %u is NULL or not 16-byte aligned", who, e);
    if (!a->weights || !a->x) return hz_error(HZ_EINVAL, "%s: NULL routing weights or x", who);
    if (!a->y && !a->acc) return hz_error(HZ_EINVAL, "%s: neither y nor acc given", who);
    if (!a->scratch || ((uintptr_t)a->scratch & 255u) != 0)
        return hz_error(HZ_EINVAL, "%s: scratch is NULL or not 256-byte aligned", who);
    if (a->scratch_bytes < scratch_needed)
        return hz_error(HZ_EINVAL, "%s: scratch of %llu bytes, %llu needed", who,
                        (unsigned long long)a->scratch_bytes, (unsigned long long)scratch_needed);
    if ((a->h_in || a->h_out) && (!a->h_in || !a->h_out || !a->acc || a->h_in == a->h_out))
        return hz_error(HZ_EINVAL, "%s: the residual add needs h_in, a distinct h_out and acc", who);
    if (a->flags & ~(HZ_W4A16_PDL | HZ_W4A16_CUDA_CORES | HZ_W4A16_NO_BULK | HZ_W4A16_TWO_PASS)) return hz_error(HZ_EINVAL, "%s: unknown flags 0x%x", who, a->flags);
    return HZ_OK;
}
