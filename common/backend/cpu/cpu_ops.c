/* common/backend/cpu/cpu_ops.c: fp32 transformer kernels on the CPU (see cpu_ops.h for the formulas).
 * GEMMs: OpenBLAS cblas_sgemm. Element-wise loops: OpenMP over rows, compiled at O3 with AVX-512/AVX2
 * clones (target_clones, chosen at load time by the CPU) because the Makefile builds generic x86-64 at -O2.
 * exp() is a branch-free Cephes-style polynomial (relative error ~2e-7) so the loops vectorise.
 * Not here: bf16, CUDA, KV-cache bookkeeping (the rollout engine owns its cache layout). */
#pragma GCC optimize("O3", "fp-contract=fast")
#include "backend/cpu/cpu_family_names.h"   /* built once per kernel family (cpu_family.h): names get its suffix */
#include "backend/cpu/cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#define HOT                /* the family's build flags choose the instructions (Makefile: FAM_FLAGS_<family>) */
#ifndef CPU_FAM_LEVEL
#define CPU_FAM_LEVEL 0
#endif

#define ATT_BQ 64      /* query rows per attention block (bounds scratch to ATT_BQ x nk per thread) */

#if CPU_FAM_LEVEL == 0                         /* family-independent: defined once, by the generic build */
const char *cpu_blas_corename(void) { return openblas_get_corename(); }
#endif

#include "core/fexp.h"

/* Reductions written as 16 independent lanes so they vectorise without -ffast-math; partial sums are
 * kept in double (the gradient fixtures need better than serial fp32 accumulation). */
#define LANES 16
static inline __attribute__((always_inline)) float vmax(const float *x, int n) {
    float acc[LANES];
    for (int k = 0; k < LANES; k++) acc[k] = -INFINITY;
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) acc[k] = x[j + k] > acc[k] ? x[j + k] : acc[k];
    float m = -INFINITY;
    for (int k = 0; k < LANES; k++) m = acc[k] > m ? acc[k] : m;
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

static inline __attribute__((always_inline)) double vsum(const float *x, int n) {
    double acc[LANES] = { 0 };
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += x[j + k];
    double s = 0;
    for (; j < n; j++) s += x[j];
    for (int k = 0; k < LANES; k++) s += acc[k];
    return s;
}

static inline __attribute__((always_inline)) double vdot(const float *x, const float *y, int n) {
    double acc[LANES] = { 0 };
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += (double)x[j + k] * y[j + k];
    double s = 0;
    for (; j < n; j++) s += (double)x[j] * y[j];
    for (int k = 0; k < LANES; k++) s += acc[k];
    return s;
}

/* sum_j w[j] * x[j] * y[j] */
static inline __attribute__((always_inline)) double vdot3(const float *w, const float *x, const float *y, int n) {
    double acc[LANES] = { 0 };
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += (double)(w[j + k] * x[j + k]) * y[j + k];
    double s = 0;
    for (; j < n; j++) s += (double)(w[j] * x[j]) * y[j];
    for (int k = 0; k < LANES; k++) s += acc[k];
    return s;
}

/* Over one logits row: y = lg * invT - mx; returns log(sum exp y) and *mean_y = sum softmax(y) * y. */
static inline __attribute__((always_inline)) float row_lse(const float *lg, int V, float invT, float mx, float *mean_y) {
    enum { CH = 512 };
    float e[CH], y[CH];
    double s = 0, sy = 0;
    for (int v0 = 0; v0 < V; v0 += CH) {
        int n = V - v0 < CH ? V - v0 : CH;
        for (int k = 0; k < n; k++) { y[k] = lg[v0 + k] * invT - mx; e[k] = fexp(y[k]); }
        s += vsum(e, n);
        sy += vdot(e, y, n);
    }
    *mean_y = (float)(sy / s);
    return (float)log(s);
}

/* ------------------------------------------------------------------------------------ linear */
/* C = alpha op(A) op(B) + beta C with the rows (or, when N > M, the columns) of C split over the OpenMP
 * threads, each running a single-threaded cblas_sgemm on its slice. One thread pool for the whole model
 * (OpenMP, OMP_WAIT_POLICY-governed) instead of OpenBLAS's own pool beside it: on 2 cores the two pools
 * hand the CPUs back and forth (OpenBLAS waits by sched_yield). The OpenBLAS thread count is set to 1 for
 * the call and restored. */
static void sgemm_par(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc) {
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    long work = (long)M * N * K;
    if (nt <= 1 || work < (1L << 21)) {
        cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int bt = openblas_get_num_threads();
    if (bt != 1) openblas_set_num_threads(1);
    int split_m = M >= N;
    int D = split_m ? M : N;
    /* slices in multiples of 16 rows/columns (the SkylakeX kernel's blocking) */
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        int per = ((D + n - 1) / n + 15) & ~15;
        int d0 = t * per, d1 = d0 + per < D ? d0 + per : D;
        if (d0 < d1) {
            if (split_m) {
                const float *As = ta ? A + d0 : A + (long)d0 * lda;
                cblas_sgemm(CblasRowMajor, TA, TB, d1 - d0, N, K, alpha, As, lda, B, ldb, beta, C + (long)d0 * ldc, ldc);
            } else {
                const float *Bs = tb ? B + (long)d0 * ldb : B + d0;
                cblas_sgemm(CblasRowMajor, TA, TB, M, d1 - d0, K, alpha, A, lda, Bs, ldb, beta, C + d0, ldc);
            }
        }
    }
    if (bt != 1) openblas_set_num_threads(bt);
}

void cpu_linear(float *y, const float *x, const float *w, const float *b, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    float beta = 0.0f;
    if (b) {
#pragma omp parallel for schedule(static) if (M >= 64)
        for (int m = 0; m < M; m++) memcpy(y + (long)m * N, b, (size_t)N * sizeof(float));
        beta = 1.0f;
    }
    sgemm_par(0, 1, M, N, K, 1.0f, x, K, w, K, beta, y, N);
}

void cpu_linear_add(float *y, const float *x, const float *w, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    sgemm_par(0, 1, M, N, K, 1.0f, x, K, w, K, 1.0f, y, N);
}

void cpu_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                         int M, int N, int K, int accum_dx) {
    if (M <= 0) return;
    if (dx) sgemm_par(0, 0, M, K, N, 1.0f, dy, N, w, K, accum_dx ? 1.0f : 0.0f, dx, K);
    if (dw) sgemm_par(1, 0, N, K, M, 1.0f, dy, N, x, K, 1.0f, dw, K);
    if (db) {
#pragma omp parallel for schedule(static) if ((long)M * N >= 65536)
        for (int n0 = 0; n0 < N; n0 += 64) {
            int n1 = n0 + 64 < N ? n0 + 64 : N;
            for (int m = 0; m < M; m++)
                for (int n = n0; n < n1; n++) db[n] += dy[(long)m * N + n];
        }
    }
}

/* ------------------------------------------------------------------------------------ linear, per sequence */
/* How the per-sequence products are cut into tasks: every bound below is a function of the layer's dimensions and
 * of the row's offset within its own sequence alone (never of the batch, the row count of the call or the thread
 * count), so a sequence's products are the same calls whatever surrounds it.
 *   rows: blocks of VL_ROWS rows from the sequence's start (long sequences give parallelism by themselves);
 *   output columns of x W^T / dy W: one slice below 1024, else an even number of slices of at most 1024;
 *   weight-gradient rows (the tasks of dW += dy^T x, each looping over the sequences in order): an even number of
 *   slices of at most 256 rows from 128 on (an even count balances 2 threads). */
#define VL_ROWS 512
static int vl_out_slices(int dim) { return dim < 1024 ? 1 : 2 * ((dim + 2047) / 2048); }
static int vl_dw_slices(int dim) { return dim < 128 ? 1 : 2 * ((dim + 511) / 512); }
static int vl_width(int dim, int n) { return ((dim + n - 1) / n + 15) & ~15; }

typedef struct {
    float *y, *dw, *db;
    const float *x, *w, *b, *dy;
    const int32_t *cu;
    int S, N, K, wd, nsl, nblk, accum;
} VlCtx;

/* Runs task(t, ctx) for t < ntask over the OpenMP threads (on the calling thread when the whole product is under
 * 2M multiply-adds, as sgemm_par: waking the team costs more), each GEMM single-threaded (OpenBLAS's own pool set to
 * 1 thread for the call and restored). Which thread runs a task never changes its result. */
typedef void (*VlTask)(int t, const VlCtx *ctx);
static void vl_run(int ntask, VlTask task, const VlCtx *ctx) {
    long rows = ctx->cu[ctx->S] - ctx->cu[0];
    int nt = omp_in_parallel() || rows * ctx->N * ctx->K < (1L << 21) ? 1 : omp_get_max_threads();
    int bt = openblas_get_num_threads();
    if (bt != 1) openblas_set_num_threads(1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1 && ntask > 1)
    for (int t = 0; t < ntask; t++) task(t, ctx);
    if (bt != 1) openblas_set_num_threads(bt);
}

static int vl_max_blocks(const int32_t *cu, int S) {
    int mx = 1;
    for (int s = 0; s < S; s++) {
        int nb = (cu[s + 1] - cu[s] + VL_ROWS - 1) / VL_ROWS;
        mx = nb > mx ? nb : mx;
    }
    return mx;
}

/* task t -> (sequence s, row block, column slice j); returns the block's rows (0: no such block) */
static int vl_unit(const VlCtx *c, int t, long *r0, int *j) {
    int s = t / (c->nblk * c->nsl), rem = t % (c->nblk * c->nsl), blk = rem / c->nsl;
    *j = rem % c->nsl;
    int a = blk * VL_ROWS, len = c->cu[s + 1] - c->cu[s];
    if (a >= len) return 0;
    *r0 = c->cu[s] + a;
    return len - a < VL_ROWS ? len - a : VL_ROWS;
}

/* y rows of one block, column slice j: y = x W^T (+ b) or y += x W^T */
static void vl_fwd_task(int t, const VlCtx *c) {
    long r0;
    int j, M = vl_unit(c, t, &r0, &j), n0 = j * c->wd, n = c->N - n0 < c->wd ? c->N - n0 : c->wd;
    if (M <= 0 || n <= 0) return;
    float *y = c->y + r0 * c->N + n0;
    float beta = c->accum ? 1.0f : 0.0f;
    if (c->b && !c->accum) {
        for (int m = 0; m < M; m++) memcpy(y + (long)m * c->N, c->b + n0, (size_t)n * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, n, c->K, 1.0f, c->x + r0 * c->K, c->K,
                c->w + (long)n0 * c->K, c->K, beta, y, c->N);
}

void cpu_linear_varlen(float *y, const float *x, const float *w, const float *b, const int32_t *cu_seqlens,
                       int n_seqs, int N, int K, int accumulate) {
    if (n_seqs <= 0 || N <= 0) return;
    VlCtx c = {.y = y, .x = x, .w = w, .b = b, .cu = cu_seqlens, .S = n_seqs, .N = N, .K = K, .nsl = vl_out_slices(N),
               .nblk = vl_max_blocks(cu_seqlens, n_seqs), .accum = accumulate};
    c.wd = vl_width(N, c.nsl);
    vl_run(n_seqs * c.nblk * c.nsl, vl_fwd_task, &c);
}

/* dx rows of one block, column slice j of K: dx (=|+=) dy W */
static void vl_dx_task(int t, const VlCtx *c) {
    long r0;
    int j, M = vl_unit(c, t, &r0, &j), k0 = j * c->wd, k = c->K - k0 < c->wd ? c->K - k0 : c->wd;
    if (M <= 0 || k <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, k, c->N, 1.0f, c->dy + r0 * c->N, c->N, c->w + k0, c->K,
                c->accum ? 1.0f : 0.0f, c->y + r0 * c->K + k0, c->K);
}

/* rows slice t of dW (and db): dW[rows] += dy_s^T x_s for s = 0, 1, ... in order, whole sequences */
static void vl_dw_task(int t, const VlCtx *c) {
    int n0 = t * c->wd, n = c->N - n0 < c->wd ? c->N - n0 : c->wd;
    if (n <= 0) return;
    for (int s = 0; s < c->S; s++) {
        long r0 = c->cu[s];
        int M = c->cu[s + 1] - c->cu[s];
        if (M <= 0) continue;
        const float *dy = c->dy + r0 * c->N + n0;
        if (c->dw)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, c->K, M, 1.0f, dy, c->N, c->x + r0 * c->K, c->K,
                        1.0f, c->dw + (long)n0 * c->K, c->K);
        if (c->db)
            for (int m = 0; m < M; m++)
                for (int i = 0; i < n; i++) c->db[n0 + i] += dy[(long)m * c->N + i];
    }
}

void cpu_linear_backward_varlen(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                                const int32_t *cu_seqlens, int n_seqs, int N, int K, int accum_dx) {
    if (n_seqs <= 0 || N <= 0 || K <= 0) return;
    if (dx) {
        VlCtx c = {.y = dx, .dy = dy, .w = w, .cu = cu_seqlens, .S = n_seqs, .N = N, .K = K, .nsl = vl_out_slices(K),
                   .nblk = vl_max_blocks(cu_seqlens, n_seqs), .accum = accum_dx};
        c.wd = vl_width(K, c.nsl);
        vl_run(n_seqs * c.nblk * c.nsl, vl_dx_task, &c);
    }
    if (dw || db) {
        VlCtx c = {.dw = dw, .db = db, .dy = dy, .x = x, .cu = cu_seqlens, .S = n_seqs, .N = N, .K = K,
                   .nsl = vl_dw_slices(N)};
        c.wd = vl_width(N, c.nsl);
        vl_run(c.nsl, vl_dw_task, &c);
    }
}

/* ------------------------------------------------------------------------------------ rmsnorm */
HOT void cpu_rmsnorm(float *y, float *rstd, const float *x, const float *w, int M, int D, float eps) {
#pragma omp parallel for schedule(static) if ((long)M * D >= 32768)
    for (int m = 0; m < M; m++) {
        const float *xr = x + (long)m * D;
        float *yr = y + (long)m * D;
        double ss = vdot(xr, xr, D);
        float r = (float)(1.0 / sqrt(ss / D + eps));
        if (rstd) rstd[m] = r;
        for (int d = 0; d < D; d++) yr[d] = w[d] * (xr[d] * r);
    }
}

HOT void cpu_rmsnorm_backward_varlen(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                     const float *rstd, const int32_t *cu_seqlens, int n_seqs, int D, int accum_dx) {
    int M = cu_seqlens[n_seqs] - cu_seqlens[0];
    if (M <= 0) return;
    if (dw) {       /* per sequence: a fixed-order partial sum over its rows, then dw += it, sequences in order */
#pragma omp parallel for schedule(static) if ((long)M * D >= 32768)
        for (int d0 = 0; d0 < D; d0 += 32) {
            int d1 = d0 + 32 < D ? d0 + 32 : D;
            for (int s = 0; s < n_seqs; s++) {
                float acc[32] = { 0 };
                for (int m = cu_seqlens[s]; m < cu_seqlens[s + 1]; m++) {
                    const float *xr = x + (long)m * D, *gr = dy + (long)m * D;
                    float r = rstd[m];
                    for (int d = d0; d < d1; d++) acc[d - d0] += gr[d] * xr[d] * r;
                }
                for (int d = d0; d < d1; d++) dw[d] += acc[d - d0];
            }
        }
    }
    int m0 = cu_seqlens[0];
#pragma omp parallel for schedule(static) if ((long)M * D >= 32768)
    for (int m = m0; m < m0 + M; m++) {
        const float *xr = x + (long)m * D, *gr = dy + (long)m * D;
        float *dr = dx + (long)m * D;
        float r = rstd[m];
        float c = (float)((double)r * r * r * vdot3(w, gr, xr, D) / D);
        if (accum_dx)
            for (int d = 0; d < D; d++) dr[d] += r * w[d] * gr[d] - xr[d] * c;
        else
            for (int d = 0; d < D; d++) dr[d] = r * w[d] * gr[d] - xr[d] * c;
    }
}

void cpu_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                          const float *rstd, int M, int D, int accum_dx) {
    int32_t cu[2] = { 0, M };
    cpu_rmsnorm_backward_varlen(dx, dw, dy, x, w, rstd, cu, 1, D, accum_dx);
}

/* ------------------------------------------------------------------------------------ rope */
void cpu_rope_tables(float *cs, float *sn, const int32_t *pos, int M, const float *inv_freq, int half) {
#pragma omp parallel for schedule(static) if ((long)M * half >= 8192)
    for (int m = 0; m < M; m++)
        for (int i = 0; i < half; i++) {
            /* fp32 angle like HF (inv_freq.float() @ position_ids.float()), then an accurate cos/sin */
            float a = (float)pos[m] * inv_freq[i];
            sincosf(a, &sn[(long)m * half + i], &cs[(long)m * half + i]);
        }
}

HOT void cpu_rope(float *x, int ld, const float *cs, const float *sn, int M, int nh, int hd, int inverse) {
    int half = hd / 2;
    float sg = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static) if ((long)M * nh * hd >= 32768)
    for (int m = 0; m < M; m++) {
        const float *c = cs + (long)m * half, *s = sn + (long)m * half;
        for (int h = 0; h < nh; h++) {
            float *x1 = x + (long)m * ld + h * hd, *x2 = x1 + half;
            for (int i = 0; i < half; i++) {
                float a = x1[i], b = x2[i], si = sg * s[i];
                x1[i] = a * c[i] - b * si;
                x2[i] = b * c[i] + a * si;
            }
        }
    }
}

/* ------------------------------------------------------------------------------------ attention */
/* Small dense products for attention blocks, single-threaded (one OpenMP task each): concurrent
 * cblas_sgemm calls from OpenMP threads serialise inside OpenBLAS, and these shapes (64 rows, K = head_dim
 * or the causal key count) are too small for its threading anyway. Register-blocked RB x JB so the
 * compiler keeps the accumulators in vector registers. */
#define RB 4
#define JB 64
typedef float v16 __attribute__((vector_size(64)));
/* 16-float column groups one pass of mm_ab_blk / mm_atb holds in registers: 4 rows x NQ v16 accumulators fit the 32
 * zmm registers of AVX-512, but 4 x 4 v16 are 32 ymm on AVX2 (16 registers): the avx2 and generic builds take one
 * group a pass (a column split: every output keeps its one chain over k in order, so the results are the same). */
#if CPU_FAM_LEVEL >= 2
#define MM_NQ 4
#else
#define MM_NQ 1
#endif
#define MAX_HD 256

/* The 4 x (16 NQ) register block of mm_ab: c[i][0..16 NQ) = sum_k a_i[k] B[k][0..16 NQ). NQ is a constant
 * after inlining, so the accumulators stay in vector registers (GCC vector extensions: 16-float vectors
 * whatever the clone's preferred width). */
static inline __attribute__((always_inline)) void mm_ab_blk(const int NQ, float c[RB][JB], int col, const float *A,
                                                            int lda, const float *B, int ldb, int kk) {
    const float *a0 = A, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
    v16 c0[4] = { 0 }, c1[4] = { 0 }, c2[4] = { 0 }, c3[4] = { 0 };
    for (int k = 0; k < kk; k++) {
        const float *bk = B + (long)k * ldb;
        float x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
        for (int q = 0; q < NQ; q++) {
            v16 bq;
            memcpy(&bq, bk + 16 * q, sizeof bq);
            c0[q] += x0 * bq;
            c1[q] += x1 * bq;
            c2[q] += x2 * bq;
            c3[q] += x3 * bq;
        }
    }
    for (int q = 0; q < NQ; q++) {
        memcpy(&c[0][col + 16 * q], &c0[q], sizeof(v16));
        memcpy(&c[1][col + 16 * q], &c1[q], sizeof(v16));
        memcpy(&c[2][col + 16 * q], &c2[q], sizeof(v16));
        memcpy(&c[3][col + 16 * q], &c3[q], sizeof(v16));
    }
}

/* C[r][j] (acc ? += : =) alpha * sum_k A[r][k] B[k][j] for r < R, j < n, k < K.
 * Causal trimming: jc >= 0 limits row r to columns j < jc + r + 1 (those beyond are left unwritten);
 * kc >= 0 limits the sum for row r to k < kc + r + 1 (A is zero beyond it). */
HOT static void mm_ab(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int R, int n, int K,
                      float alpha, int acc, int jc, int kc) {
    for (int r0 = 0; r0 < R; r0 += RB) {
        int rb = R - r0 < RB ? R - r0 : RB;
        int nn = jc >= 0 && jc + r0 + rb < n ? jc + r0 + rb : n;
        nn = (nn + 15) & ~15;               /* whole vectors: extra causal columns are ignored downstream */
        if (nn > n) nn = n;
        int kk = kc >= 0 && kc + r0 + rb < K ? kc + r0 + rb : K;
        for (int j0 = 0; j0 < nn; j0 += JB) {
            int jb = nn - j0 < JB ? nn - j0 : JB;
            float c[RB][JB];
            if (rb == RB && jb % 16 == 0 && MM_NQ == 1) {
                for (int q = 0; q < jb / 16; q++)       /* one 16-column group a pass (MM_NQ) */
                    mm_ab_blk(1, c, 16 * q, A + (long)r0 * lda, lda, B + j0 + 16 * q, ldb, kk);
            } else if (rb == RB && jb % 16 == 0) {
                switch (jb / 16) {
                case 4: mm_ab_blk(4, c, 0, A + (long)r0 * lda, lda, B + j0, ldb, kk); break;
                case 3: mm_ab_blk(3, c, 0, A + (long)r0 * lda, lda, B + j0, ldb, kk); break;
                case 2: mm_ab_blk(2, c, 0, A + (long)r0 * lda, lda, B + j0, ldb, kk); break;
                default: mm_ab_blk(1, c, 0, A + (long)r0 * lda, lda, B + j0, ldb, kk); break;
                }
            } else {
                memset(c, 0, sizeof c);
                for (int k = 0; k < kk; k++) {
                    const float *bk = B + (long)k * ldb + j0;
                    for (int i = 0; i < rb; i++) {
                        float x = A[(long)(r0 + i) * lda + k];
                        for (int j = 0; j < jb; j++) c[i][j] += x * bk[j];
                    }
                }
            }
            for (int i = 0; i < rb; i++) {
                float *cr = C + (long)(r0 + i) * ldc + j0;
                if (acc) for (int j = 0; j < jb; j++) cr[j] += alpha * c[i][j];
                else for (int j = 0; j < jb; j++) cr[j] = alpha * c[i][j];
            }
        }
    }
}

/* C[j][:m] += alpha * sum_r A[r][j] B[r][:m] for j < n, r < R (m <= MAX_HD): the transposed products of
 * the attention backward (dK += dS^T Q, dV += P^T dO). */
HOT static void mm_atb(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int R, int n, int m,
                       float alpha) {
    for (int j0 = 0; j0 < n; j0 += 4) {
        int jb = n - j0 < 4 ? n - j0 : 4;
        float c[4][MAX_HD];
        for (int i = 0; i < 4; i++) memset(c[i], 0, (size_t)m * sizeof(float));
        if (jb == 4 && m % 16 == 0 && m <= 128) {
            int nq = m / 16, step = MM_NQ == 1 ? 1 : nq;   /* below AVX-512 one 16-column group a pass (MM_NQ) */
            for (int q0 = 0; q0 < nq; q0 += step) {
                v16 c0[8] = { 0 }, c1[8] = { 0 }, c2[8] = { 0 }, c3[8] = { 0 };
                int qn = nq - q0 < step ? nq - q0 : step;
                for (int r = 0; r < R; r++) {
                    const float *br = B + (long)r * ldb + 16 * q0, *ar = A + (long)r * lda + j0;
                    float x0 = ar[0], x1 = ar[1], x2 = ar[2], x3 = ar[3];
                    for (int q = 0; q < qn; q++) {
                        v16 bq;
                        memcpy(&bq, br + 16 * q, sizeof bq);
                        c0[q] += x0 * bq;
                        c1[q] += x1 * bq;
                        c2[q] += x2 * bq;
                        c3[q] += x3 * bq;
                    }
                }
                for (int q = 0; q < qn; q++) {
                    memcpy(&c[0][16 * (q0 + q)], &c0[q], sizeof(v16));
                    memcpy(&c[1][16 * (q0 + q)], &c1[q], sizeof(v16));
                    memcpy(&c[2][16 * (q0 + q)], &c2[q], sizeof(v16));
                    memcpy(&c[3][16 * (q0 + q)], &c3[q], sizeof(v16));
                }
            }
        } else if (jb == 4) {
            for (int r = 0; r < R; r++) {
                const float *br = B + (long)r * ldb, *ar = A + (long)r * lda + j0;
                float x0 = ar[0], x1 = ar[1], x2 = ar[2], x3 = ar[3];
                for (int d = 0; d < m; d++) {
                    float bd = br[d];
                    c[0][d] += x0 * bd;
                    c[1][d] += x1 * bd;
                    c[2][d] += x2 * bd;
                    c[3][d] += x3 * bd;
                }
            }
        } else {
            for (int r = 0; r < R; r++) {
                const float *br = B + (long)r * ldb, *ar = A + (long)r * lda + j0;
                for (int i = 0; i < jb; i++)
                    for (int d = 0; d < m; d++) c[i][d] += ar[i] * br[d];
            }
        }
        for (int i = 0; i < jb; i++) {
            float *cr = C + (long)(j0 + i) * ldc;
            for (int d = 0; d < m; d++) cr[d] += alpha * c[i][d];
        }
    }
}

/* Kt[d][j] = K[j][d] for j < n, d < hd (K rows at stride ld). */
static void transpose_rows(float *Kt, const float *K, int ld, int n, int hd) {
    for (int j0 = 0; j0 < n; j0 += 16)
        for (int d = 0; d < hd; d++)
            for (int j = j0; j < j0 + 16 && j < n; j++) Kt[(long)d * n + j] = K[(long)j * ld + d];
}

#if CPU_FAM_LEVEL == 0
long cpu_attention_scratch_floats(int nk, int hd) {
    if (nk < 1) nk = 1;
    return (long)omp_get_max_threads() * (2L * ATT_BQ * nk + 2L * hd * nk);
}
#endif

/* Row softmax of the causal block, unnormalised: S[r, 0..jmax0+r] -> exp(S - max) and inv[r] = 1 / (its sum): the
 * caller scales the [rows, hd] product P V by inv instead of the [rows, keys] P. lse out. Beyond a row's keys only the
 * columns that mm_ab's P V product reads are zeroed (it trims its sum per RB-row group to the group's last row: row r
 * reads up to column jmax0 + (r | (RB-1)), RB a power of two and the blocks start at multiples of RB); the rest of
 * the row is left as is. exp and the sum (16 fp32 lanes, then double) run in one pass. */
typedef int32_t v16i __attribute__((vector_size(64)));
/* vmax on whole 16-float vectors (compare + select: GCC does not vectorise vmax's lanes in every clone); the same
 * result as vmax, NaNs included (x > m is false for them, as in vmax). */
static inline __attribute__((always_inline)) float vmax16(const float *x, int n) {
    v16 m;
    for (int k = 0; k < 16; k++) m[k] = -INFINITY;
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        v16 v;
        memcpy(&v, x + j, sizeof v);
        v16i gt = v > m;
        m = (v16)(((v16i)v & gt) | ((v16i)m & ~gt));
    }
    float r = -INFINITY;
    for (int k = 0; k < 16; k++) r = m[k] > r ? m[k] : r;
    for (; j < n; j++) r = x[j] > r ? x[j] : r;
    return r;
}

HOT static void softmax_causal_rows(float *S, int rows, int ncol, int jmax0, float *lse_out, int lse_stride,
                                    float *inv) {
    for (int r = 0; r < rows; r++) {
        float *s = S + (long)r * ncol;
        int n = jmax0 + r + 1;                       /* valid keys of this row */
        int z = jmax0 + (r | (RB - 1)) + 1;          /* columns P V reads */
        z = z < ncol ? z : ncol;
        float mx = vmax16(s, n);
        float acc[LANES] = { 0 };                    /* fp32 lanes: terms in (0, 1], at most a few thousand */
        double sum = 0;
        int j = 0;
        for (; j + LANES <= n; j += LANES)
            for (int k = 0; k < LANES; k++) {
                float e = fexp(s[j + k] - mx);
                s[j + k] = e;
                acc[k] += e;
            }
        for (; j < n; j++) {
            s[j] = fexp(s[j] - mx);
            sum += s[j];
        }
        for (int k = 0; k < LANES; k++) sum += acc[k];
        inv[r] = (float)(1.0 / sum);
        for (j = n; j < z; j++) s[j] = 0.0f;
        if (lse_out) lse_out[(long)r * lse_stride] = mx + (float)log(sum);
    }
}

/* o[r * ldo + d] *= inv[r], r < rows, d < hd */
HOT static void scale_rows(float *o, int ldo, const float *inv, int rows, int hd) {
    for (int r = 0; r < rows; r++)
        for (int d = 0; d < hd; d++) o[(long)r * ldo + d] *= inv[r];
}

/* One forward task: query block b (rows ATT_BQ b ..) of every head of kv head g. S, Kt: thread scratch. */
static void attn_fwd_task(float *out, float *lse, const float *q, const float *k, const float *v, int nq, int p0,
                          int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale, int g, int b, float *S,
                          float *Kt) {
    int grp = nh / nkv;
    int i0 = b * ATT_BQ, i1 = i0 + ATT_BQ < nq ? i0 + ATT_BQ : nq, rows = i1 - i0, kend = p0 + i1;
    transpose_rows(Kt, k + g * hd, ldk, kend, hd);        /* K^T built once per task, shared by the group */
    float inv[ATT_BQ];
    for (int h = g * grp; h < (g + 1) * grp; h++) {
        mm_ab(S, kend, q + (long)i0 * ldq + h * hd, ldq, Kt, kend, rows, kend, hd, scale, 0, p0 + i0, -1);
        softmax_causal_rows(S, rows, kend, p0 + i0, lse ? lse + (long)i0 * nh + h : NULL, nh, inv);
        mm_ab(out + (long)i0 * ldo + h * hd, ldo, S, kend, v + g * hd, ldk, rows, hd, kend, 1.0f, 0, -1, p0 + i0);
        scale_rows(out + (long)i0 * ldo + h * hd, ldo, inv, rows, hd);
    }
}

void cpu_attention(float *out, float *lse, const float *q, const float *k, const float *v, int nq, int p0,
                   int nk, int nh, int nkv, int hd, int ldq, int ldk, int ldo, float scale, float *scratch) {
    if (nq <= 0) return;
    int nblk = (nq + ATT_BQ - 1) / ATT_BQ, ntask = nkv * nblk;
    long per_thread = 2L * ATT_BQ * nk + 2L * hd * nk;
#pragma omp parallel if (ntask > 1 && (long)nq * nk * hd >= 32768)
    {
        float *S = scratch + (long)omp_get_thread_num() * per_thread, *Kt = S + 2L * ATT_BQ * nk;
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntask; t++)      /* largest causal blocks first */
            attn_fwd_task(out, lse, q, k, v, nq, p0, nh, nkv, hd, ldq, ldk, ldo, scale, t % nkv, nblk - 1 - t / nkv,
                          S, Kt);
    }
}

void cpu_attention_varlen(float *out, float *lse, const float *q, const float *k, const float *v,
                          const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int hd, int ldq, int ldk, int ldo,
                          float scale, float *scratch) {
    int ntask = 0, maxT = 1;
    for (int s = 0; s < n_seqs; s++) {
        int T = cu_seqlens[s + 1] - cu_seqlens[s];
        ntask += nkv * ((T + ATT_BQ - 1) / ATT_BQ);
        maxT = T > maxT ? T : maxT;
    }
    long per_thread = 2L * ATT_BQ * maxT + 2L * hd * maxT;
#pragma omp parallel if (ntask > 1)
    {
        float *S = scratch + (long)omp_get_thread_num() * per_thread, *Kt = S + 2L * ATT_BQ * maxT;
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntask; t++) {
            int s = 0, rem = t, T = 0, nblk = 0;
            for (; s < n_seqs; s++) {         /* task t -> (sequence, kv head, block) */
                T = cu_seqlens[s + 1] - cu_seqlens[s];
                nblk = (T + ATT_BQ - 1) / ATT_BQ;
                if (rem < nkv * nblk) break;
                rem -= nkv * nblk;
            }
            long s0 = cu_seqlens[s];
            attn_fwd_task(out + s0 * ldo, lse ? lse + s0 * nh : NULL, q + s0 * ldq, k + s0 * ldk, v + s0 * ldk, T, 0,
                          nh, nkv, hd, ldq, ldk, ldo, scale, rem % nkv, nblk - 1 - rem / nkv, S, Kt);
        }
    }
}

HOT static void attn_bwd_rows(float *P, float *dP, const float *lse, const float *dout, const float *out, int rows,
                              int ncol, int i0, int nh, int hd, int ldo) {
    for (int r = 0; r < rows; r++) {
        float *p = P + (long)r * ncol, *dp = dP + (long)r * ncol;
        const float *o = out + (long)(i0 + r) * ldo, *go = dout + (long)(i0 + r) * ldo;
        float Dr = (float)vdot(o, go, hd);
        float l = lse[(long)(i0 + r) * nh];
        int n = i0 + r + 1;
        for (int j = 0; j < n; j++) {
            float pj = fexp(p[j] - l);
            p[j] = pj;
            dp[j] = pj * (dp[j] - Dr);
        }
        for (int j = n; j < ncol; j++) { p[j] = 0.0f; dp[j] = 0.0f; }
    }
}

/* One backward task: every head and block of kv head g of one sequence (dK/dV of g written only here). */
static void attn_bwd_task(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                          const float *v, const float *out, const float *lse, int T, int nh, int nkv, int hd, int ldq,
                          int ldk, int ldo, float scale, int g, float *P, float *dP, float *Kt, float *Vt) {
    int grp = nh / nkv, nblk = (T + ATT_BQ - 1) / ATT_BQ;
    transpose_rows(Kt, k + g * hd, ldk, T, hd);
    transpose_rows(Vt, v + g * hd, ldk, T, hd);
    for (int h = g * grp; h < (g + 1) * grp; h++)
        for (int b = 0; b < nblk; b++) {
            int i0 = b * ATT_BQ, i1 = i0 + ATT_BQ < T ? i0 + ATT_BQ : T, rows = i1 - i0, kend = i1;
            const float *qb = q + (long)i0 * ldq + h * hd, *gob = dout + (long)i0 * ldo + h * hd;
            /* Kt/Vt are [hd][T]: use the first kend columns with row stride T */
            mm_ab(P, kend, qb, ldq, Kt, T, rows, kend, hd, scale, 0, i0, -1);
            mm_ab(dP, kend, gob, ldo, Vt, T, rows, kend, hd, 1.0f, 0, i0, -1);
            attn_bwd_rows(P, dP, lse + h, dout + h * hd, out + h * hd, rows, kend, i0, nh, hd, ldo);
            /* dP now holds dS (gradient of the scaled scores), zero beyond the causal limit */
            mm_ab(dq + (long)i0 * ldq + h * hd, ldq, dP, kend, k + g * hd, ldk, rows, hd, kend, scale, 0, -1, i0);
            mm_atb(dk + g * hd, ldk, dP, kend, qb, ldq, rows, kend, hd, scale);
            mm_atb(dv + g * hd, ldk, P, kend, gob, ldo, rows, kend, hd, 1.0f);
        }
}

void cpu_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *lse, int T, int nh, int nkv, int hd,
                            int ldq, int ldk, int ldo, float scale, float *scratch) {
    if (T <= 0) return;
    long per_thread = 2L * ATT_BQ * T + 2L * hd * T;
#pragma omp parallel if (nkv > 1 && (long)T * T * hd >= 32768)
    {
        float *P = scratch + (long)omp_get_thread_num() * per_thread, *dP = P + (long)ATT_BQ * T;
        float *Kt = dP + (long)ATT_BQ * T, *Vt = Kt + (long)hd * T;
#pragma omp for schedule(dynamic, 1)
        for (int g = 0; g < nkv; g++)
            attn_bwd_task(dq, dk, dv, dout, q, k, v, out, lse, T, nh, nkv, hd, ldq, ldk, ldo, scale, g, P, dP, Kt, Vt);
    }
}

void cpu_attention_backward_varlen(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                   const float *k, const float *v, const float *out, const float *lse,
                                   const int32_t *cu_seqlens, int n_seqs, int nh, int nkv, int hd, int ldq, int ldk,
                                   int ldo, float scale, float *scratch) {
    int maxT = 1;
    for (int s = 0; s < n_seqs; s++)
        maxT = cu_seqlens[s + 1] - cu_seqlens[s] > maxT ? cu_seqlens[s + 1] - cu_seqlens[s] : maxT;
    long per_thread = 2L * ATT_BQ * maxT + 2L * hd * maxT;
    int ntask = n_seqs * nkv;
#pragma omp parallel if (ntask > 1)
    {
        float *P = scratch + (long)omp_get_thread_num() * per_thread, *dP = P + (long)ATT_BQ * maxT;
        float *Kt = dP + (long)ATT_BQ * maxT, *Vt = Kt + (long)hd * maxT;
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < ntask; t++) {
            int s = t / nkv, g = t % nkv, T = cu_seqlens[s + 1] - cu_seqlens[s];
            long s0 = cu_seqlens[s];
            attn_bwd_task(dq + s0 * ldq, dk + s0 * ldk, dv + s0 * ldk, dout + s0 * ldo, q + s0 * ldq, k + s0 * ldk,
                          v + s0 * ldk, out + s0 * ldo, lse + s0 * nh, T, nh, nkv, hd, ldq, ldk, ldo, scale, g, P, dP,
                          Kt, Vt);
        }
    }
}

/* ------------------------------------------------------------------------------------ swiglu */
HOT void cpu_swiglu(float *h, const float *gu, int M, int nI) {
#pragma omp parallel for schedule(static) if ((long)M * nI >= 32768)
    for (int m = 0; m < M; m++) {
        const float *g = gu + (long)m * 2 * nI, *u = g + nI;
        float *hr = h + (long)m * nI;
        for (int i = 0; i < nI; i++) hr[i] = g[i] / (1.0f + fexp(-g[i])) * u[i];
    }
}

HOT void cpu_swiglu_backward(float *dgu, const float *dh, const float *gu, int M, int nI) {
#pragma omp parallel for schedule(static) if ((long)M * nI >= 32768)
    for (int m = 0; m < M; m++) {
        const float *g = gu + (long)m * 2 * nI, *u = g + nI, *d = dh + (long)m * nI;
        float *dg = dgu + (long)m * 2 * nI, *du = dg + nI;
        for (int i = 0; i < nI; i++) {
            float s = 1.0f / (1.0f + fexp(-g[i]));
            float dd = d[i], gi = g[i], ui = u[i];
            dg[i] = dd * ui * s * (1.0f + gi * (1.0f - s));
            du[i] = dd * gi * s;
        }
    }
}

/* ------------------------------------------------------------------------------------ qk norm */
HOT void cpu_rmsnorm_heads(float *y, int ldy, float *rstd, const float *x, int ldx, const float *w, int M, int nh,
                           int hd, float eps) {
#pragma omp parallel for schedule(static) if ((long)M * nh * hd >= 32768)
    for (int m = 0; m < M; m++)
        for (int h = 0; h < nh; h++) {
            const float *xr = x + (long)m * ldx + h * hd;
            float *yr = y + (long)m * ldy + h * hd;
            double ss = vdot(xr, xr, hd);
            float r = (float)(1.0 / sqrt(ss / hd + eps));
            if (rstd) rstd[(long)m * nh + h] = r;
            for (int d = 0; d < hd; d++) yr[d] = w[d] * (xr[d] * r);
        }
}

HOT void cpu_rmsnorm_heads_backward(float *g, int ldg, float *dw, const float *x, int ldx, const float *w,
                                    const float *rstd, int M, int nh, int hd) {
    for (int m = 0; m < M; m++)                   /* dw first (reads dy before it is overwritten) */
        for (int h = 0; h < nh; h++) {
            const float *xr = x + (long)m * ldx + h * hd, *gr = g + (long)m * ldg + h * hd;
            float r = rstd[(long)m * nh + h];
            for (int d = 0; d < hd; d++) dw[d] += gr[d] * xr[d] * r;
        }
#pragma omp parallel for schedule(static) if ((long)M * nh * hd >= 32768)
    for (int m = 0; m < M; m++)
        for (int h = 0; h < nh; h++) {
            const float *xr = x + (long)m * ldx + h * hd;
            float *gr = g + (long)m * ldg + h * hd;
            float r = rstd[(long)m * nh + h];
            float c = (float)((double)r * r * r * vdot3(w, gr, xr, hd) / hd);
            for (int d = 0; d < hd; d++) gr[d] = r * w[d] * gr[d] - xr[d] * c;
        }
}

/* ------------------------------------------------------------------------------------ lm head */
HOT static void row_forward(const float *lg, int t, int V, float invT, float *logp, float *ent) {
    float mx = vmax(lg, V) * invT, mean_y;
    float ls = row_lse(lg, V, invT, mx, &mean_y);
    if (ent) *ent = ls - mean_y;
    if (logp) *logp = (t >= 0 && t < V) ? lg[t] * invT - mx - ls : 0.0f;
}

void cpu_logprob_entropy(const float *logits, const int32_t *target, int M, int V, float temperature,
                         float *logp, float *ent) {
    float invT = 1.0f / temperature;
#pragma omp parallel for schedule(static) if ((long)M * V >= 65536)
    for (int m = 0; m < M; m++)
        row_forward(logits + (long)m * V, target ? target[m] : -1, V, invT, logp ? logp + m : NULL,
                    ent ? ent + m : NULL);
}

HOT static void row_backward(float *lg, int t, int V, float invT, float dl, float de) {
    float mx = vmax(lg, V) * invT, mean_y;
    float ls = row_lse(lg, V, invT, mx, &mean_y);
    float H = ls - mean_y;
    /* d/dz_v = dl * (onehot - p) - de * p * (log p + H), log p = y - ls */
    for (int v = 0; v < V; v++) {
        float y = lg[v] * invT - mx, p = fexp(y - ls);
        lg[v] = (-dl * p - de * p * (y - ls + H)) * invT;
    }
    if (t >= 0 && t < V) lg[t] += dl * invT;
}

void cpu_logprob_entropy_backward(float *logits, const int32_t *target, int M, int V, float temperature,
                                  const float *dlogp, const float *dent) {
    float invT = 1.0f / temperature;
#pragma omp parallel for schedule(static) if ((long)M * V >= 65536)
    for (int m = 0; m < M; m++)
        row_backward(logits + (long)m * V, target ? target[m] : -1, V, invT, dlogp ? dlogp[m] : 0.0f,
                     dent ? dent[m] : 0.0f);
}

HOT void cpu_add(float *y, const float *x, long n) {
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (long i = 0; i < n; i++) y[i] += x[i];
}
