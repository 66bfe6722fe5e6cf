/* common/core/fexp.h: the project's one fast exp (Cephes expf: Cody-Waite range reduction by ln 2 in two parts,
 * degree-6 polynomial, the exponent by bit shift; relative error ~1e-7), header-only so that each file compiles it
 * under its own optimisation and FP-contraction pragmas (include it after them).
 *   fexp_scaled(x, n): exp(x) for n = x / ln 2 rounded to the nearest integer (as a float) — the part every caller
 *                      shares; the rounding of n is the caller's, chosen for its loops:
 *   fexp(x):           the CPU kernels' (backend/cpu): rintf, clamped to [-87.3, 88.7]; DAPO_EXACT_EXP: libm expf;
 *   fexp_nonpos(x):    sampling's (model/sample.c) for x <= 0: the round-to-nearest by adding 1.5 * 2^23 (it
 *                      vectorises without SSE4.1, which rintf needs), exactly 0 below -87 so masked tokens weigh 0.
 * Both give the same value for x in [-87, 0] where the FP contraction of their files agrees. */
#ifndef DAPO_FEXP_H
#define DAPO_FEXP_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline __attribute__((always_inline)) float fexp_scaled(float x, float n) {
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = (int32_t)((uint32_t)((int32_t)n + 127) << 23);   /* unsigned: a NaN x (n the int of NaN)
                                                                              gives NaN, not a signed overflow */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline __attribute__((always_inline)) float fexp(float x) {
#ifdef DAPO_EXACT_EXP
    return expf(x);
#endif
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.7f ? 88.7f : x;
    return fexp_scaled(x, rintf(x * 1.44269504088896341f));
}

static inline __attribute__((always_inline)) float fexp_nonpos(float x) {
    const float xc = x < -87.0f ? -87.0f : x;
    const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;   /* round to nearest */
    return x < -87.0f ? 0.0f : fexp_scaled(xc, n);
}
#endif
