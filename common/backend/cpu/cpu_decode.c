/* common/backend/cpu/cpu_decode.c: paged-KV attention and the batch-invariant linear of the rollout engine
 * (see cpu_decode.h for the formulas and the fixed reduction orders).
 * Compiled at O3 with AVX-512/AVX2 clones like cpu_ops.c; no -ffast-math and no FP contraction (-std=c11),
 * so the order written here is the order executed on a given CPU.
 * Not here: dense attention for training (cpu_ops.c), cache allocation (model/generate.c). */
#pragma GCC optimize("O3")
#include "backend/cpu/cpu_decode.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
#define HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HOT
#endif

#define LANES 16

/* sum over 16 lanes by a fixed pairwise tree */
static inline __attribute__((always_inline)) float lanes_sum(const float a[LANES]) {
    float b[8], c[4];
    for (int i = 0; i < 8; i++) b[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; i++) c[i] = b[i] + b[i + 4];
    return (c[0] + c[2]) + (c[1] + c[3]);
}

static inline __attribute__((always_inline)) float dot16(const float *x, const float *y, int n) {
    float acc[LANES] = { 0 };
    int k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += x[k + l] * y[k + l];
    for (int l = 0; k + l < n; l++) acc[l] += x[k + l] * y[k + l];
    return lanes_sum(acc);
}

/* 4 rows of x against one weight row, each with its own 16-lane accumulator (same order as dot16). */
static inline __attribute__((always_inline)) void dot16x4(const float *x, long ldx, const float *w, int n,
                                                          float out[4]) {
    float a0[LANES] = { 0 }, a1[LANES] = { 0 }, a2[LANES] = { 0 }, a3[LANES] = { 0 };
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
    int k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) {
            float wv = w[k + l];
            a0[l] += x0[k + l] * wv;
            a1[l] += x1[k + l] * wv;
            a2[l] += x2[k + l] * wv;
            a3[l] += x3[k + l] * wv;
        }
    for (int l = 0; k + l < n; l++) {
        float wv = w[k + l];
        a0[l] += x0[k + l] * wv;
        a1[l] += x1[k + l] * wv;
        a2[l] += x2[k + l] * wv;
        a3[l] += x3[k + l] * wv;
    }
    out[0] = lanes_sum(a0);
    out[1] = lanes_sum(a1);
    out[2] = lanes_sum(a2);
    out[3] = lanes_sum(a3);
}

HOT void cpu_linear_rowwise(float *y, const float *x, const float *w, const float *b, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
#pragma omp parallel for schedule(static) if ((long)M * N * K >= 65536)
    for (int n = 0; n < N; n++) {
        const float *wn = w + (long)n * K;
        float bn = b ? b[n] : 0.0f;
        int m = 0;
        for (; m + 4 <= M; m += 4) {
            float o[4];
            dot16x4(x + (long)m * K, K, wn, K, o);
            for (int i = 0; i < 4; i++) y[(long)(m + i) * N + n] = b ? o[i] + bn : o[i];
        }
        for (; m < M; m++) {
            float o = dot16(x + (long)m * K, wn, K);
            y[(long)m * N + n] = b ? o + bn : o;
        }
    }
}

HOT void cpu_paged_attention(float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                             const int32_t *const *table, const float *kc, const float *vc, int block_tokens, int nh,
                             int nkv, int hd, float scale, float *scratch, long ctx_max) {
    if (R <= 0) return;
    int grp = nh / nkv, kvd = nkv * hd, ntask = R * nh;
    long work = 0;
    for (int r = 0; r < R; r++) work += pos[r] + 1;
#pragma omp parallel if (work * nh * hd >= 32768)
    {
        float *s = scratch + (long)omp_get_thread_num() * ctx_max;
        float acc[512];
#pragma omp for schedule(dynamic, 4)
        for (int t = 0; t < ntask; t++) {
            int r = t / nh, h = t % nh, g = h / grp, nk = pos[r] + 1;
            const float *qr = q + (long)r * ldq + h * hd;
            const int32_t *tb = table[r];
            float mx = -INFINITY;
            for (int j0 = 0, bi = 0; j0 < nk; j0 += block_tokens, bi++) {
                const float *kb = kc + (long)tb[bi] * block_tokens * kvd + g * hd;
                int n = nk - j0 < block_tokens ? nk - j0 : block_tokens;
                for (int j = 0; j < n; j++) {
                    float v = dot16(qr, kb + (long)j * kvd, hd) * scale;
                    s[j0 + j] = v;
                    mx = v > mx ? v : mx;
                }
            }
            double sum = 0;
            for (int j = 0; j < nk; j++) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            }
            float inv = (float)(1.0 / sum);
            for (int d = 0; d < hd; d++) acc[d] = 0.0f;
            for (int j0 = 0, bi = 0; j0 < nk; j0 += block_tokens, bi++) {
                const float *vb = vc + (long)tb[bi] * block_tokens * kvd + g * hd;
                int n = nk - j0 < block_tokens ? nk - j0 : block_tokens;
                for (int j = 0; j < n; j++) {
                    float p = s[j0 + j];
                    const float *vr = vb + (long)j * kvd;
                    for (int d = 0; d < hd; d++) acc[d] += p * vr[d];
                }
            }
            float *o = out + (long)r * ldo + h * hd;
            for (int d = 0; d < hd; d++) o[d] = acc[d] * inv;
        }
    }
}
