/* The decode kernels' launchers refuse bad arguments with HZ_EINVAL and a message naming the kernel,
 * before they touch the device: the router tail in its own kernel (hz_model_route) and the experts'
 * gate, as a kernel of its own (hz_decode_gate) and inside the router (hz_dgemv_args.gate), and the
 * decode attention (hz_decode_attention). Built with
 * CUDA and run without a device (CI): every case below lacks one thing a valid call has, so none
 * reaches a launch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "horizon/horizon.h"
#include "model/forward_cuda.h"

#include "../../../cuda/model/model_ops.cuh"

static void assert_refused(int st, const char *name) {
    if (st != HZ_EINVAL || !strstr(hz_last_error_message(), name))
        fail_msg("%s (%s), expected HZ_EINVAL naming '%s'", hz_status_name(st), hz_last_error_message(), name);
}

static void test_route_args(void **state) {
    (void)state;
    uint16_t logits[8] = {0};
    uint32_t ids[2];
    float w[2];
    assert_refused(hz_model_route(NULL, 8, 2, 0, ids, w, NULL, NULL, 1, NULL), "model route");  /* no logits */
    assert_refused(hz_model_route(logits, 0, 2, 0, ids, w, NULL, NULL, 1, NULL), "model route"); /* 0 experts */
    assert_refused(hz_model_route(logits, 8, 9, 0, ids, w, NULL, NULL, 1, NULL), "model route"); /* k > E */
    assert_refused(hz_model_route(logits, 8, 0, 0, ids, w, NULL, NULL, 1, NULL), "model route"); /* k = 0 */
}

/* Device-looking addresses the checks never dereference. */
static uint64_t g_word[8];
static const void *g_rows[8];
static uint32_t g_ids[8], g_other_ids[8], g_changes[4];
static const void *g_table[8];
static hz_dstep g_step;

static hz_dgate_args valid_gate(void) {
    const hz_dgate_args a = {.go = g_word, .want = 1, .rows_host = g_word + 1, .rows_dev = g_rows, .n = 2,
                             .late = g_word + 2};
    return a;
}

static void test_gate_kernel_args(void **state) {
    (void)state;
    const hz_klaunch kl = {NULL, 0};
    hz_dgate_args a = valid_gate();
    a.go = NULL;
    assert_refused(hz_decode_gate(&a, &kl), "decode gate");
    a = valid_gate();
    a.n = 0;
    assert_refused(hz_decode_gate(&a, &kl), "decode gate");
    a.n = 33;
    assert_refused(hz_decode_gate(&a, &kl), "decode gate");
    a = valid_gate();
    a.table = g_table; /* without the ids and the waited word */
    assert_refused(hz_decode_gate(&a, &kl), "decode gate");
    a.ids = g_ids;
    a.waited = g_word + 3;
    a.changes = g_changes; /* without the staging, the whole table and its layers */
    assert_refused(hz_decode_gate(&a, &kl), "decode gate");
    a = valid_gate();
    a.step = &g_step;
    a.want = 65536; /* an epoch-numbered gate keeps the low 16 bits */
    assert_refused(hz_decode_gate(&a, &kl), "decode gate");
    assert_refused(hz_decode_gate(NULL, &kl), "decode gate");
}

/* A router GEMV with the host copy of its routing and a valid gate; each case makes one thing wrong. */
static uint16_t g_w16[64 * 8], g_y16[8], g_h16[64];
static float g_wts[8];

static hz_dgemv_args router_with_gate(void) {
    const hz_dgemv_args a = {.seg = {{g_w16, NULL, g_y16, 8, 0}}, .nseg = 1, .in = 64,
                             .x_mode = HZ_DGEMV_X_RESNORM, .h_in = g_h16, .norm_w = g_h16, .eps = 1e-6f,
                             .tail = HZ_DGEMV_TAIL_ROUTE, .top_k = 2, .ids_out = g_ids, .w_out = g_wts,
                             .host_ids = g_ids, .host_w = g_wts, .host_tag_out = g_word + 4, .host_tag = 1,
                             .gate_on = 1, .gate = valid_gate()};
    return a;
}

static void test_gate_in_router_args(void **state) {
    (void)state;
    const hz_klaunch kl = {NULL, 0};
    hz_dgemv_args a = router_with_gate();
    a.host_ids = NULL; /* no host copy of the routing: the host never learns what to open */
    a.host_w = NULL;
    a.host_tag_out = NULL;
    assert_refused(hz_decode_gemv(&a, NULL, &kl), "gate");
    a = router_with_gate();
    a.gate.n = 3; /* rows other than the router's top-k */
    assert_refused(hz_decode_gemv(&a, NULL, &kl), "gate");
    a = router_with_gate();
    a.gate.table = g_table; /* looks up ids other than the ones the router writes */
    a.gate.ids = g_other_ids;
    a.gate.waited = g_word + 3;
    assert_refused(hz_decode_gemv(&a, NULL, &kl), "gate");
    a = router_with_gate();
    a.gate.late = NULL; /* the gate's own check, named through the router's */
    assert_refused(hz_decode_gemv(&a, NULL, &kl), "decode gate");
    a = router_with_gate();
    a.ready = g_ids; /* the experts would start on the router's flags, before the gate opened */
    a.step = &g_step;
    assert_refused(hz_decode_gemv(&a, NULL, &kl), "gate");
}

/* The decode attention: a group count other than 0, 1 or 2 is refused before any launch; the group
 * count by position changes at 256 (every chunk of 64 in one two-group block below it); the session
 * switches refuse a session that is not on cuda. */
static void test_attention_args(void **state) {
    (void)state;
    static uint16_t q[8], kv[8], out[8];
    static float rope[8], part[8];
    static uint32_t count[1];
    static hz_dstep step;
    const hz_klaunch kl = {NULL, 0};
    hz_dattn_args a = {.q = q, .k = q, .v = q, .rope = rope, .step = &step, .kc = kv, .vc = kv, .out = out,
                       .part = part, .count = count, .splits = 1, .heads = 1, .kv_heads = 1, .head_dim = 8,
                       .groups = 3};
    assert_refused(hz_decode_attention(&a, &kl), "decode attention");
    a.groups = 2;
    a.q_norm = q; /* q norm without k norm */
    assert_refused(hz_decode_attention(&a, &kl), "decode attention");
    assert_int_equal(hz_decode_attention_groups(0), 2);
    assert_int_equal(hz_decode_attention_groups(255), 2);
    assert_int_equal(hz_decode_attention_groups(256), 1);
    assert_int_equal(hz_decode_attention_groups(UINT32_MAX), 1);
    assert_refused(hz_gpu_session_set_attention_groups(NULL, 1), "set_attention_groups");
    assert_null(hz_gpu_session_graph(NULL, 0));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_args),
        cmocka_unit_test(test_gate_kernel_args),
        cmocka_unit_test(test_gate_in_router_args),
        cmocka_unit_test(test_attention_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
