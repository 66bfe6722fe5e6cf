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

static void panel_generic(const float *x, int M, int K, const float *wp, float *y, int ldy, const float *b, int ncols) {
    for (int m = 0; m < M; m++) {
        float acc[32] = { 0 };
        const float *xr = x + (long)m * K;
        for (int k = 0; k < K; k++) {
            const float *w = wp + (long)k * 32;
            float xv = xr[k];
            for (int j = 0; j < 32; j++) acc[j] += xv * w[j];
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
#pragma omp parallel for schedule(static) if ((long)M * N * K >= 262144)
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
