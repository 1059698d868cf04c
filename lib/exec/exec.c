/* Executor selection and call validation. */
#include <string.h>

#include "exec.h"
#ifdef HZ_HAVE_CUDA
#include "exec_cuda.h"
#endif

int hz_executor_create(const char *name, const char *device_kind, const hz_expert_layout *layout,
                       hz_executor **out) {
    if (out) *out = NULL;
    if (!device_kind || !layout || !out) return hz_error(HZ_EINVAL, "hz_executor_create: NULL argument");
    if (!name) name = "auto";
    if (strcmp(device_kind, "cpu") == 0) {
        if (strcmp(name, "auto") == 0 || strcmp(name, "reference") == 0)
            return hz_exec_reference_create(layout, out);
        return hz_error(HZ_EUNSUPPORTED,
                        "executor '%s' does not run on a cpu device (cpu executors: auto, reference)",
                        name);
    }
#ifdef HZ_HAVE_CUDA
    if (strcmp(device_kind, "cuda") == 0) return hz_exec_cuda_create(name, layout, out);
#endif
    return hz_error(HZ_EUNSUPPORTED, "no executor '%s' for device kind '%s' in this build", name,
                    device_kind);
}

void hz_executor_destroy(hz_executor *ex) {
    if (ex && ex->ops->destroy) ex->ops->destroy(ex);
}

int hz_moe_call_check(const hz_moe_call *c) {
    if (!c || !c->layout || !c->x || !c->topk_ids || !c->topk_w || !c->group_ids || !c->rows ||
        !c->acc)
        return hz_error(HZ_EINVAL, "moe call: NULL argument");
    if (c->n_tokens == 0 || c->top_k == 0 || c->n_group == 0)
        return hz_error(HZ_EINVAL, "moe call: %u tokens, top-k %u, %u experts (all must be > 0)",
                        c->n_tokens, c->top_k, c->n_group);
    for (uint32_t g = 0; g < c->n_group; g++) {
        if (!c->rows[g]) return hz_error(HZ_EINVAL, "moe call: expert %u has no row", c->group_ids[g]);
        if (g > 0 && c->group_ids[g] <= c->group_ids[g - 1])
            return hz_error(HZ_EINVAL, "moe call: group ids not strictly ascending at %u", g);
    }
    return HZ_OK;
}
