/* common/core/dtype.c: 16-bit float conversions (dtype.h). */
#include "core/dtype.h"

#include <string.h>

uint16_t dtype_bf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);   /* NaN */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;        /* round to nearest even; overflows into inf correctly */
    return (uint16_t)(u >> 16);
}

float dtype_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

void dtype_bf16_from_f32_n(uint16_t *dst, const float *src, long n) {
    for (long i = 0; i < n; i++) dst[i] = dtype_bf16_from_f32(src[i]);
}

void dtype_bf16_to_f32_n(float *dst, const uint16_t *src, long n) {
    for (long i = 0; i < n; i++) dst[i] = dtype_bf16_to_f32(src[i]);
}

float dtype_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else {                                   /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) { man <<= 1; exp--; }
            man &= 0x3ffu;
            u = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

