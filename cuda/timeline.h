/* Kernel timeline of a decode step: a development instrument, compiled only with -Dtimeline=true
 * (HZ_TIMELINE). Each instrumented kernel's blocks append one record to a per-translation-unit device
 * buffer while it is armed: the %globaltimer (ns) at block entry, when the programmatic-dependent-launch
 * wait returned, and when the block's last warp left. A record names its launch by `tag` (the first
 * weight matrix of a GEMV, the K cache of an attention, the logits of a route kernel; 0 for the expert
 * kernel, whose launches are told apart by time). Reading the buffers back is synchronous; nothing here is thread-safe, and it is
 * meant for one benchmark process at a time (tests/unit/model/bench_model_ops.c --step). */
#ifndef HZ_CUDA_TIMELINE_H
#define HZ_CUDA_TIMELINE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hz_tl_rec {
    uint64_t tag;
    uint64_t t_entry, t_wait, t_exit; /* ns; t_wait 0 where the kernel does not wait */
    uint64_t t_mark[3];               /* kernel-specific points (HZ_TL_MARK); 0 where not reached */
    uint32_t kind;                    /* hz_tl_kind */
    uint32_t block;                   /* linear block index */
    uint32_t info;                    /* GEMV: rows; attention: splits; experts: grid size; route: experts */
    uint32_t info2;                   /* GEMV: inputs per row; else 0 */
} hz_tl_rec;

typedef enum hz_tl_kind { HZ_TL_GEMV = 1, HZ_TL_ATTN = 2, HZ_TL_EXPERTS = 3, HZ_TL_ROUTE = 4 } hz_tl_kind;

#ifdef HZ_TIMELINE
/* arm(1) empties a buffer and starts recording, arm(0) stops; take copies up to max records out and
 * returns how many (records past the buffer's 65,536 are dropped). */
void hz_tl_arm_gemv(int on);
unsigned hz_tl_take_gemv(hz_tl_rec *out, unsigned max);
void hz_tl_arm_attn(int on);
unsigned hz_tl_take_attn(hz_tl_rec *out, unsigned max);
void hz_tl_arm_experts(int on);
unsigned hz_tl_take_experts(hz_tl_rec *out, unsigned max);
void hz_tl_arm_model(int on);
unsigned hz_tl_take_model(hz_tl_rec *out, unsigned max);
void hz_tl_arm_router(int on);
unsigned hz_tl_take_router(hz_tl_rec *out, unsigned max);
#endif

#ifdef __cplusplus
}
#endif

#endif
