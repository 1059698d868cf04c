/* lib/backend: the fault-injecting wrapper (test support).
 *
 * hz_backend_fault_create wraps another backend and forwards every call to it, except that the Nth
 * call of an armed operation fails with a chosen status (without reaching the wrapped backend), or the
 * Nth recorded event completes with an error (the marked work runs, then query and wait report the
 * error, as a failed kernel or copy does on a GPU). Counting of "N" starts when a fault is armed. */
#ifndef HZ_BACKEND_FAULT_H
#define HZ_BACKEND_FAULT_H

#include "backend/backend.h"

typedef enum hz_fault_op {
    HZ_FAULT_MEM_ALLOC = 0,
    HZ_FAULT_PINNED_ALLOC,
    HZ_FAULT_COPY_H2D,
    HZ_FAULT_COPY_D2H,
    HZ_FAULT_COPY_D2D,
    HZ_FAULT_MEMSET,
    HZ_FAULT_EVENT_CREATE,
    HZ_FAULT_EVENT_RECORD,
    HZ_FAULT_EVENT_QUERY,
    HZ_FAULT_EVENT_WAIT,
    HZ_FAULT_QUEUE_WAIT_EVENT,
    HZ_FAULT_QUEUE_SYNC,
    HZ_FAULT_HOST_REGISTER,
    HZ_FAULT_OP_COUNT
} hz_fault_op;

/* Wraps `inner` (ownership passes to the wrapper, also on failure). The wrapper's name is
 * "fault(<inner name>)" and its kind "fault". */
int hz_backend_fault_create(hz_backend *inner, hz_backend **out);

/* The `nth` call of `op` from now (1 = the next one) returns `status` (an HZ_E* code) with a message
 * naming the injected fault. nth = 0 disarms. One armed fault per operation; it fires once. */
void hz_backend_fault_arm(hz_backend *fault, hz_fault_op op, uint64_t nth, int status);

/* The `nth` event_record from now records normally, but the event then reports `status` from query
 * and wait once the marked work has completed. Re-recording the event clears the error. nth = 0
 * disarms. */
void hz_backend_fault_arm_event_error(hz_backend *fault, uint64_t nth, int status);

/* Calls of `op` that reached the wrapper since creation (failed or not). */
uint64_t hz_backend_fault_calls(hz_backend *fault, hz_fault_op op);
/* Number of faults (of any kind) that have fired since creation. */
uint64_t hz_backend_fault_fired(hz_backend *fault);
/* Disarms everything. */
void hz_backend_fault_reset(hz_backend *fault);
/* The wrapped backend (for hz_backend_cpu_enqueue_host_fn and the like). */
hz_backend *hz_backend_fault_inner(hz_backend *fault);

#endif
