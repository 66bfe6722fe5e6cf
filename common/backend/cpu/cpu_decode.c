/* common/backend/cpu/cpu_decode.c: paged-KV attention and the batch-invariant linear of the rollout engine
 * (see cpu_decode.h for the formulas and the fixed reduction orders).
 * Hot loops: explicit AVX-512 intrinsics (fused multiply-add chains) where the CPU has AVX-512, else plain C with
 * fmaf in the same order; compiled at O3 with AVX-512/AVX2 clones like cpu_ops.c, no -ffast-math and no implicit FP
 * contraction (-std=c11), so the order written here is the order executed.
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

/* Work (multiply-adds) below which a kernel stays on the calling thread: waking the OpenMP team costs tens of
 * microseconds (more on a loaded machine) and decode steps are many small kernels. */
#define PAR_MIN_MACS 4000000L

#include "backend/cpu/cpu_fexp.h"

void cpu_kv_store(float *kc, float *vc, const int32_t *table, int p, const float *k, const float *v, int BS, int nkv,
                  int hd) {
    long b = table[p / BS];
    int o = p % BS, kvd = nkv * hd;
    float *kb = kc + b * (long)kvd * BS;
    for (int i = 0; i < kvd; i++) kb[(long)i * BS + o] = k[i];
    memcpy(vc + (b * BS + o) * (long)kvd, v, (size_t)kvd * sizeof(float));
}

/* scores of one query head against keys [0, nk) of one kv head: s[j] = (q . k_j) * scale, returns max */
static inline __attribute__((always_inline)) float head_scores(float *s, const float *qh, const int32_t *tb,
                                                               const float *kc, int g, int nk, int BS, int nkv,
                                                               int hd, float scale) {
    float mx = -INFINITY;
    float acc[64];
    for (int j0 = 0, bi = 0; j0 < nk; j0 += BS, bi++) {
        const float *kb = kc + ((long)tb[bi] * nkv + g) * hd * BS;
        int n = nk - j0 < BS ? nk - j0 : BS;
        for (int c0 = 0; c0 < n; c0 += 64) {            /* BS may exceed 64: columns in slices */
            int w = n - c0 < 64 ? n - c0 : 64;
            for (int j = 0; j < w; j++) acc[j] = 0.0f;
            for (int d = 0; d < hd; d++) {
                float qd = qh[d];
                const float *kr = kb + (long)d * BS + c0;
                for (int j = 0; j < w; j++) acc[j] = fmaf(qd, kr[j], acc[j]);
            }
            for (int j = 0; j < w; j++) {
                float v = acc[j] * scale;
                s[j0 + c0 + j] = v;
                mx = v > mx ? v : mx;
            }
        }
    }
    return mx;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* AVX-512 attention for block_tokens == 16 and hd % 16 == 0: G query heads of one kv head at once (G
 * independent FMA chains hide the latency), scores of a block = one vector FMA chain over d per head,
 * p.V with G x NV vector accumulators per 16 * NV columns. Same per-row order whatever the batch. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
att_scores16(const int G, float *s, long sstride, const float *q, const int32_t *tb, const float *kc, int g, int nk,
             int nkv, int hd, float scale, float *mx) {
    for (int j0 = 0, bi = 0; j0 < nk; j0 += 16, bi++) {
        const float *kb = kc + ((long)tb[bi] * nkv + g) * hd * 16;
        __m512 a[4];
        for (int h = 0; h < G; h++) a[h] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            __m512 kv = _mm512_loadu_ps(kb + (long)d * 16);
            for (int h = 0; h < G; h++) a[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[(long)h * hd + d]), kv, a[h]);
        }
        int n = nk - j0 < 16 ? nk - j0 : 16;
        __mmask16 m = (__mmask16)((1u << n) - 1u);
        for (int h = 0; h < G; h++) {
            __m512 v = _mm512_mul_ps(a[h], _mm512_set1_ps(scale));
            _mm512_storeu_ps(s + h * sstride + j0, v);
            float bm = _mm512_mask_reduce_max_ps(m, v);
            mx[h] = bm > mx[h] ? bm : mx[h];
        }
    }
}

__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
att_pv16(const int G, const int NV, float *o, const float *s, long sstride, const int32_t *tb, const float *vc, int g,
         int d0, int nk, int kvd) {
    (void)g;
    __m512 a[4][4];
    for (int h = 0; h < G; h++)
        for (int v = 0; v < NV; v++) a[h][v] = _mm512_setzero_ps();
    for (int j0 = 0, bi = 0; j0 < nk; j0 += 16, bi++) {
        const float *vb = vc + (long)tb[bi] * 16 * kvd + d0;
        int n = nk - j0 < 16 ? nk - j0 : 16;
        for (int j = 0; j < n; j++) {
            const float *vr = vb + (long)j * kvd;
            __m512 vv[4];
            for (int v = 0; v < NV; v++) vv[v] = _mm512_loadu_ps(vr + 16 * v);
            for (int h = 0; h < G; h++) {
                __m512 p = _mm512_set1_ps(s[h * sstride + j0 + j]);
                for (int v = 0; v < NV; v++) a[h][v] = _mm512_fmadd_ps(p, vv[v], a[h][v]);
            }
        }
    }
    for (int h = 0; h < G; h++)
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(o + (long)h * 64 + 16 * v, a[h][v]);
}
#endif

/* softmax numerator in place; returns 1 / sum (double sum in j order) */
HOT static float att_exp(float *s, int nk, float mx) {
    for (int j = 0; j < nk; j++) s[j] = fexp(s[j] - mx);
    double sum = 0;
    for (int j = 0; j < nk; j++) sum += s[j];
    return (float)(1.0 / sum);
}

HOT static void att_generic(float *out, int ldo, const float *q, int ldq, int r, int g, const int32_t *pos,
                            const int32_t *tb, const float *kc, const float *vc, int BS, int grp, int nkv, int hd,
                            float scale, float *sbase, long ctx_max) {
    int nk = pos[r] + 1, kvd = nkv * hd;
    float acc[512];
    for (int hh = 0; hh < grp; hh++) {
        int h = g * grp + hh;
        float *s = sbase + (long)hh * ctx_max;
        float mx = head_scores(s, q + (long)r * ldq + h * hd, tb, kc, g, nk, BS, nkv, hd, scale);
        float inv = att_exp(s, nk, mx);
        for (int d = 0; d < hd; d++) acc[d] = 0.0f;
        for (int j0 = 0, bi = 0; j0 < nk; j0 += BS, bi++) {
            const float *vb = vc + (long)tb[bi] * BS * kvd + g * hd;
            int n = nk - j0 < BS ? nk - j0 : BS;
            for (int j = 0; j < n; j++) {
                float p = s[j0 + j];
                const float *vr = vb + (long)j * kvd;
                for (int d = 0; d < hd; d++) acc[d] = fmaf(p, vr[d], acc[d]);
            }
        }
        float *o = out + (long)r * ldo + h * hd;
        for (int d = 0; d < hd; d++) o[d] = acc[d] * inv;
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void att_avx512(float *out, int ldo, const float *q, int ldq, int r, int g,
                                                          const int32_t *pos, const int32_t *tb, const float *kc,
                                                          const float *vc, int grp, int nkv, int hd, float scale,
                                                          float *sbase, long ctx_max) {
    int nk = pos[r] + 1, kvd = nkv * hd, G = grp % 4 == 0 ? 4 : grp % 2 == 0 ? 2 : 1;
    for (int h0 = 0; h0 < grp; h0 += G) {
        int h = g * grp + h0;
        const float *qh = q + (long)r * ldq + (long)h * hd;
        float mx[4] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY }, inv[4];
        if (G == 4) att_scores16(4, sbase, ctx_max, qh, tb, kc, g, nk, nkv, hd, scale, mx);
        else if (G == 2) att_scores16(2, sbase, ctx_max, qh, tb, kc, g, nk, nkv, hd, scale, mx);
        else att_scores16(1, sbase, ctx_max, qh, tb, kc, g, nk, nkv, hd, scale, mx);
        for (int i = 0; i < G; i++) inv[i] = att_exp(sbase + (long)i * ctx_max, nk, mx[i]);
        for (int d0 = 0; d0 < hd;) {
            float tmp[4][64];
            int NV = hd - d0 >= 64 ? 4 : 1;
            if (G == 4 && NV == 4) att_pv16(4, 4, &tmp[0][0], sbase, ctx_max, tb, vc + g * hd, 0, d0, nk, kvd);
            else if (G == 4) att_pv16(4, 1, &tmp[0][0], sbase, ctx_max, tb, vc + g * hd, 0, d0, nk, kvd);
            else if (G == 2 && NV == 4) att_pv16(2, 4, &tmp[0][0], sbase, ctx_max, tb, vc + g * hd, 0, d0, nk, kvd);
            else if (G == 2) att_pv16(2, 1, &tmp[0][0], sbase, ctx_max, tb, vc + g * hd, 0, d0, nk, kvd);
            else if (NV == 4) att_pv16(1, 4, &tmp[0][0], sbase, ctx_max, tb, vc + g * hd, 0, d0, nk, kvd);
            else att_pv16(1, 1, &tmp[0][0], sbase, ctx_max, tb, vc + g * hd, 0, d0, nk, kvd);
            for (int i = 0; i < G; i++) {
                float *o = out + (long)r * ldo + (long)(h + i) * hd + d0;
                for (int d = 0; d < 16 * NV; d++) o[d] = tmp[i][d] * inv[i];
            }
            d0 += 16 * NV;
        }
    }
}
#endif

void cpu_paged_attention(float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                         const int32_t *const *table, const float *kc, const float *vc, int BS, int nh, int nkv,
                         int hd, float scale, float *scratch, long ctx_max) {
    if (R <= 0) return;
    int grp = nh / nkv, ntask = R * nkv, fast = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    fast = BS == 16 && hd % 16 == 0 && __builtin_cpu_supports("avx512f");
#endif
    long work = 0;
    for (int r = 0; r < R; r++) work += pos[r] + 1;
#pragma omp parallel if (work * nh * hd >= PAR_MIN_MACS)
    {
        float *sbase = scratch + (long)omp_get_thread_num() * grp * ctx_max;
#pragma omp for schedule(dynamic, 2)
        for (int t = 0; t < ntask; t++) {
            int r = t / nkv, g = t % nkv;
#if defined(__x86_64__)
            if (fast) {
                att_avx512(out, ldo, q, ldq, r, g, pos, table[r], kc, vc, grp, nkv, hd, scale, sbase, ctx_max);
                continue;
            }
#endif
            att_generic(out, ldo, q, ldq, r, g, pos, table[r], kc, vc, BS, grp, nkv, hd, scale, sbase, ctx_max);
        }
    }
}

/* ------------------------------------------------------------------------------------ packed linear */
#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

long cpu_pack_floats(int N, int K) { return (long)((N + CPU_PACK_COLS - 1) / CPU_PACK_COLS) * CPU_PACK_COLS * K; }

void cpu_pack_weights(float *dst, const float *w, int N, int K) {
    int nb = (N + CPU_PACK_COLS - 1) / CPU_PACK_COLS;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++)
        for (int k = 0; k < K; k++) {
            float *d = dst + ((long)b * K + k) * CPU_PACK_COLS;
            for (int j = 0; j < CPU_PACK_COLS; j++) {
                int n = b * CPU_PACK_COLS + j;
                d[j] = n < N ? w[(long)n * K + k] : 0.0f;
            }
        }
}

static inline __attribute__((always_inline)) void tile_store(float *y, int ldy, const float *acc, int ncols,
                                                             const float *b) {
    for (int j = 0; j < ncols; j++) y[j] = b ? acc[j] + b[j] : acc[j];
    (void)ldy;
}

#if HAVE_X86
/* MR rows x 32 columns; MR is a compile-time constant after inlining so the accumulators live in registers. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
tile_avx512(const int MR, const float *x, int K, const float *wp, float *y, int ldy, const float *b, int ncols) {
    __m512 a0[8], a1[8];
    for (int r = 0; r < MR; r++) { a0[r] = _mm512_setzero_ps(); a1[r] = _mm512_setzero_ps(); }
    for (int k = 0; k < K; k++) {
        __m512 w0 = _mm512_loadu_ps(wp + (long)k * 32), w1 = _mm512_loadu_ps(wp + (long)k * 32 + 16);
        for (int r = 0; r < MR; r++) {
            __m512 xv = _mm512_set1_ps(x[(long)r * K + k]);
            a0[r] = _mm512_fmadd_ps(xv, w0, a0[r]);
            a1[r] = _mm512_fmadd_ps(xv, w1, a1[r]);
        }
    }
    for (int r = 0; r < MR; r++) {
        float acc[32];
        _mm512_storeu_ps(acc, a0[r]);
        _mm512_storeu_ps(acc + 16, a1[r]);
        tile_store(y + (long)r * ldy, ldy, acc, ncols, b);
    }
}

__attribute__((target("avx512f"))) static void panel_avx512(const float *x, int M, int K, const float *wp, float *y,
                                                             int ldy, const float *b, int ncols) {
    int m = 0;
    for (; m + 8 <= M; m += 8) tile_avx512(8, x + (long)m * K, K, wp, y + (long)m * ldy, ldy, b, ncols);
    int left = M - m;
    const float *xm = x + (long)m * K;
    float *ym = y + (long)m * ldy;
    if (left >= 4) { tile_avx512(4, xm, K, wp, ym, ldy, b, ncols); xm += 4L * K; ym += 4L * ldy; left -= 4; }
    if (left >= 2) { tile_avx512(2, xm, K, wp, ym, ldy, b, ncols); xm += 2L * K; ym += 2L * ldy; left -= 2; }
    if (left >= 1) tile_avx512(1, xm, K, wp, ym, ldy, b, ncols);
}
#endif

HOT static void panel_generic(const float *x, int M, int K, const float *wp, float *y, int ldy, const float *b, int ncols) {
    for (int m = 0; m < M; m++) {
        float acc[32] = { 0 };
        const float *xr = x + (long)m * K;
        for (int k = 0; k < K; k++) {
            const float *w = wp + (long)k * 32;
            float xv = xr[k];
            for (int j = 0; j < 32; j++) acc[j] = fmaf(xv, w[j], acc[j]);
        }
        tile_store(y + (long)m * ldy, ldy, acc, ncols, b);
    }
}

void cpu_linear_packed(float *y, const float *x, const float *wp, const float *b, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    static int avx512 = -1;
    if (avx512 < 0) {
#if HAVE_X86
        __builtin_cpu_init();
        avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
#else
        avx512 = 0;
#endif
    }
    int nb = (N + CPU_PACK_COLS - 1) / CPU_PACK_COLS;
#pragma omp parallel for schedule(static) if ((long)M * N * K >= PAR_MIN_MACS)
    for (int p = 0; p < nb; p++) {
        int n0 = p * CPU_PACK_COLS, ncols = N - n0 < CPU_PACK_COLS ? N - n0 : CPU_PACK_COLS;
        const float *wp_p = wp + (long)p * K * CPU_PACK_COLS;
        const float *bp = b ? b + n0 : NULL;
#if HAVE_X86
        if (avx512) { panel_avx512(x, M, K, wp_p, y + n0, N, bp, ncols); continue; }
#endif
        panel_generic(x, M, K, wp_p, y + n0, N, bp, ncols);
    }
}
