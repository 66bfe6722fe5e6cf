/* common/backend/cpu/cpu_fexp.h: the CPU kernels' fast expf (Cephes-style: range reduction by ln 2 in two parts,
 * degree-6 polynomial, exponent by bit shift; relative error ~1e-7 over the clamped range [-87.3, 88.7]).
 * Header-only (static inline) so each kernel file compiles it under its own optimize/contract pragmas; include it
 * after those. DAPO_EXACT_EXP swaps in libm's expf (for checking the kernels). */
#ifndef DAPO_CPU_FEXP_H
#define DAPO_CPU_FEXP_H
#include <math.h>
#include <stdint.h>

static inline __attribute__((always_inline)) float fexp(float x) {
#ifdef DAPO_EXACT_EXP
    return expf(x);
#endif
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
    float n = rintf(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { int32_t i; float f; } s = { .i = ((int32_t)n + 127) << 23 };
    return p * s.f;
}
#endif
