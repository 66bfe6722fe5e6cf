/* common/backend/cpu/cpu_decode.c: paged-KV attention and the batch-invariant packed linear (the rollout engine's
 * decode and every product of model_forward; see cpu_decode.h for the formulas and the fixed reduction orders).
 * Hot loops: explicit AVX-512 intrinsics (fused multiply-add chains) where the CPU has AVX-512, else plain C with
 * fmaf in the same order; compiled at O3 with AVX-512/AVX2 clones like cpu_ops.c, no -ffast-math and no implicit FP
 * contraction (-std=c11), so the order written here is the order executed.
 * Not here: dense attention for training (cpu_ops.c), cache allocation (model/generate.c). */
#pragma GCC optimize("O3")
#include "backend/cpu/cpu_family_names.h"   /* built once per kernel family (cpu_family.h): names get its suffix */
#include "backend/cpu/cpu_decode.h"

#include <math.h>
#include <omp.h>
#include <sched.h>
#include <string.h>

#define HOT                /* the family's build flags choose the instructions (Makefile: FAM_FLAGS_<family>) */
#ifndef CPU_FAM_LEVEL
#define CPU_FAM_LEVEL 0
#endif
#if defined(__x86_64__) && CPU_FAM_LEVEL >= 2
#define HAVE_AVX512 1      /* the AVX-512 intrinsic kernels (the avx512 family's build) */
#else
#define HAVE_AVX512 0
#endif
#if defined(__x86_64__) && CPU_FAM_LEVEL == 1
#define HAVE_AVX2 1        /* the AVX2 + FMA panel kernel (the avx2 family's build) */
#else
#define HAVE_AVX2 0
#endif

/* Work (multiply-adds) below which a kernel stays on the calling thread: waking the OpenMP team costs tens of
 * microseconds (more on a loaded machine) and decode steps are many small kernels. */
#define PAR_MIN_MACS 4000000L

#include "core/dtype.h"
#include "core/fexp.h"
#include "core/err.h"        /* xmalloc */

void cpu_kv_store(float *kc, float *vc, const int32_t *table, int p, const float *k, const float *v, int BS, int nkv,
                  int hd) {
    long b = table[p / BS];
    int o = p % BS, kvd = nkv * hd;
    float *kb = kc + b * (long)kvd * BS;
    for (int i = 0; i < kvd; i++) kb[(long)i * BS + o] = k[i];
    memcpy(vc + (b * BS + o) * (long)kvd, v, (size_t)kvd * sizeof(float));
}

void cpu_kv_store_bf16(uint16_t *kc, uint16_t *vc, const int32_t *table, int p, const float *k, const float *v, int BS,
                       int nkv, int hd) {
    long b = table[p / BS];
    int o = p % BS, kvd = nkv * hd;
    uint16_t *kb = kc + b * (long)kvd * BS;
    for (int i = 0; i < kvd; i++) kb[(long)i * BS + o] = dtype_bf16_from_f32(k[i]);
    dtype_bf16_from_f32_n(vc + (b * BS + o) * (long)kvd, v, kvd);
}

/* element i of a cache array of fp32 (BF 0) or bf16 (BF 1, widened exactly: a 16-bit shift) */
static inline __attribute__((always_inline)) float kv_at(const void *c, long i, const int BF) {
    if (!BF) return ((const float *)c)[i];
    uint32_t u = (uint32_t)((const uint16_t *)c)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* c + i elements */
static inline __attribute__((always_inline)) const void *kv_off(const void *c, long i, const int BF) {
    return BF ? (const void *)((const uint16_t *)c + i) : (const void *)((const float *)c + i);
}

/* scores of one query head against keys [0, nk) of one kv head: s[j] = (q . k_j) * scale, returns max */
static inline __attribute__((always_inline)) float head_scores(const int BF, float *s, const float *qh,
                                                               const int32_t *tb, const void *kc, int g, int nk,
                                                               int BS, int nkv, int hd, float scale) {
    float mx = -INFINITY;
    float acc[64];
    for (int j0 = 0, bi = 0; j0 < nk; j0 += BS, bi++) {
        const void *kb = kv_off(kc, ((long)tb[bi] * nkv + g) * hd * BS, BF);
        int n = nk - j0 < BS ? nk - j0 : BS;
        for (int c0 = 0; c0 < n; c0 += 64) {            /* BS may exceed 64: columns in slices */
            int w = n - c0 < 64 ? n - c0 : 64;
            for (int j = 0; j < w; j++) acc[j] = 0.0f;
            for (int d = 0; d < hd; d++) {
                float qd = qh[d];
                const void *kr = kv_off(kb, (long)d * BS + c0, BF);
                for (int j = 0; j < w; j++) acc[j] = fmaf(qd, kv_at(kr, j, BF), acc[j]);
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

#if HAVE_AVX512
#include <immintrin.h>
/* 16 fp32 lanes from wp + i elements: fp32 (BF 0) or bf16 (BF 1: widened exactly, a 16-bit shift) */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512 ldw16(const void *wp, long i,
                                                                                           const int BF) {
    if (!BF) return _mm512_loadu_ps((const float *)wp + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)wp + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* AVX-512 attention for block_tokens == 16 and hd % 16 == 0: G query heads of one kv head at once (G
 * independent FMA chains hide the latency), scores of a block = one vector FMA chain over d per head,
 * p.V with G x NV vector accumulators per 16 * NV columns. Same per-row order whatever the batch. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
att_scores16(const int G, const int BF, float *s, long sstride, const float *q, const int32_t *tb, const void *kc, int g,
             int nk, int nkv, int hd, float scale, float *mx) {
    for (int j0 = 0, bi = 0; j0 < nk; j0 += 16, bi++) {
        const void *kb = kv_off(kc, ((long)tb[bi] * nkv + g) * hd * 16, BF);
        __m512 a[4];
        for (int h = 0; h < G; h++) a[h] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            __m512 kv = ldw16(kb, (long)d * 16, BF);
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
att_pv16(const int G, const int NV, const int BF, float *o, const float *s, long sstride, const int32_t *tb,
         const void *vc, int g, int d0, int nk, int kvd) {
    (void)g;
    __m512 a[4][4];
    for (int h = 0; h < G; h++)
        for (int v = 0; v < NV; v++) a[h][v] = _mm512_setzero_ps();
    for (int j0 = 0, bi = 0; j0 < nk; j0 += 16, bi++) {
        const void *vb = kv_off(vc, (long)tb[bi] * 16 * kvd + d0, BF);
        int n = nk - j0 < 16 ? nk - j0 : 16;
        for (int j = 0; j < n; j++) {
            __m512 vv[4];
            for (int v = 0; v < NV; v++) vv[v] = ldw16(vb, (long)j * kvd + 16 * v, BF);
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

static inline __attribute__((always_inline)) void att_generic(const int BF, float *out, int ldo, const float *q,
                                                              int ldq, int r, int g, const int32_t *pos,
                                                              const int32_t *tb, const void *kc, const void *vc, int BS,
                                                              int grp, int nkv, int hd, float scale, float *sbase,
                                                              long ctx_max) {
    int nk = pos[r] + 1, kvd = nkv * hd;
    float acc[512];
    for (int hh = 0; hh < grp; hh++) {
        int h = g * grp + hh;
        float *s = sbase + (long)hh * ctx_max;
        float mx = head_scores(BF, s, q + (long)r * ldq + h * hd, tb, kc, g, nk, BS, nkv, hd, scale);
        float inv = att_exp(s, nk, mx);
        for (int d = 0; d < hd; d++) acc[d] = 0.0f;
        for (int j0 = 0, bi = 0; j0 < nk; j0 += BS, bi++) {
            const void *vb = kv_off(vc, (long)tb[bi] * BS * kvd + g * hd, BF);
            int n = nk - j0 < BS ? nk - j0 : BS;
            for (int j = 0; j < n; j++) {
                float p = s[j0 + j];
                const void *vr = kv_off(vb, (long)j * kvd, BF);
                for (int d = 0; d < hd; d++) acc[d] = fmaf(p, kv_at(vr, d, BF), acc[d]);
            }
        }
        float *o = out + (long)r * ldo + h * hd;
        for (int d = 0; d < hd; d++) o[d] = acc[d] * inv;
    }
}
HOT static void att_generic_f32(float *out, int ldo, const float *q, int ldq, int r, int g, const int32_t *pos,
                                const int32_t *tb, const void *kc, const void *vc, int BS, int grp, int nkv, int hd,
                                float scale, float *sbase, long ctx_max) {
    att_generic(0, out, ldo, q, ldq, r, g, pos, tb, kc, vc, BS, grp, nkv, hd, scale, sbase, ctx_max);
}
HOT static void att_generic_bf16(float *out, int ldo, const float *q, int ldq, int r, int g, const int32_t *pos,
                                 const int32_t *tb, const void *kc, const void *vc, int BS, int grp, int nkv, int hd,
                                 float scale, float *sbase, long ctx_max) {
    att_generic(1, out, ldo, q, ldq, r, g, pos, tb, kc, vc, BS, grp, nkv, hd, scale, sbase, ctx_max);
}

#if HAVE_AVX512
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
att_avx512(const int BF, float *out, int ldo, const float *q, int ldq, int r, int g, const int32_t *pos,
           const int32_t *tb, const void *kc, const void *vc, int grp, int nkv, int hd, float scale, float *sbase,
           long ctx_max) {
    int nk = pos[r] + 1, kvd = nkv * hd, G = grp % 4 == 0 ? 4 : grp % 2 == 0 ? 2 : 1;
    for (int h0 = 0; h0 < grp; h0 += G) {
        int h = g * grp + h0;
        const float *qh = q + (long)r * ldq + (long)h * hd;
        float mx[4] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY }, inv[4];
        if (G == 4) att_scores16(4, BF, sbase, ctx_max, qh, tb, kc, g, nk, nkv, hd, scale, mx);
        else if (G == 2) att_scores16(2, BF, sbase, ctx_max, qh, tb, kc, g, nk, nkv, hd, scale, mx);
        else att_scores16(1, BF, sbase, ctx_max, qh, tb, kc, g, nk, nkv, hd, scale, mx);
        for (int i = 0; i < G; i++) inv[i] = att_exp(sbase + (long)i * ctx_max, nk, mx[i]);
        for (int d0 = 0; d0 < hd;) {
            float tmp[4][64];
            int NV = hd - d0 >= 64 ? 4 : 1;
            if (G == 4 && NV == 4) att_pv16(4, 4, BF, &tmp[0][0], sbase, ctx_max, tb, kv_off(vc, (long)g * hd, BF), 0, d0, nk, kvd);
            else if (G == 4) att_pv16(4, 1, BF, &tmp[0][0], sbase, ctx_max, tb, kv_off(vc, (long)g * hd, BF), 0, d0, nk, kvd);
            else if (G == 2 && NV == 4) att_pv16(2, 4, BF, &tmp[0][0], sbase, ctx_max, tb, kv_off(vc, (long)g * hd, BF), 0, d0, nk, kvd);
            else if (G == 2) att_pv16(2, 1, BF, &tmp[0][0], sbase, ctx_max, tb, kv_off(vc, (long)g * hd, BF), 0, d0, nk, kvd);
            else if (NV == 4) att_pv16(1, 4, BF, &tmp[0][0], sbase, ctx_max, tb, kv_off(vc, (long)g * hd, BF), 0, d0, nk, kvd);
            else att_pv16(1, 1, BF, &tmp[0][0], sbase, ctx_max, tb, kv_off(vc, (long)g * hd, BF), 0, d0, nk, kvd);
            for (int i = 0; i < G; i++) {
                float *o = out + (long)r * ldo + (long)(h + i) * hd + d0;
                for (int d = 0; d < 16 * NV; d++) o[d] = tmp[i][d] * inv[i];
            }
            d0 += 16 * NV;
        }
    }
}
__attribute__((target("avx512f"))) static void att_avx512_f32(float *out, int ldo, const float *q, int ldq, int r,
                                                              int g, const int32_t *pos, const int32_t *tb,
                                                              const void *kc, const void *vc, int grp, int nkv, int hd,
                                                              float scale, float *sbase, long ctx_max) {
    att_avx512(0, out, ldo, q, ldq, r, g, pos, tb, kc, vc, grp, nkv, hd, scale, sbase, ctx_max);
}
__attribute__((target("avx512f"))) static void att_avx512_bf16(float *out, int ldo, const float *q, int ldq, int r,
                                                               int g, const int32_t *pos, const int32_t *tb,
                                                               const void *kc, const void *vc, int grp, int nkv, int hd,
                                                               float scale, float *sbase, long ctx_max) {
    att_avx512(1, out, ldo, q, ldq, r, g, pos, tb, kc, vc, grp, nkv, hd, scale, sbase, ctx_max);
}
#endif

/* cpu_paged_attention over a cache of fp32 (bf 0) or bf16 (bf 1) elements */
static void paged_attention(float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                            const int32_t *const *table, const void *kc, const void *vc, int bf, int BS, int nh,
                            int nkv, int hd, float scale, float *scratch, long ctx_max) {
    if (R <= 0) return;
    int grp = nh / nkv, ntask = R * nkv, fast = HAVE_AVX512 && BS == 16 && hd % 16 == 0;
    (void)fast;                                       /* read only by the AVX-512 build */
    long work = 0;
    for (int r = 0; r < R; r++) work += pos[r] + 1;
#pragma omp parallel if (work * nh * hd >= PAR_MIN_MACS)
    {
        float *sbase = scratch + (long)omp_get_thread_num() * grp * ctx_max;
#pragma omp for schedule(dynamic, 2)
        for (int t = 0; t < ntask; t++) {
            int r = t / nkv, g = t % nkv;
#if HAVE_AVX512
            if (fast) {
                (bf ? att_avx512_bf16 : att_avx512_f32)(out, ldo, q, ldq, r, g, pos, table[r], kc, vc, grp, nkv, hd,
                                                        scale, sbase, ctx_max);
                continue;
            }
#endif
            (bf ? att_generic_bf16 : att_generic_f32)(out, ldo, q, ldq, r, g, pos, table[r], kc, vc, BS, grp, nkv, hd,
                                                      scale, sbase, ctx_max);
        }
    }
}

void cpu_paged_attention(float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                         const int32_t *const *table, const float *kc, const float *vc, int BS, int nh, int nkv,
                         int hd, float scale, float *scratch, long ctx_max) {
    paged_attention(out, ldo, q, ldq, R, pos, table, kc, vc, 0, BS, nh, nkv, hd, scale, scratch, ctx_max);
}

void cpu_paged_attention_bf16(float *out, int ldo, const float *q, int ldq, int R, const int32_t *pos,
                              const int32_t *const *table, const uint16_t *kc, const uint16_t *vc, int BS, int nh,
                              int nkv, int hd, float scale, float *scratch, long ctx_max) {
    paged_attention(out, ldo, q, ldq, R, pos, table, kc, vc, 1, BS, nh, nkv, hd, scale, scratch, ctx_max);
}

/* ------------------------------------------------------------------------------------ packed linear */
#if HAVE_AVX512 || HAVE_AVX2
#include <immintrin.h>
#endif
#define HAVE_X86 HAVE_AVX512                  /* below: the AVX-512 kernels of this family's build */

#if CPU_FAM_LEVEL == 0                         /* family-independent: defined once, by the generic build */
long cpu_pack_floats(int N, int K) { return (long)((N + CPU_PACK_COLS - 1) / CPU_PACK_COLS) * CPU_PACK_COLS * K; }
long cpu_pack_floats_glu(int I, int K) { return (long)((I + 15) / 16) * CPU_PACK_COLS * K; }
#endif

static int pk_avx512(void) { return HAVE_AVX512; }

#if HAVE_X86
/* One 16 x 16 block of the packing: rows w[i * ldw + k] (i < rows, k < kn; zeros elsewhere) go to
 * d[k * CPU_PACK_COLS + i]. Transposed in registers in four vpermt2ps stages (stage b swaps bit b of the lane with
 * bit b of the register index): the plain loop gathers one float per cache line and costs ~5% of a prefill GEMM. */
__attribute__((target("avx512f"))) static void pack_block16(float *d, const float *w, long ldw, int rows, int kn) {
    static const int32_t idx[4][2][16] = {
        { { 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30 },
          { 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31 } },
        { { 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29 },
          { 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31 } },
        { { 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27 },
          { 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31 } },
        { { 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23 },
          { 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31 } },
    };
    __m512 r[16];
    __mmask16 km = kn >= 16 ? 0xFFFF : (__mmask16)((1u << kn) - 1u);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_maskz_loadu_ps(km, w + (long)i * ldw) : _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int b = 0; b < 4; b++) {          /* fully unrolled so r[] stays in the 32 vector registers */
        int st = 1 << b;
        __m512i il = _mm512_loadu_si512(idx[b][0]), ih = _mm512_loadu_si512(idx[b][1]);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            if (!(i & st)) {
                __m512 a = r[i], c = r[i | st];
                r[i] = _mm512_permutex2var_ps(a, il, c);
                r[i | st] = _mm512_permutex2var_ps(a, ih, c);
            }
    }
    if (kn == 16) {
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) _mm512_storeu_ps(d + (long)k * CPU_PACK_COLS, r[k]);
        return;
    }
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++)
        if (k < kn) _mm512_storeu_ps(d + (long)k * CPU_PACK_COLS, r[k]);
}
#endif

/* Panel p's half h (16 weight rows each; rows past the matrix are zeros): the plain layout takes rows 32p + 16h ..;
 * the GLU layout (w = [gate; up], N = I rows each) gate rows 16p .. for h = 0 and up rows I + 16p .. for h = 1.
 * Returns the half's first row, *cnt its rows (0..16). */
static int panel_half(int glu, int N, int p, int h, int *cnt) {
    int base = glu ? 16 * p : 32 * p + 16 * h, c = N - base < 16 ? N - base : 16;
    *cnt = c > 0 ? c : 0;
    return glu && h ? N + base : base;
}

/* Panel b of the packing (see panel_half) into d (its K x CPU_PACK_COLS floats), on the calling thread. */
static void pack_panel(float *d, const float *w, int N, int K, int glu, int b, int avx512) {
    (void)avx512;
#if HAVE_X86
    if (avx512) {
        for (int k0 = 0; k0 < K; k0 += 16)
            for (int h = 0; h < 2; h++) {
                int cnt, r0 = panel_half(glu, N, b, h, &cnt), kn = K - k0 < 16 ? K - k0 : 16;
                pack_block16(d + (long)k0 * CPU_PACK_COLS + 16 * h, cnt ? w + (long)r0 * K + k0 : w, K, cnt, kn);
            }
        return;
    }
#endif
    for (int h = 0; h < 2; h++) {
        int cnt, r0 = panel_half(glu, N, b, h, &cnt);
        for (int k = 0; k < K; k++) {
            float *dk = d + (long)k * CPU_PACK_COLS + 16 * h;
            for (int j = 0; j < 16; j++) dk[j] = j < cnt ? w[(long)(r0 + j) * K + k] : 0.0f;
        }
    }
}

/* Panels [p0, p1) of the packing, on the calling thread. */
static void pack_panels(float *dst, const float *w, int N, int K, int glu, int p0, int p1, int avx512) {
    for (int b = p0; b < p1; b++) pack_panel(dst + (long)b * K * CPU_PACK_COLS, w, N, K, glu, b, avx512);
}

static void pack_any(float *dst, const float *w, int N, int K, int glu) {
    int nb = glu ? (N + 15) / 16 : (N + CPU_PACK_COLS - 1) / CPU_PACK_COLS, avx512 = pk_avx512();
#pragma omp parallel for schedule(static) if ((long)N * K >= 65536)
    for (int b = 0; b < nb; b++) pack_panels(dst, w, N, K, glu, b, b + 1, avx512);
}

void cpu_pack_weights(float *dst, const float *w, int N, int K) { pack_any(dst, w, N, K, 0); }


void cpu_pack_weights_glu(float *dst, const float *w, int I, int K) { pack_any(dst, w, I, K, 1); }

void cpu_pack_weights_bf16(uint16_t *dst, const float *w, int N, int K) {
    int nb = (N + CPU_PACK_COLS - 1) / CPU_PACK_COLS, avx512 = pk_avx512();
    long per = (long)K * CPU_PACK_COLS;
#pragma omp parallel if ((long)N * K >= 65536)
    {
        float *tmp = xmalloc((size_t)per * sizeof(float));   /* one fp32 panel, rounded into dst */
#pragma omp for schedule(static)
        for (int b = 0; b < nb; b++) {
            pack_panel(tmp, w, N, K, 0, b, avx512);
            dtype_bf16_from_f32_n(dst + (long)b * per, tmp, per);
        }
        xfree(tmp);
    }
}

/* Cache blocking of cpu_linear_packed. A task (a run of column panels, or of rows when there are fewer panels than
 * threads) walks row blocks of PK_MC rows, then K blocks of at most PK_KC (K split evenly), then its panels, then
 * 8-row tiles: a panel's K block streams from L2 while the row block's x stays in L1/L2 across the panels. Between
 * K blocks a tile's accumulators go through y (stored and reloaded exactly), so each element is still ONE fused
 * multiply-add chain over k = 0 .. K-1 in order: the blocking never changes a result. Measured on the 2-core AMD
 * EPYC (Zen 4) dev machine, one thread, M = 2048: K blocks of 128-384 cost 3-10% against none (y traffic), row
 * blocks of 64-256 are best; so K is split only beyond 1536 (a 192 KiB panel block, within L2). */
#define PK_KC 1536
#define PK_MC 128

#if HAVE_X86
/* fexp (core/fexp.h) on 16 lanes with the same operations in the same order (multiplies and adds kept separate, as
 * this file compiles without FP contraction), so it is bitwise the scalar fexp. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512 fexp16(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
    r = _mm512_add_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(2.12194440e-4f)));
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* MR rows x 32 columns over k in [0, kc) of the tile's K block; MR is a compile-time constant after inlining so the
 * accumulators live in registers. Columns 0..15 of the tile are y[0..15], columns 16..31 are y[hoff .. hoff + 15]
 * (hoff = 16: contiguous; the GLU layout puts the up half I columns after the gate half); m0 / m1 mask the valid
 * columns of each half. load: start from y (a previous K block, or the += form), else from 0. b: added after the
 * last K block, indexed like y (NULL: none). h (GLU layout, last K block): also h[r * ldh + j] = silu(gate) * up of
 * the tile's registers, glu_rows' formula bitwise. */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
tile_avx512(const int MR, const int BF, const float *x, int ldx, int kc, const void *wp, float *y, long ldy, long hoff,
            const float *b, __mmask16 m0, __mmask16 m1, int load, float *h, long ldh) {
    __m512 a0[8], a1[8];
    for (int r = 0; r < MR; r++) {
        if (load) {
            a0[r] = _mm512_maskz_loadu_ps(m0, y + (long)r * ldy);
            a1[r] = _mm512_maskz_loadu_ps(m1, y + (long)r * ldy + hoff);
        } else {
            a0[r] = _mm512_setzero_ps();
            a1[r] = _mm512_setzero_ps();
        }
    }
    for (int k = 0; k < kc; k++) {
        __m512 w0 = ldw16(wp, (long)k * 32, BF), w1 = ldw16(wp, (long)k * 32 + 16, BF);
        for (int r = 0; r < MR; r++) {
            __m512 xv = _mm512_set1_ps(x[(long)r * ldx + k]);
            a0[r] = _mm512_fmadd_ps(xv, w0, a0[r]);
            a1[r] = _mm512_fmadd_ps(xv, w1, a1[r]);
        }
    }
    if (b) {
        __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + hoff);
        for (int r = 0; r < MR; r++) {
            a0[r] = _mm512_add_ps(a0[r], b0);
            a1[r] = _mm512_add_ps(a1[r], b1);
        }
    }
    for (int r = 0; r < MR; r++) {
        _mm512_mask_storeu_ps(y + (long)r * ldy, m0, a0[r]);
        _mm512_mask_storeu_ps(y + (long)r * ldy + hoff, m1, a1[r]);
    }
    if (h)
        for (int r = 0; r < MR; r++) {
            __m512 e = fexp16(_mm512_sub_ps(_mm512_setzero_ps(), a0[r]));
            __m512 v = _mm512_mul_ps(_mm512_div_ps(a0[r], _mm512_add_ps(_mm512_set1_ps(1.0f), e)), a1[r]);
            _mm512_mask_storeu_ps(h + (long)r * ldh, m0, v);
        }
}

/* rows [0, M) of one panel's K block (see tile_avx512); n0 / n1: valid columns of the two halves; BF: wp holds bf16 */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
panel_avx512(const int BF, const float *x, int ldx, int M, int kc, const void *wp, float *y, long ldy, long hoff,
             const float *b, int n0, int n1, int load, float *h, long ldh) {
    __mmask16 m0 = (__mmask16)((1u << n0) - 1u), m1 = (__mmask16)((1u << n1) - 1u);
    int m = 0;
    for (; m + 8 <= M; m += 8)
        tile_avx512(8, BF, x + (long)m * ldx, ldx, kc, wp, y + (long)m * ldy, ldy, hoff, b, m0, m1, load,
                    h ? h + (long)m * ldh : NULL, ldh);
    int left = M - m;
    const float *xm = x + (long)m * ldx;
    float *ym = y + (long)m * ldy, *hm = h ? h + (long)m * ldh : NULL;
    if (left >= 4) {
        tile_avx512(4, BF, xm, ldx, kc, wp, ym, ldy, hoff, b, m0, m1, load, hm, ldh);
        xm += 4L * ldx; ym += 4L * ldy; hm = hm ? hm + 4L * ldh : NULL; left -= 4;
    }
    if (left >= 2) {
        tile_avx512(2, BF, xm, ldx, kc, wp, ym, ldy, hoff, b, m0, m1, load, hm, ldh);
        xm += 2L * ldx; ym += 2L * ldy; hm = hm ? hm + 2L * ldh : NULL; left -= 2;
    }
    if (left >= 1) tile_avx512(1, BF, xm, ldx, kc, wp, ym, ldy, hoff, b, m0, m1, load, hm, ldh);
}
__attribute__((target("avx512f"))) static void panel_avx512_f32(const float *x, int ldx, int M, int kc, const void *wp,
                                                                 float *y, long ldy, long hoff, const float *b, int n0,
                                                                 int n1, int load, float *h, long ldh) {
    panel_avx512(0, x, ldx, M, kc, wp, y, ldy, hoff, b, n0, n1, load, h, ldh);
}
__attribute__((target("avx512f"))) static void panel_avx512_bf16(const float *x, int ldx, int M, int kc, const void *wp,
                                                                  float *y, long ldy, long hoff, const float *b, int n0,
                                                                  int n1, int load, float *h, long ldh) {
    panel_avx512(1, x, ldx, M, kc, wp, y, ldy, hoff, b, n0, n1, load, h, ldh);
}
#endif

#if HAVE_AVX2
/* AVX2 + FMA: MR rows x the 16 columns of one half of a panel (two 8-lane registers a row: MR = 6 keeps 12
 * accumulators, 2 weight registers and the broadcast within the 16), over k in [0, kc); n: the half's valid columns.
 * Each output is one FMA chain in k order from its start (0, or y when load), the bias added after: bitwise
 * panel_generic's and panel_avx512's result. w: the half's weights (row stride 32 floats of the packing). */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) __m256 ldw8(const void *w, long i,
                                                                                          const int BF) {
    if (!BF) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));   /* bf16 -> fp32: a 16-bit shift */
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
tile_avx2(const int MR, const int BF, const float *x, int ldx, int kc, const void *w, float *y, long ldy,
          const float *b, __m256i k0, __m256i k1, int load) {
    __m256 a0[6], a1[6];
    for (int r = 0; r < MR; r++) {
        a0[r] = load ? _mm256_maskload_ps(y + (long)r * ldy, k0) : _mm256_setzero_ps();
        a1[r] = load ? _mm256_maskload_ps(y + (long)r * ldy + 8, k1) : _mm256_setzero_ps();
    }
    for (int k = 0; k < kc; k++) {
        __m256 w0 = ldw8(w, (long)k * 32, BF), w1 = ldw8(w, (long)k * 32 + 8, BF);
        for (int r = 0; r < MR; r++) {
            __m256 xv = _mm256_broadcast_ss(x + (long)r * ldx + k);
            a0[r] = _mm256_fmadd_ps(xv, w0, a0[r]);
            a1[r] = _mm256_fmadd_ps(xv, w1, a1[r]);
        }
    }
    if (b) {
        __m256 b0 = _mm256_maskload_ps(b, k0), b1 = _mm256_maskload_ps(b + 8, k1);
        for (int r = 0; r < MR; r++) {
            a0[r] = _mm256_add_ps(a0[r], b0);
            a1[r] = _mm256_add_ps(a1[r], b1);
        }
    }
    for (int r = 0; r < MR; r++) {
        _mm256_maskstore_ps(y + (long)r * ldy, k0, a0[r]);
        _mm256_maskstore_ps(y + (long)r * ldy + 8, k1, a1[r]);
    }
}

/* lanes [off, off + 8) of a half with n valid columns, as a maskload / maskstore mask */
__attribute__((target("avx2"))) static inline __m256i half_mask(int n, int off) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - off), lane);
}

/* panel_generic's contract on AVX2 + FMA: each half (columns 0..15 at y, 16..31 at y + hoff) in row tiles of 6;
 * BF: wp holds bf16 */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
panel_avx2(const int BF, const float *x, int ldx, int M, int kc, const void *wp, float *y, long ldy, long hoff,
           const float *b, int n0, int n1, int load) {
    for (int half = 0; half < 2; half++) {
        int n = half ? n1 : n0;
        if (n <= 0) continue;
        const void *w = BF ? (const void *)((const uint16_t *)wp + 16 * half) : (const void *)((const float *)wp + 16 * half);
        const float *bh = b ? b + (half ? hoff : 0) : NULL;
        float *yh = y + (half ? hoff : 0);
        __m256i k0 = half_mask(n, 0), k1 = half_mask(n, 8);
        int m = 0;
        for (; m + 6 <= M; m += 6) tile_avx2(6, BF, x + (long)m * ldx, ldx, kc, w, yh + (long)m * ldy, ldy, bh, k0, k1, load);
        const float *xm = x + (long)m * ldx;
        float *ym = yh + (long)m * ldy;
        switch (M - m) {
        case 5: tile_avx2(5, BF, xm, ldx, kc, w, ym, ldy, bh, k0, k1, load); break;
        case 4: tile_avx2(4, BF, xm, ldx, kc, w, ym, ldy, bh, k0, k1, load); break;
        case 3: tile_avx2(3, BF, xm, ldx, kc, w, ym, ldy, bh, k0, k1, load); break;
        case 2: tile_avx2(2, BF, xm, ldx, kc, w, ym, ldy, bh, k0, k1, load); break;
        case 1: tile_avx2(1, BF, xm, ldx, kc, w, ym, ldy, bh, k0, k1, load); break;
        default: break;
        }
    }
}
__attribute__((target("avx2,fma"))) static void panel_avx2_f32(const float *x, int ldx, int M, int kc, const void *wp,
                                                               float *y, long ldy, long hoff, const float *b, int n0,
                                                               int n1, int load) {
    panel_avx2(0, x, ldx, M, kc, wp, y, ldy, hoff, b, n0, n1, load);
}
__attribute__((target("avx2,fma"))) static void panel_avx2_bf16(const float *x, int ldx, int M, int kc, const void *wp,
                                                                float *y, long ldy, long hoff, const float *b, int n0,
                                                                int n1, int load) {
    panel_avx2(1, x, ldx, M, kc, wp, y, ldy, hoff, b, n0, n1, load);
}
#endif

/* Same contract as panel_avx512: one fmaf chain per element in k order (bitwise the AVX-512 result); bf: wp holds
 * bf16 (each widened exactly to fp32 first). */
__attribute__((unused)) HOT static void panel_generic(const float *x, int ldx, int M, int kc, const void *wp, float *y,
                                                      long ldy, long hoff, const float *b, int n0, int n1, int load,
                                                      int bf) {
    for (int m = 0; m < M; m++) {
        float acc[32] = { 0 };
        float *lo = y + (long)m * ldy, *hi = lo + hoff;
        if (load) {
            for (int j = 0; j < n0; j++) acc[j] = lo[j];
            for (int j = 0; j < n1; j++) acc[16 + j] = hi[j];
        }
        const float *xr = x + (long)m * ldx;
        for (int k = 0; k < kc; k++) {
            float w[32], xv = xr[k];
            if (bf) dtype_bf16_to_f32_n(w, (const uint16_t *)wp + (long)k * 32, 32);
            else memcpy(w, (const float *)wp + (long)k * 32, sizeof w);
            for (int j = 0; j < 32; j++) acc[j] = fmaf(xv, w[j], acc[j]);
        }
        for (int j = 0; j < n0; j++) lo[j] = b ? acc[j] + b[j] : acc[j];
        for (int j = 0; j < n1; j++) hi[j] = b ? acc[16 + j] + b[hoff + j] : acc[16 + j];
    }
}

/* h[r, j] = silu(g[r, j]) * u[r, j] for rows r < M, j < n, g rows at stride ldg, u = g + hoff, h rows at stride ldh
 * (cpu_swiglu's formula) */
HOT static void glu_rows(float *h, long ldh, const float *g, long ldg, long hoff, int M, int n) {
    for (int r = 0; r < M; r++) {
        const float *gr = g + (long)r * ldg, *ur = gr + hoff;
        float *hr = h + (long)r * ldh;
        for (int j = 0; j < n; j++) hr[j] = gr[j] / (1.0f + fexp(-gr[j])) * ur[j];
    }
}

/* Software prefetch of slice i of S of panel p's raw weight rows (32 rows of K floats, see panel_half): with the
 * packing done panel by panel, the next panel's rows come in from DRAM while this one computes. */
static void prefetch_panel(const float *w, int N, int K, int glu, int p, int i, int S) {
    long per_row = (K + 15) / 16, lines = 32 * per_row, l0 = lines * i / S, l1 = lines * (i + 1) / S;
    for (long l = l0; l < l1; l++) {
        int j = (int)(l / per_row), cnt, r0 = panel_half(glu, N, p, j / 16, &cnt);
        if (j % 16 < cnt) __builtin_prefetch(w + (long)(r0 + j % 16) * K + (l % per_row) * 16, 0, 2);
    }
}

/* Rows [r0, r1) x panels [p0, p1) of y (=|+=) x wp^T (+ b), blocked as described above. glu: wp in the GLU layout,
 * y = [gate | up] with N = I columns each (ldy >= 2I), and h (rows at stride N) gets silu(gate) * up of each panel
 * block from its last K block's registers (AVX-512) or right after it, while it is still in cache. w != NULL: the
 * raw weight, packed into wp panel by panel at first use (the first row block), the next panel's rows prefetched
 * while the current one computes. */
#define PK_CHUNK 16     /* rows per step of the first row block (prefetches go in between) */
static void pk_block(float *y, long ldy, const float *x, const float *w, void *wp, int bf, const float *b, int r0,
                     int r1, int p0, int p1, int N, int K, int accumulate, int glu, float *h, int avx512) {
    (void)avx512;
    int nkb = (K + PK_KC - 1) / PK_KC, kstep = (K + nkb - 1) / nkb;
    for (int m0 = r0; m0 < r1; m0 += PK_MC) {
        int rows = r1 - m0 < PK_MC ? r1 - m0 : PK_MC;
        for (int k0 = 0; k0 < K; k0 += kstep) {
            int kc = K - k0 < kstep ? K - k0 : kstep, load = accumulate || k0 > 0, last = k0 + kc == K;
            for (int p = p0; p < p1; p++) {
                int c0 = glu ? 16 * p : CPU_PACK_COLS * p, n0, n1, first = w && m0 == r0 && k0 == 0;
                long hoff = glu ? N : 16;
                panel_half(glu, N, p, 0, &n0);
                panel_half(glu, N, p, 1, &n1);
                if (first) pack_panels(wp, w, N, K, glu, p, p + 1, avx512);   /* w != NULL: fp32 wp */
                int pf = first && p + 1 < p1, steps = pf ? (rows + PK_CHUNK - 1) / PK_CHUNK : 1;
                for (int i = 0; i < steps; i++) {
                    int a = pf ? i * PK_CHUNK : 0, n = pf ? (rows - a < PK_CHUNK ? rows - a : PK_CHUNK) : rows;
                    if (pf) prefetch_panel(w, N, K, glu, p + 1, i, steps);
                        long wo = ((long)p * K + k0) * CPU_PACK_COLS;
                    const void *wk = bf ? (const void *)((const uint16_t *)wp + wo) : (const void *)((const float *)wp + wo);
                    const float *xk = x + (long)(m0 + a) * K + k0;
                    const float *bp = b && last ? b + c0 : NULL;
                    float *yk = y + (long)(m0 + a) * ldy + c0;
                    float *hk = glu && last ? h + (long)(m0 + a) * N + c0 : NULL;
#if HAVE_X86
                    if (avx512) {
                        (bf ? panel_avx512_bf16 : panel_avx512_f32)(xk, K, n, kc, wk, yk, ldy, hoff, bp, n0, n1, load, hk, N);
                        continue;
                    }
#endif
#if HAVE_AVX2
                    (bf ? panel_avx2_bf16 : panel_avx2_f32)(xk, K, n, kc, wk, yk, ldy, hoff, bp, n0, n1, load);
#else
                    panel_generic(xk, K, n, kc, wk, yk, ldy, hoff, bp, n0, n1, load, bf);
#endif
                    if (hk) glu_rows(hk, N, yk, ldy, hoff, n, n0);
                }
            }
        }
    }
}

/* Work split. Each thread owns a contiguous run of panels (its "half") and takes that run's row blocks (PK_MC rows)
 * in order from a per-run counter; a thread done with its own run then takes row blocks from the others' counters,
 * so a thread slowed by another process on the machine does not leave the other one waiting at the end (a static
 * split did; dynamic scheduling of small tasks cost 3% in cache locality instead). Whoever takes row block 0 of a
 * run packs its panels (w != NULL, panel by panel at first use: no separate pass, no barrier); row blocks after it
 * wait until that run is packed. With fewer panels than threads, rows are split per thread instead (a packing share
 * each first, then a barrier). Which thread computes a block never changes a result. */
#define PK_MAXT 64
static void pk_run(float *y, long ldy, const float *x, const float *w, void *wp, int bf, const float *b, int M, int N,
                   int K, int accumulate, int glu, float *h) {
    if (M <= 0 || N <= 0) return;
    int avx512 = pk_avx512(), nb = glu ? (N + 15) / 16 : (N + CPU_PACK_COLS - 1) / CPU_PACK_COLS;
    int nt = (long)M * N * K * (glu ? 2 : 1) >= PAR_MIN_MACS && !omp_in_parallel() ? omp_get_max_threads() : 1;
    nt = nt < PK_MAXT ? nt : PK_MAXT;
    int nmb = (M + PK_MC - 1) / PK_MC, next[PK_MAXT] = { 0 }, packed[PK_MAXT] = { 0 };
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        if (nb >= n) {
            for (int k = 0; k < n; k++) {           /* own run first, then the others' */
                int u = (t + k) % n, p0 = (int)((long)nb * u / n), p1 = (int)((long)nb * (u + 1) / n), i;
                while ((i = __atomic_fetch_add(&next[u], 1, __ATOMIC_RELAXED)) < nmb) {
                    if (i > 0 && w)
                        while (!__atomic_load_n(&packed[u], __ATOMIC_ACQUIRE)) sched_yield();
                    int r0 = i * PK_MC, r1 = r0 + PK_MC < M ? r0 + PK_MC : M;
                    pk_block(y, ldy, x, i == 0 ? w : NULL, wp, bf, b, r0, r1, p0, p1, N, K, accumulate, glu, h, avx512);
                    if (i == 0 && w) __atomic_store_n(&packed[u], 1, __ATOMIC_RELEASE);
                }
            }
        } else {                /* few panels: rows per thread (8-row multiples) */
            int p0 = (int)((long)nb * t / n), p1 = (int)((long)nb * (t + 1) / n);
            if (w) {
                pack_panels(wp, w, N, K, glu, p0, p1, avx512);
#pragma omp barrier
            }
            int per = ((M + n - 1) / n + 7) & ~7, r0 = t * per, r1 = r0 + per < M ? r0 + per : M;
            if (r0 < r1) pk_block(y, ldy, x, NULL, wp, bf, b, r0, r1, 0, nb, N, K, accumulate, glu, h, avx512);
        }
    }
}

void cpu_linear_packed_ex(float *y, long ldy, const float *x, const float *wp, const float *b, int M, int N, int K,
                          int accumulate) {
    pk_run(y, ldy, x, NULL, (float *)wp, 0, b, M, N, K, accumulate, 0, NULL);
}

void cpu_linear_packed_bf16_ex(float *y, long ldy, const float *x, const uint16_t *wp, const float *b, int M, int N,
                               int K, int accumulate) {
    pk_run(y, ldy, x, NULL, (uint16_t *)wp, 1, b, M, N, K, accumulate, 0, NULL);
}

void cpu_linear_packw_ex(float *y, long ldy, const float *x, const float *w, float *wp, const float *b, int M, int N,
                         int K, int accumulate) {
    pk_run(y, ldy, x, w, wp, 0, b, M, N, K, accumulate, 0, NULL);
}

void cpu_linear_packed_swiglu(float *h, float *gu, const float *x, const float *wp, int M, int I, int K) {
    pk_run(gu, 2L * I, x, NULL, (float *)wp, 0, NULL, M, I, K, 0, 1, h);
}

void cpu_linear_packw_swiglu(float *h, float *gu, const float *x, const float *w, float *wp, int M, int I, int K) {
    pk_run(gu, 2L * I, x, w, wp, 0, NULL, M, I, K, 0, 1, h);
}

void cpu_linear_packed(float *y, const float *x, const float *wp, const float *b, int M, int N, int K) {
    cpu_linear_packed_ex(y, N, x, wp, b, M, N, K, 0);
}
