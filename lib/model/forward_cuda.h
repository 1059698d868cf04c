/* Private to lib/model: the device-side state of a model and of a session on a cuda device, shared by
 * forward_cuda.c (weights upload, decode step) and prefill_cuda.c (batched prefill). Built with CUDA
 * only. Ownership: hz_gpu_model belongs to its hz_model (m->gpu), hz_gpu_session to its hz_session
 * (s->gpu); neither is visible outside lib/model. */
#ifndef HZ_MODEL_FORWARD_CUDA_H
#define HZ_MODEL_FORWARD_CUDA_H

#include <stdint.h>

#include "backend/backend.h"
#include "model.h"

/* The prefill path's own state (prefill_cuda.c), created on first use and freed with the session. */
typedef struct hz_gpu_prefill hz_gpu_prefill;

#define ALIGN 256u /* alignment of every device buffer the model carves */

struct hz_gpu_model {
    hz_backend *be;
    void *queue;      /* native compute queue */
    uint8_t *weights; /* one device allocation for every non-routed tensor */
    hz_weights dw;    /* device addresses of the tensors */
    int full;         /* device-resident routing table in use */
    hz_generation **leases; /* [layers] held while full */
    const void **table;     /* device [layers x experts] row addresses (full only) */
};

struct hz_gpu_session {
    uint8_t *act;           /* device: activations, scratch, rope table */
    hz_f16 *kc, *vc;        /* device [layers x max_context x Hkv*D] */
    hz_f16 *h, *xn, *q, *k, *v, *att, *proj, *rlog, *sha, *shd, *sgate;
    float *acc, *shg, *shu, *scores, *logits, *rope;
    uint32_t *route;        /* [K ids | K FP32 weights]: one D2H brings both back */
    float *route_w;
    const void **rows_dev;  /* [K] */
    int32_t *argmax;
    void *scratch;
    uint64_t scratch_bytes;
    uint8_t *pinned;        /* host: route copy, argmax, logits */
    uint32_t *h_ids;
    float *h_w;
    int32_t *h_argmax;
    const uint8_t **rows;   /* host [max(K, group)] lease row addresses */
    hz_event *done;         /* recorded after each executor call, handed to the lease release */
    hz_gpu_prefill *prefill; /* NULL until the first batched prefill */
};

#endif
