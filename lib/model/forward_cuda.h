/* Private to lib/model: the device-side state of a model and of a session on a cuda device, shared by
 * forward_cuda.c (weights upload, decode step) and prefill_cuda.c (batched prefill). Built with CUDA
 * only. Ownership: hz_gpu_model belongs to its hz_model (m->gpu), hz_gpu_session to its hz_session
 * (s->gpu); neither is visible outside lib/model. */
#ifndef HZ_MODEL_FORWARD_CUDA_H
#define HZ_MODEL_FORWARD_CUDA_H

#include <stdint.h>

#include "backend/backend.h"
#include "model.h"

#include "../../cuda/model/decode_ops.cuh"

/* The prefill path's own state (prefill_cuda.c), created on first use and freed with the session. */
typedef struct hz_gpu_prefill hz_gpu_prefill;

#define ALIGN 256u /* alignment of every device buffer the model carves */

/* Carves one ALIGN-aligned piece of `bytes` from a running offset into one device allocation (base NULL:
 * the sizing pass, which only advances the offset). */
static inline void *hz_gpu_carve(uint8_t *base, uint64_t *off, uint64_t bytes) {
    void *p = base ? base + *off : NULL;
    *off += hz_align_up(bytes ? bytes : 1, ALIGN);
    return p;
}

struct hz_gpu_model {
    hz_backend *be;
    void *queue;      /* native compute queue */
    uint8_t *weights; /* one device allocation for every non-routed tensor */
    hz_weights dw;    /* device addresses of the tensors */
    int full;         /* device-resident routing table in use */
    hz_generation **leases; /* [layers] held while full */
    const void **table;     /* device [layers x experts] row addresses (full only) */
    hz_decode_dev dev;      /* SM count and GEMV grid bound: the decode kernels' launch shapes */
    /* The lm_head screen (cuda/model/decode_screen.cuh): an INT8 copy of the lm_head rows [vocab x
     * hidden], a scale and a bound coefficient per row, in one device allocation (lm_screen_mem, NULL
     * where the screen is off: HZ_GPU_LM_SCREEN=0 at model creation, a hidden size it cannot take, or
     * no device memory for it). */
    uint8_t *lm_screen_mem;
    int8_t *lm_q;
    float *lm_scale, *lm_coef, *lm_qnorm;
};

struct hz_gpu_session {
    uint8_t *act;           /* device: activations, scratch, rope table */
    hz_f16 *kc, *vc;        /* device [layers x max_context x Hkv*D] */
    hz_f16 *h, *xn, *q, *k, *v, *att, *proj, *rlog, *shd, *sgate;
    float *acc, *shg, *shu, *logits, *rope;
    uint32_t *route;        /* [K ids | K FP32 weights]: one D2H brings both back */
    float *route_w;
    const void **rows_dev;  /* [K] */
    int32_t *argmax;        /* device: the last step's argmax (also the next queued step's token) */
    void *scratch;
    uint64_t scratch_bytes;
    uint8_t *pinned;        /* host: route copy, argmax, logits */
    uint32_t *h_ids;
    float *h_w;
    int32_t *h_argmax;      /* = h_argmax_slot[parity of the last run's last position] */
    const uint8_t **rows;   /* host [max(K, group)] lease row addresses */
    hz_event *done;         /* recorded after each executor call, handed to the lease release */
    hz_gpu_prefill *prefill; /* NULL until the first batched prefill */

    /* The decode step (forward_cuda.c, cuda/model/decode_ops.cuh). The fused norms alternate the
     * residual stream between h and h2 (a GEMV block rewrites it while others still read the old
     * one); after a step the last token's FP32 logits are in `logits` (device) and its argmax in
     * *h_argmax, and s->logits is filled on demand (hz_gpu_logits_fetch). */
    hz_f16 *h2;
    hz_dstep *dstep;       /* device {token, pos} of the step in flight */
    float *attn_part;      /* [heads x attn_splits x (head_dim + 2)] split-softmax partials */
    uint32_t *attn_count;  /* [heads] splits finished (back to 0 after each launch) */
    void *tail;            /* the GEMV tails' counter and per-block argmax partials */
    uint32_t *ready;       /* per layer, two flags the router GEMV sets to the step's epoch (hz_dgemv_args.ready) */
    uint32_t *rtags;       /* per layer, E tagged router logits (hz_dgemv_args.tags) */
    uint32_t attn_splits;  /* fixed by max_context: eager steps and the graph run the same grid */
    int logits_on_host;    /* s->logits holds the logits of the last run */
    int use_graph, use_pdl; /* 1, 1 by default (hz_gpu_session_set_decode) */
    int route_kernel;       /* HZ_GPU_ROUTE_KERNEL at creation: -1 unset, 0 never, 1 always (route_placement) */
    int route_cluster;      /* HZ_GPU_ROUTE_CLUSTER at creation: the router's own kernel may be its cluster */
    hz_decode_side *side;   /* Qwen: the shared expert's down projection runs here, beside the routed
                               experts (NULL: after them, on the compute queue) */
    int graph_state;       /* 0 no full-residency last-token step yet, 2 one ran eagerly (the next is
                              captured), 1 captured, -1 capture failed: eager from then on */
    char graph_why[200];   /* why the capture failed */
    /* Full residency: the whole step (embedding .. argmax), captured four times (twice, graphs[0][*],
     * with attn_groups off; graphs_reset empties them when that changes): graphs[n - 1][p] runs
     * the steps at positions of parity p whose attention runs n groups of threads per block
     * (step_groups_at) and writes its logits to logits_buf[p], so that a step queued ahead (below)
     * leaves the logits of the step before it intact. */
    hz_decode_graph *graphs[2][2];
    /* attn_groups: the attention kernel's group count follows the position (hz_decode_attention_groups);
     * off (HZ_GPU_ATTN_GROUPS=0, or hz_gpu_session_set_attention_groups) it is 1 at every position.
     * step_groups: the group count of the step being queued or captured. */
    int attn_groups;
    uint32_t step_groups;
    float *logits_buf[2];   /* device; `logits` points to the one of the last run */
    /* The lm_head screen of a greedy step (screen_wanted): the step's final-normed x (xlm_buf[p], p the
     * position's parity; xlm: the one of the last run), the rows' upper bounds, the tagged largest lower
     * bound, and a device count of the rows summed again. screened[p]: the step whose logits go to
     * logits_buf[p] ran the screen, so those logits are computed only when asked for
     * (hz_gpu_logits_fetch: the lm_head GEMV on xlm_buf[p], the same bits as at the step). step_screen:
     * the step being queued or captured runs it; graph_screen: the captured graphs do (while a capture
     * is armed, graph_state 2: the eager step that armed it did). */
    hz_f16 *xlm_buf[2], *xlm;
    float *lm_ub;
    unsigned long long *lm_best, *lm_summed;
    volatile unsigned long long *h_lm_summed; /* pinned: the count's total after the last screened step */
    unsigned long long *d_lm_summed;          /* its device address (NULL: not addressable, no count) */
    int screened[2];
    int step_screen, graph_screen;
    int32_t *h_argmax_slot[2]; /* pinned: the argmax of the steps at positions of parity p */
    /* The slots' device addresses: the argmax kernel stores the token there itself, so no copy sits
     * between two steps on the compute queue (both NULL where pinned memory is not addressable by
     * kernels: then a 4-byte D2H copy follows each step). d_argmax: the one of the step being queued. */
    int32_t *d_argmax_slot[2], *d_argmax;
    hz_bevent *step_done[2];   /* recorded after the argmax copy of the step at a position of parity p */
    uint64_t graph_steps, eager_steps;

    /* The next step queued ahead (greedy sessions, graph path): when a greedy step's argmax is known
     * only to the device, the step at the next position is launched with that argmax as its token
     * before the host has read it, so the device does not idle while the host reads the token back,
     * returns it and launches again (17.6 us of a 737 us OLMoE step, 15.0 of 1,534 for Qwen, H200,
     * 2026-11-29). The caller's next hz_decode_step with that token at that position adopts it; any
     * other run first waits for it and then overwrites what it wrote (its K/V row is rewritten by the
     * step that runs at that position). HZ_GPU_SPECULATE=0 at session creation turns it off. */
    int speculate;           /* allowed for this session */
    int route_ready;         /* HZ_GPU_ROUTE_READY at creation: experts start on the router's flags */
    int router_alone;        /* HZ_GPU_ROUTER_ALONE at creation: router rows on warps of their own */
    int route_tags;          /* HZ_GPU_ROUTE_TAGS at creation: router logits through tagged words */
    int res_in_down;         /* HZ_GPU_RES_IN_DOWN (default on; =0 off) at creation: the two-pass down kernel adds the residual */
    int side_edge;           /* HZ_GPU_SIDE_EDGE at creation: programmatic edge to the side GEMV */
    /* Partial residency: the router stores its selection into layer l's slot of pinned memory itself
     * ([K ids | K FP32 weights | tag], slot_bytes apart from `slots`; the device addresses from
     * d_slots) and then the layer's tag; routed_partial polls that word instead of copying the routing
     * back and waiting for the queue. A slot per layer: where a gate passes without the host (the hits
     * on the device), the device runs on to the next router before the host has read this one's
     * routing. route_mirror: on for this session (HZ_GPU_ROUTE_MIRROR=0 at creation turns it off; off
     * where pinned memory is not addressable by kernels). route_ev[l & 1]: recorded after layer l's
     * router, so that a router that never publishes (a device error) ends the poll with the queue's
     * status (two: with the experts ahead, layer l's routing is read after layer l+1's router is
     * queued). */
    int route_mirror;
    uint8_t *slots, *d_slots;
    uint64_t slot_bytes;
    uint64_t route_stored;   /* layers whose routing the router stored (session stat routing_stored) */
    hz_bevent *route_ev[2];
    /* Partial residency, the experts ahead (enqueue_step): each layer's executor is enqueued behind a
     * gate (hz_decode_gate) right after its router, and the next layer's kernels up to its router
     * behind it, before the host reads the routing; the host then leases the group, writes its row
     * addresses into gate_rows and opens the gate by storing gate_seq into *h_go. At most one gate is
     * waiting at a time: the one numbered gate_seq while *h_go still holds the number before it.
     * gate_late: where a gate that waited ~10 s for the host stores its number before it lets the
     * experts run on the rows of an earlier gate (the step then fails). ahead_on: on for this session
     * (HZ_GPU_EXPERTS_AHEAD=0 at creation turns it off; off without the router store). */
    int ahead_on;
    int ahead_armed;   /* a last-token step has run: every kernel of a step is loaded (experts_ahead()) */
    volatile uint64_t *h_go, *h_gate_rows, *h_gate_late;
    uint64_t *d_go, *d_gate_rows, *d_gate_late;
    uint64_t gate_seq;
    uint64_t experts_gated;  /* layers whose experts ran behind an opened gate (session stat) */
    /* The hits on the device (forward_cuda.c, above hold_sync): each gate looks its layer's ids up in
     * `tab` (device, [layers x experts] row addresses, NULL where not resident) and passes without the
     * host when every one has a row. The rows are those of the generation `held` (a lease the session
     * keeps during a forward, hz_cache_hold); `map` is the host's copy of what `tab` holds (or will hold
     * once the copies queued so far have run), from which the host tells which gates will wait for it;
     * `tab_stage` (pinned) is where the copies into `tab` come from (by the queue at a forward's start,
     * by a waiting gate at a miss). *h_waited: +1 by every gate that waited for the host (pinned),
     * compared after each step with gates_waited, the host's count. dev_hits: on for this session
     * (HZ_GPU_DEVICE_HITS=0 at creation turns it off). */
    int dev_hits;
    const void **tab;
    const void **map;
    const void **tab_stage;
    hz_generation *held;
    volatile uint64_t *h_waited;
    uint64_t *d_waited;
    uint64_t gates_waited;   /* gates the host saw a miss for in its map, so opened itself */
    uint64_t gate_hits;      /* gates that passed on the device's own lookup (session stat) */
    uint64_t tab_copies;     /* layers' rows copied into tab (session stat) */
    /* The table's changes at a miss travel with the gate that waits for the host: it copies the layers
     * listed in h_changes ([count | layers], pinned) from tab_stage into tab (hz_dgate_args.changes).
     * At a forward's start the layers that changed since are copied by the queue, ahead of the step. */
    uint32_t *h_changes, *d_changes;
    const void **d_tab_stage;
    hz_generation *deferred; /* a group's lease the held generation does not cover: released once the
                                next router's tag is seen, or when the step has ended */
    /* The device's step counter (hz_dstep.epoch) as the host counts it: +1 at every hz_decode_begin and
     * every graph launch. At partial residency the routers' tags and the gates' numbers are
     * (epoch << 16) | (layer + 1), read from the device by the kernels, so that a captured step names
     * every step's routing and gates apart. */
    uint32_t epoch;
    int capturing;           /* enqueue_layers is recording a graph: nothing is served or recorded */
    int partial_graph;       /* HZ_GPU_PARTIAL_GRAPH at creation: with the hits on the device, the
                                partial-residency step is captured and replayed like a full one */
    int gate_in_router;      /* HZ_GPU_GATE_IN_ROUTER at creation: each layer's gate is run by its
                                router's routing warp (hz_dgemv_args.gate), not by a kernel of its own */
    hz_bevent *graph_ev;     /* recorded after a partial-residency graph launch: wait_routing's check */
    int spec_inflight;       /* a step is queued ahead: position spec_pos, token = the argmax returned
                              * for the step before it (spec_token) */
    uint32_t spec_pos;
    int32_t spec_token;
    uint64_t spec_adopted, spec_discarded;
};

/* Copies the last run's logits into s->logits when they are not there yet (a D2H copy, counted under
 * purpose activation, and a wait on the compute queue). The pointer s->logits never changes. */
int hz_gpu_logits_fetch(const hz_session *s);
/* Marks s->logits stale: called before every run, whose logits stay on the device until fetched. */
void hz_gpu_logits_invalidate(hz_session *s);
/* Chooses how the next steps run: the CUDA graph at full residency (graph) and programmatic
 * dependent launch between the kernels (pdl); splits != 0 overrides the attention's split count (at
 * most the default one, for tests). A captured graph is dropped and captured again. */
int hz_gpu_session_set_decode(hz_session *s, int graph, int pdl, uint32_t splits);
/* Tests and benchmarks: on (the default) the attention kernel's group count follows the position
 * (hz_decode_attention_groups); off, it is one group at every position. Drops the captured graphs (the
 * next steps capture again). HZ_EINVAL for a session not on cuda. */
int hz_gpu_session_set_attention_groups(hz_session *s, int on);
/* Benchmarks: the captured graph that runs the step at position pos (NULL before the capture). */
hz_decode_graph *hz_gpu_session_graph(const hz_session *s, uint32_t pos);
/* The session's decode path for its stats JSON: `,"decode_path":...` appended to buf (n bytes). */
int hz_gpu_session_stats(const hz_session *s, char *buf, size_t n);


/* prefill_cuda.c: the batched prefill (chunks of tokens through each layer at once).
 * hz_gpu_prefill_wanted: whether hz_forward_gpu should hand these n tokens to it: n > 1 (or any n with
 * HZ_GPU_PREFILL=batched), not HZ_GPU_PREFILL=token, and the model's shapes within its kernels.
 * hz_gpu_prefill_forward has hz_forward_gpu's contract: K/V of every token written, the last token's
 * FP32 logits in the device `logits` (fetched on demand), its argmax in *h_argmax, pos not moved; it
 * creates the session's prefill state on first use. hz_gpu_prefill_destroy frees that state (none:
 * no-op). */
int hz_gpu_prefill_wanted(const hz_session *s, uint32_t n);
int hz_gpu_prefill_forward(hz_session *s, const int32_t *tokens, uint32_t n);
void hz_gpu_prefill_destroy(hz_session *s);

#endif
