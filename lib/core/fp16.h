/* IEEE binary16 and bfloat16 conversions, round to nearest even. Pure functions, usable anywhere. */
#ifndef HZ_FP16_H
#define HZ_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t hz_f16; /* IEEE binary16 bits */
typedef uint16_t hz_bf16; /* bfloat16 bits */

#define HZ_F16_MAX 65504.0f

static inline uint32_t hz_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float hz_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float hz_bf16_to_f32(hz_bf16 h) { return hz_bits_f32((uint32_t)h << 16); }

static inline hz_bf16 hz_f32_to_bf16(float f) {
    uint32_t u = hz_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (hz_bf16)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (hz_bf16)(u >> 16);
}

static inline float hz_f16_to_f32(hz_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return hz_bits_f32(sign | 0x7f800000u | (man << 13));
    return hz_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Round to nearest even; overflow gives +-inf (callers that must not overflow check hz_f16_fits). */
static inline hz_f16 hz_f32_to_f16(float f) {
    uint32_t u = hz_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (hz_f16)(sign | 0x7e00u);         /* NaN */
    if (a >= 0x477ff000u) return (hz_f16)(sign | 0x7c00u);        /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                                        /* below 2^-14: subnormal or zero */
        float v = hz_bits_f32(a) * 16777216.0f;                   /* scale by 2^24 */
        uint32_t m = (uint32_t)lrintf(v);                         /* nearest even (default mode) */
        return (hz_f16)(sign | m);
    }
    uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
    return (hz_f16)(sign | ((r - 0x38000000u) >> 13));
}

/* True when f is finite and rounds to a finite binary16 value. */
static inline int hz_f16_fits(float f) { return isfinite(f) && fabsf(f) < 65520.0f; }

/* Round f to binary16 and back: the value an FP16 activation would hold. */
static inline float hz_round_f16(float f) { return hz_f16_to_f32(hz_f32_to_f16(f)); }

#endif
