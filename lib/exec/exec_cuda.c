/* The cuda W4A16 executors: scalar and grouped (see exec_cuda.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "exec_cuda.h"

/* cuda/ is not on the library's include path (its headers are the kernels' own); its C interface is. */
#include "../../cuda/w4a16.cuh"
#include "../../cuda/w4a16_grouped.cuh"
#include "../../cuda/w4a16_scalar.cuh"

typedef struct cuda_exec {
    hz_executor base;
    hz_expert_layout layout;
    int grouped;
    uint32_t path; /* grouped: the kernel path flags chosen for the model (hz_exec_cuda_set_two_pass) */
} cuda_exec;

/* HZ_W4A16_PATH, for comparisons: "fused" (one cooperative kernel: the executor's default on sm_90,
 * kept by models with a shared expert; hz_exec_cuda_set_two_pass switches the others), "twopass"
 * (two kernels fed by bulk copies), "reg" (register-streaming kernels), "cudacores" (no tensor cores).
 * Read once. Returns the flags, or -1 when unset or unknown (the model's choice stands). */
static int path_env(void) {
    static _Atomic int cached = -2;
    int f = atomic_load_explicit(&cached, memory_order_relaxed);
    if (f >= -1) return f;
    const char *env = getenv("HZ_W4A16_PATH");
    f = -1;
    if (env && strcmp(env, "fused") == 0) f = 0;
    else if (env && strcmp(env, "twopass") == 0) f = HZ_W4A16_TWO_PASS;
    else if (env && strcmp(env, "reg") == 0) f = HZ_W4A16_NO_BULK;
    else if (env && strcmp(env, "cudacores") == 0) f = HZ_W4A16_CUDA_CORES;
    atomic_store_explicit(&cached, f, memory_order_relaxed);
    return f;
}

static uint32_t grouped_path_flags(const cuda_exec *ce) {
    const int env = path_env();
    return env >= 0 ? (uint32_t)env : ce->path;
}

static int launch(const cuda_exec *ce, hz_w4a16_args *a, void *queue) {
    if (ce->grouped) {
        /* Programmatic dependent launch lets each kernel be placed while the previous one drains;
         * the kernels wait for its results on the device. */
        a->flags = HZ_W4A16_PDL | grouped_path_flags(ce);
        return hz_w4a16_grouped_launch(a, queue);
    }
    a->flags = 0;
    return hz_w4a16_scalar_launch(a, queue);
}

static int cuda_moe(hz_executor *ex, const hz_moe_call *c) {
    cuda_exec *ce = (cuda_exec *)ex;
    int st = hz_moe_call_check(c);
    if (st) return st;
    if (!c->group_w || !c->scratch || !c->queue)
        return hz_error(HZ_EINVAL, "%s executor: the call has no device weights, scratch or queue",
                        ex->ops->name);
    const uint32_t H = c->layout->hidden;
    /* One token at a time: the kernels take one token's hidden state. An expert of the group that a
     * token does not route to gets weight 0; its term 0 * y leaves the FP32 sum unchanged. */
    for (uint32_t t = 0; t < c->n_tokens; t++) {
        for (uint32_t g0 = 0; g0 < c->n_group; g0 += HZ_W4A16_MAX_EXPERTS) {
            uint32_t n = c->n_group - g0 < HZ_W4A16_MAX_EXPERTS ? c->n_group - g0 : HZ_W4A16_MAX_EXPERTS;
            hz_w4a16_args a;
            memset(&a, 0, sizeof a);
            a.layout = c->layout;
            a.n = n;
            a.blobs = (const void *const *)(c->rows + g0);
            a.weights = c->group_w + (size_t)t * c->n_group + g0;
            a.x = c->x + (size_t)t * H;
            a.acc = c->acc + (size_t)t * H;
            a.scratch = c->scratch;
            a.scratch_bytes = c->scratch_bytes;
            st = launch(ce, &a, c->queue);
            if (st) return hz_error_prefix(st, "%s executor", ex->ops->name);
        }
    }
    return HZ_OK;
}

static void cuda_exec_destroy(hz_executor *ex) { free(ex); }

static const hz_executor_ops scalar_ops = {
    .name = "scalar", .accum_dtype = "f32", .device_kind = "cuda", .moe = cuda_moe, .destroy = cuda_exec_destroy};
static const hz_executor_ops grouped_ops = {
    .name = "grouped", .accum_dtype = "f32", .device_kind = "cuda", .moe = cuda_moe, .destroy = cuda_exec_destroy};

int hz_exec_cuda_create(const char *name, const hz_expert_layout *layout, hz_executor **out) {
    *out = NULL;
    int grouped;
    if (strcmp(name, "auto") == 0 || strcmp(name, "grouped") == 0)
        grouped = 1;
    else if (strcmp(name, "scalar") == 0)
        grouped = 0;
    else
        return hz_error(HZ_EUNSUPPORTED,
                        "executor '%s' does not run on a cuda device (cuda executors: auto, grouped, scalar)", name);
    cuda_exec *ce = hz_calloc(1, sizeof *ce);
    if (!ce) return HZ_ENOMEM;
    ce->base.ops = grouped ? &grouped_ops : &scalar_ops;
    ce->layout = *layout;
    ce->grouped = grouped;
    *out = &ce->base;
    return HZ_OK;
}

int hz_exec_cuda_set_two_pass(hz_executor *ex, int on) {
    if (!ex || strcmp(ex->ops->device_kind, "cuda") != 0)
        return hz_error(HZ_EINVAL, "hz_exec_cuda_set_two_pass: not a cuda executor");
    ((cuda_exec *)ex)->path = on ? HZ_W4A16_TWO_PASS : 0u;
    return HZ_OK;
}

int hz_exec_cuda_starts_on_flags(const hz_executor *ex) {
    if (!ex || strcmp(ex->ops->device_kind, "cuda") != 0) return 0;
    const cuda_exec *ce = (const cuda_exec *)ex;
    return ce->grouped && grouped_path_flags(ce) == 0;
}

const char *hz_exec_cuda_path_name(const hz_executor *ex) {
    if (!ex || strcmp(ex->ops->device_kind, "cuda") != 0) return "none";
    const cuda_exec *ce = (const cuda_exec *)ex;
    if (!ce->grouped) return "scalar";
    const uint32_t f = grouped_path_flags(ce);
    return (f & HZ_W4A16_CUDA_CORES) ? "cudacores" : (f & HZ_W4A16_NO_BULK) ? "reg" : (f & HZ_W4A16_TWO_PASS) ? "twopass" : "fused";
}

int hz_exec_cuda_hands_h(const hz_executor *ex, uint32_t n) {
    if (!ex || strcmp(ex->ops->device_kind, "cuda") != 0) return 0;
    const cuda_exec *ce = (const cuda_exec *)ex;
    if (!ce->grouped) return 0;
    /* the launcher's own test: a failed device query counts as no (the launch would report it) */
    return hz_w4a16_grouped_hands_h(&ce->layout, n, grouped_path_flags(ce)) == 1;
}

uint64_t hz_exec_cuda_scratch_bytes(const hz_expert_layout *layout) {
    uint64_t a = hz_w4a16_scalar_scratch_bytes(layout, HZ_W4A16_MAX_EXPERTS);
    uint64_t b = hz_w4a16_grouped_scratch_bytes(layout, HZ_W4A16_MAX_EXPERTS);
    return a > b ? a : b;
}

int hz_exec_cuda_moe_device(hz_executor *ex, uint32_t n, const void *const *rows_dev, const float *w_dev,
                            const hz_f16 *x, float *acc, void *scratch, uint64_t scratch_bytes,
                            const uint32_t *ready, const uint32_t *ready_epoch, const hz_f16 *h_in, hz_f16 *h_out,
                            void *queue) {
    if (!ex || strcmp(ex->ops->device_kind, "cuda") != 0)
        return hz_error(HZ_EINVAL, "hz_exec_cuda_moe_device: not a cuda executor");
    cuda_exec *ce = (cuda_exec *)ex;
    if (!rows_dev || !w_dev || !x || !acc || !queue)
        return hz_error(HZ_EINVAL, "hz_exec_cuda_moe_device: NULL argument");
    hz_w4a16_args a;
    memset(&a, 0, sizeof a);
    a.layout = &ce->layout;
    a.n = n;
    a.blobs_dev = rows_dev;
    a.weights = w_dev;
    a.x = x;
    a.acc = acc;
    a.scratch = scratch;
    a.scratch_bytes = scratch_bytes;
    a.ready = ready; /* the fused kernel's launcher uses them only both together */
    a.ready_epoch = ready_epoch;
    a.h_in = h_in;
    a.h_out = h_out;
    int st = launch(ce, &a, queue);
    return st ? hz_error_prefix(st, "%s executor", ex->ops->name) : HZ_OK;
}
