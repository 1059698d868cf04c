/* The decode step's L2 prefetch plan (lib/model/l2plan.c): the spec grammar, its errors, and the
 * ranges a slot expands to (order, caps, 16-byte rounding, nothing past the last layer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "horizon/horizon.h"
#include "model/l2plan.h"

static void parses_slots_caps_and_off(void **state) {
    (void)state;
    hz_l2plan p;
    assert_int_equal(hz_l2plan_parse("A=or,R12=qkv,D=d", &p), HZ_OK);
    assert_string_equal(p.tensors[HZ_L2SLOT_ATTN], "or");
    assert_string_equal(p.tensors[HZ_L2SLOT_ROUTER], "qkv");
    assert_string_equal(p.tensors[HZ_L2SLOT_SHDOWN], "d");
    assert_string_equal(p.tensors[HZ_L2SLOT_O], "");
    assert_int_equal(p.cap[HZ_L2SLOT_ROUTER], 12u << 20);
    assert_int_equal(p.cap[HZ_L2SLOT_ATTN], 0);
    assert_int_equal(hz_l2plan_parse("off", &p), HZ_OK);
    for (int s = 0; s < HZ_L2SLOT_COUNT; s++) assert_string_equal(p.tensors[s], "");
    assert_int_equal(hz_l2plan_parse(hz_l2plan_default(HZ_ARCH_OLMOE), &p), HZ_OK);
    assert_int_equal(hz_l2plan_parse(hz_l2plan_default(HZ_ARCH_QWEN2MOE), &p), HZ_OK);
}

static void rejects_malformed_specs(void **state) {
    (void)state;
    static const struct {
        const char *spec, *why;
    } bad[] = {
        {"X=o", "unknown slot"},     {"A", "'=' missing"},          {"A=", "no tensors"},
        {"A=z", "unknown tensor"},   {"A=orgud", "more than 4"},    {"A=oo", "named twice"},
        {"A=o,A=r", "given twice"},  {"A0=o", "cap of 0"},          {"A=o,", "unknown slot"},
        {"A99999999=o", "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hz_l2plan p;
        memset(&p, 0x5a, sizeof p);
        assert_int_equal(hz_l2plan_parse(bad[i].spec, &p), HZ_EINVAL);
        assert_non_null(strstr(hz_last_error_message(), bad[i].why));
        assert_string_equal(p.tensors[HZ_L2SLOT_ATTN], ""); /* cleared on error */
    }
    hz_l2plan p;
    assert_int_equal(hz_l2plan_parse(NULL, &p), HZ_EINVAL);
}

static void expands_ranges_in_order_with_caps(void **state) {
    (void)state;
    hz_model_config c = {.arch = HZ_ARCH_QWEN2MOE, .hidden = 64, .layers = 2, .heads = 4, .kv_heads = 2,
                         .head_dim = 16, .experts = 8, .shared_inter = 96};
    static _Alignas(16) hz_f16 buf[2][8][8192];
    hz_layer_weights w[2];
    memset(w, 0, sizeof w);
    for (int l = 0; l < 2; l++) {
        w[l].wq = buf[l][0], w[l].wk = buf[l][1], w[l].wv = buf[l][2], w[l].wo = buf[l][3];
        w[l].router = buf[l][4], w[l].sh_gate = buf[l][5], w[l].sh_up = buf[l][6], w[l].sh_down = buf[l][7];
    }
    w[1].wk = buf[1][1] + 3; /* 6 bytes past a 16-byte boundary: rounded up, 10 bytes shorter */
    hz_l2plan p;
    assert_int_equal(hz_l2plan_parse("A=org,R=qkv,O1=du", &p), HZ_OK);
    const void *ptr[HZ_L2PLAN_MAX];
    uint64_t b[HZ_L2PLAN_MAX];
    assert_int_equal(hz_l2plan_ranges(&p, HZ_L2SLOT_ATTN, &c, w, 0, ptr, b), 3);
    assert_ptr_equal(ptr[0], w[0].wo);
    assert_int_equal(b[0], 64u * 64u * 2u);
    assert_ptr_equal(ptr[1], w[0].router);
    assert_int_equal(b[1], 8u * 64u * 2u);
    assert_ptr_equal(ptr[2], w[0].sh_gate);
    assert_int_equal(b[2], 96u * 64u * 2u);
    /* q/k/v of the next layer; none after the last one */
    assert_int_equal(hz_l2plan_ranges(&p, HZ_L2SLOT_ROUTER, &c, w, 0, ptr, b), 3);
    assert_ptr_equal(ptr[0], w[1].wq);
    assert_int_equal(b[0], 64u * 64u * 2u);
    assert_ptr_equal(ptr[1], (const char *)buf[1][1] + 16);
    assert_int_equal(b[1], 32u * 64u * 2u - 10u);
    assert_int_equal(b[2], 32u * 64u * 2u);
    assert_int_equal(hz_l2plan_ranges(&p, HZ_L2SLOT_ROUTER, &c, w, 1, ptr, b), 0);
    /* a 1 MiB cap cuts nothing this small; a slot without tensors gives nothing */
    assert_int_equal(hz_l2plan_ranges(&p, HZ_L2SLOT_O, &c, w, 0, ptr, b), 2);
    assert_int_equal(hz_l2plan_ranges(&p, HZ_L2SLOT_SHDOWN, &c, w, 0, ptr, b), 0);
    /* the cap cuts the last tensor short and drops the rest */
    c.hidden = 4096; /* o_proj 4096 x 64 x 2 = 512 KiB, router 8 x 4096 x 2 = 64 KiB, up 96 x 4096 x 2 */
    assert_int_equal(hz_l2plan_parse("A1=oru", &p), HZ_OK);
    assert_int_equal(hz_l2plan_ranges(&p, HZ_L2SLOT_ATTN, &c, w, 0, ptr, b), 3);
    assert_int_equal(b[0] + b[1] + b[2], 1u << 20);
    assert_int_equal(b[2], (1u << 20) - (512u << 10) - (64u << 10));
    /* an OLMoE model has no shared expert: g/u/d are skipped */
    c.arch = HZ_ARCH_OLMOE;
    for (int l = 0; l < 2; l++) w[l].sh_gate = w[l].sh_up = w[l].sh_down = NULL;
    assert_int_equal(hz_l2plan_parse("A=gor", &p), HZ_OK);
    assert_int_equal(hz_l2plan_ranges(&p, HZ_L2SLOT_ATTN, &c, w, 0, ptr, b), 2);
    assert_ptr_equal(ptr[0], w[0].wo);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_slots_caps_and_off),
        cmocka_unit_test(rejects_malformed_specs),
        cmocka_unit_test(expands_ranges_in_order_with_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
