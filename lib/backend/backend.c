/* Counting front ends of the device interface, the backend destructor, and the CUDA constructor stub
 * used when the library is built without CUDA. Counting happens here, once, above every backend
 * (including the fault wrapper), so the figures cannot depend on which implementation runs. */
#include "backend/backend.h"

static int check_copy(const hz_backend *be, hz_queue q, const void *dst, const void *src,
                      hz_xfer_purpose purpose, const char *what) {
    if (!be || !dst || !src) return hz_error(HZ_EINVAL, "%s: NULL backend or pointer", what);
    if ((unsigned)q >= HZ_QUEUE_COUNT) return hz_error(HZ_EINVAL, "%s: queue %d out of range", what, (int)q);
    if ((unsigned)purpose >= HZ_PURPOSE_COUNT)
        return hz_error(HZ_EINVAL, "%s: purpose %d out of range", what, (int)purpose);
    return HZ_OK;
}

/* A copy is counted once the backend has accepted it: a copy refused at enqueue never moves a byte, and
 * counting it would make fault-injection runs report transfers that did not happen. */
static void count(hz_backend *be, hz_xfer_dir d, hz_xfer_purpose p, uint64_t bytes) {
    atomic_fetch_add_explicit(&be->bytes[d][p], bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&be->copies[d][p], 1, memory_order_relaxed);
}

int hz_backend_copy_h2d(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes,
                        hz_xfer_purpose purpose) {
    int st = check_copy(be, q, dst, src, purpose, "copy_h2d");
    if (st) return st;
    st = be->ops->copy_h2d(be, q, dst, src, bytes);
    if (st == HZ_OK) count(be, HZ_H2D, purpose, bytes);
    return st;
}

int hz_backend_copy_d2h(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes,
                        hz_xfer_purpose purpose) {
    int st = check_copy(be, q, dst, src, purpose, "copy_d2h");
    if (st) return st;
    st = be->ops->copy_d2h(be, q, dst, src, bytes);
    if (st == HZ_OK) count(be, HZ_D2H, purpose, bytes);
    return st;
}

int hz_backend_read_now(hz_backend *be, void *dst, const void *src, uint64_t bytes, hz_xfer_purpose purpose) {
    int st = check_copy(be, HZ_QUEUE_COMPUTE, dst, src, purpose, "read_now");
    if (st) return st;
    st = be->ops->read_now(be, dst, src, bytes);
    if (st == HZ_OK) count(be, HZ_D2H, purpose, bytes);
    return st;
}

void hz_backend_count_d2h_store(hz_backend *be, hz_xfer_purpose purpose, uint64_t bytes) {
    if (be && purpose < HZ_PURPOSE_COUNT) count(be, HZ_D2H, purpose, bytes);
}

int hz_backend_copy_d2d(hz_backend *be, hz_queue q, void *dst, const void *src, uint64_t bytes,
                        hz_xfer_purpose purpose) {
    int st = check_copy(be, q, dst, src, purpose, "copy_d2d");
    if (st) return st;
    st = be->ops->copy_d2d(be, q, dst, src, bytes);
    if (st == HZ_OK) count(be, HZ_D2D, purpose, bytes);
    return st;
}

void hz_backend_destroy(hz_backend *be) {
    if (be) be->ops->destroy(be);
}

const char *hz_xfer_dir_name(hz_xfer_dir d) {
    switch (d) {
    case HZ_H2D: return "h2d";
    case HZ_D2H: return "d2h";
    case HZ_D2D: return "d2d";
    default: return "unknown";
    }
}

const char *hz_xfer_purpose_name(hz_xfer_purpose p) {
    switch (p) {
    case HZ_PURPOSE_EXPERT: return "expert";
    case HZ_PURPOSE_WEIGHTS: return "weights";
    case HZ_PURPOSE_ACTIVATION: return "activation";
    case HZ_PURPOSE_ROUTING: return "routing";
    case HZ_PURPOSE_VERIFY: return "verify";
    default: return "unknown";
    }
}
