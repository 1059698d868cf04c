/* Parsing and expansion of the decode step's L2 prefetch plan (see l2plan.h). */
#include <stdlib.h>
#include <string.h>

#include "l2plan.h"

const char *hz_l2plan_default(hz_arch arch) {
    /* Measured on the H200 (doc/benchmarks.md, "L2 prefetch in the decode step"). */
    return arch == HZ_ARCH_QWEN2MOE ? "A=org,R=d,D=qkv" : "A=or,R=qkv";
}

static int slot_of(char c) {
    switch (c) {
    case 'A': return HZ_L2SLOT_ATTN;
    case 'O': return HZ_L2SLOT_O;
    case 'R': return HZ_L2SLOT_ROUTER;
    case 'D': return HZ_L2SLOT_SHDOWN;
    default: return -1;
    }
}

static int bad(hz_l2plan *out, const char *spec, const char *why, size_t at) {
    memset(out, 0, sizeof *out);
    return hz_error(HZ_EINVAL, "L2 prefetch plan \"%s\": %s at offset %zu (expected SLOT[MB]=TENSORS,... or off)",
                    spec, why, at);
}

int hz_l2plan_parse(const char *spec, hz_l2plan *out) {
    memset(out, 0, sizeof *out);
    if (!spec) return hz_error(HZ_EINVAL, "L2 prefetch plan: NULL");
    if (strcmp(spec, "off") == 0 || spec[0] == '\0') return HZ_OK;
    const char *p = spec;
    for (;;) {
        const int slot = slot_of(*p);
        if (slot < 0) return bad(out, spec, "unknown slot (A, O, R or D)", (size_t)(p - spec));
        p++;
        if (out->tensors[slot][0] || out->cap[slot]) return bad(out, spec, "slot given twice", (size_t)(p - spec - 1));
        if (*p >= '0' && *p <= '9') {
            uint64_t mb = 0;
            while (*p >= '0' && *p <= '9') {
                mb = mb * 10u + (uint64_t)(*p - '0');
                if (mb > 1u << 20) return bad(out, spec, "cap too large", (size_t)(p - spec));
                p++;
            }
            if (mb == 0) return bad(out, spec, "cap of 0 MiB", (size_t)(p - spec));
            out->cap[slot] = mb << 20;
        }
        if (*p != '=') return bad(out, spec, "'=' missing", (size_t)(p - spec));
        p++;
        size_t n = 0;
        while (*p && *p != ',') {
            if (!strchr("orgudqkv", *p)) return bad(out, spec, "unknown tensor (o r g u d q k v)", (size_t)(p - spec));
            if (n == HZ_L2PLAN_MAX) return bad(out, spec, "more than 4 tensors in a slot", (size_t)(p - spec));
            if (memchr(out->tensors[slot], *p, n)) return bad(out, spec, "tensor named twice", (size_t)(p - spec));
            out->tensors[slot][n++] = *p++;
        }
        if (n == 0) return bad(out, spec, "no tensors", (size_t)(p - spec));
        if (*p == '\0') return HZ_OK;
        p++; /* ',' */
    }
}

/* One tensor of the plan for layer l: its device address and size (NULL, 0 when it does not exist). */
static const void *tensor(char t, const hz_model_config *c, const hz_layer_weights *layers, uint32_t l,
                          uint64_t *bytes) {
    const uint64_t H = c->hidden, QD = (uint64_t)c->heads * c->head_dim, KD = (uint64_t)c->kv_heads * c->head_dim;
    const uint64_t S = c->shared_inter, E = c->experts, h = sizeof(hz_f16);
    const hz_layer_weights *w = &layers[l];
    const hz_layer_weights *nx = l + 1u < c->layers ? &layers[l + 1u] : NULL;
    *bytes = 0;
    switch (t) {
    case 'o': *bytes = H * QD * h; return w->wo;
    case 'r': *bytes = E * H * h; return w->router;
    case 'g': *bytes = S * H * h; return w->sh_gate;
    case 'u': *bytes = S * H * h; return w->sh_up;
    case 'd': *bytes = H * S * h; return w->sh_down;
    case 'q': *bytes = QD * H * h; return nx ? nx->wq : NULL;
    case 'k': *bytes = KD * H * h; return nx ? nx->wk : NULL;
    case 'v': *bytes = KD * H * h; return nx ? nx->wv : NULL;
    default: return NULL;
    }
}

uint32_t hz_l2plan_ranges(const hz_l2plan *plan, hz_l2slot slot, const hz_model_config *cfg,
                          const hz_layer_weights *layers, uint32_t l, const void **ptr, uint64_t *bytes) {
    if (!plan || slot >= HZ_L2SLOT_COUNT || !layers || l >= cfg->layers) return 0;
    uint64_t left = plan->cap[slot] ? plan->cap[slot] : UINT64_MAX;
    uint32_t n = 0;
    for (const char *t = plan->tensors[slot]; *t && left > 0; t++) {
        uint64_t b = 0;
        const void *p = tensor(*t, cfg, layers, l, &b);
        if (!p || b == 0) continue;
        const uintptr_t a = (uintptr_t)p, up = (a + 15u) & ~(uintptr_t)15u;
        if (b <= up - a) continue;
        b -= up - a;
        if (b > left) b = left;
        ptr[n] = (const void *)up;
        bytes[n] = b;
        left -= b;
        n++;
    }
    return n;
}
