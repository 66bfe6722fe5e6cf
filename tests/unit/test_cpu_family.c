/* tests/unit/test_cpu_family.c: the CPU backend's kernel families (backend/cpu/cpu_family.h, issue 43).
 *   - every family this CPU has, called directly (cpu_<kernel>_<family>): the packed linear (=, +=, bias, ragged
 *     shapes, several K blocks and threads), its fused SwiGLU and the paged attention give BITWISE the generic
 *     family's results (one fmaf chain per output everywhere); the element-wise kernels of cpu_ops.c (RMSNorm, SwiGLU,
 *     the log-prob / entropy rows), compiled with FP contraction, agree within the stated fp32 bound (printed), and
 *     NaN never passes;
 *   - bf16 weight storage: the packed linear on bf16 panels is bitwise the fp32 one on the rounded weights, on every
 *     family (generic included);
 *   - DAPO_CPU_FAMILY: each family this CPU has is taken; an unknown name and a family the CPU lacks are refused
 *     naming it (in a child process each: the choice is once per process).
 * The batch- and worker-count invariance tests run under every family this CPU has (tests/run.sh: FAMILY_TESTS). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <omp.h>

#include "backend/cpu/cpu_decode.h"
#include "backend/cpu/cpu_family.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/dtype.h"

#define X(name, params, args) void name##_generic params; void name##_avx2 params; void name##_avx512 params;
CPU_KERNELS(X)
#undef X

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *rvec(long n) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (long i = 0; i < n; i++) v[i] = frand();
    return v;
}

/* the families this CPU has beyond generic */
static int n_fams(CpuFamily *f) {
    int n = 0;
    if (cpu_family_supported(CPU_FAMILY_AVX2)) f[n++] = CPU_FAMILY_AVX2;
    if (cpu_family_supported(CPU_FAMILY_AVX512)) f[n++] = CPU_FAMILY_AVX512;
    return n;
}

static double rel_diff(const float *a, const float *b, long n);
typedef void (*LinFn)(float *, long, const float *, const float *, const float *, int, int, int, int);
typedef void (*GluFn)(float *, float *, const float *, const float *, int, int, int);

static void test_packed_linear_bitwise_across_families(void **state) {
    (void)state;
    CpuFamily f[2] = { CPU_FAMILY_GENERIC, CPU_FAMILY_GENERIC };
    int nf = n_fams(f);
    if (!nf) skip();
    static const int shapes[][3] = {{1, 1, 1}, {5, 33, 17}, {7, 64, 100}, {13, 100, 1700}, {64, 300, 600}, {3, 31, 4000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *x = rvec((long)M * K), *w = rvec((long)N * K), *b = rvec(N), *y0 = rvec((long)M * N);
        float *wp = malloc((size_t)cpu_pack_floats(N, K) * sizeof(float));
        cpu_pack_weights_generic(wp, w, N, K);
        for (int acc = 0; acc < 2; acc++) {
            float *want = malloc((size_t)M * N * sizeof(float));
            memcpy(want, y0, (size_t)M * N * sizeof(float));
            cpu_linear_packed_ex_generic(want, N, x, wp, acc ? NULL : b, M, N, K, acc);
            for (int i = 0; i < nf; i++) {
                LinFn fn = f[i] == CPU_FAMILY_AVX2 ? cpu_linear_packed_ex_avx2 : cpu_linear_packed_ex_avx512;
                float *got = malloc((size_t)M * N * sizeof(float));
                memcpy(got, y0, (size_t)M * N * sizeof(float));
                fn(got, N, x, wp, acc ? NULL : b, M, N, K, acc);
                if (memcmp(got, want, (size_t)M * N * sizeof(float)))
                    fail_msg("%s: packed linear M %d N %d K %d (%s) differs from generic", cpu_family_name(f[i]), M, N,
                             K, acc ? "+=" : "=, bias");
                free(got);
            }
            free(want);
        }
        /* the fused gate|up + SwiGLU product */
        int I = N;
        float *wg = rvec(2L * I * K), *wpg = malloc((size_t)cpu_pack_floats_glu(I, K) * sizeof(float));
        cpu_pack_weights_glu_generic(wpg, wg, I, K);
        float *h0 = malloc((size_t)M * I * 4), *gu0 = malloc((size_t)M * 2 * I * 4);
        cpu_linear_packed_swiglu_generic(h0, gu0, x, wpg, M, I, K);
        for (int i = 0; i < nf; i++) {
            GluFn fn = f[i] == CPU_FAMILY_AVX2 ? cpu_linear_packed_swiglu_avx2 : cpu_linear_packed_swiglu_avx512;
            float *h = malloc((size_t)M * I * 4), *gu = malloc((size_t)M * 2 * I * 4);
            fn(h, gu, x, wpg, M, I, K);
            assert_memory_equal(gu, gu0, (size_t)M * 2 * I * 4);
            assert_memory_equal(h, h0, (size_t)M * I * 4);
            free(h); free(gu);
        }
        free(wg); free(wpg); free(h0); free(gu0);
        free(x); free(w); free(b); free(y0); free(wp);
    }
}

typedef void (*LinBfFn)(float *, long, const float *, const uint16_t *, const float *, int, int, int, int);

/* bf16 weight storage (cpu_pack_weights_bf16 / cpu_linear_packed_bf16_ex): on every family, bitwise the fp32 packed
 * kernel on the bf16-rounded weights (=, +=, bias; several K blocks; decode-sized and prefill-sized M), and its packing
 * is exactly those rounded weights in the fp32 packing's layout. */
static void test_packed_linear_bf16_weights(void **state) {
    (void)state;
    CpuFamily f[3] = { CPU_FAMILY_GENERIC };
    int nf = 1 + n_fams(f + 1);
    static const int shapes[][3] = {{1, 1, 1}, {1, 100, 1700}, {5, 33, 17}, {64, 300, 600}, {3, 31, 4000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        long np = cpu_pack_floats(N, K);
        float *x = rvec((long)M * K), *w = rvec((long)N * K), *b = rvec(N), *y0 = rvec((long)M * N);
        float *wr = malloc((size_t)N * K * sizeof(float)), *wp = malloc((size_t)np * sizeof(float));
        for (long i = 0; i < (long)N * K; i++) wr[i] = dtype_bf16_to_f32(dtype_bf16_from_f32(w[i]));
        cpu_pack_weights_generic(wp, wr, N, K);
        for (int i = 0; i < nf; i++) {
            uint16_t *wb = malloc((size_t)np * sizeof(uint16_t));
            (f[i] == CPU_FAMILY_AVX512 ? cpu_pack_weights_bf16_avx512 : f[i] == CPU_FAMILY_AVX2
                 ? cpu_pack_weights_bf16_avx2 : cpu_pack_weights_bf16_generic)(wb, w, N, K);
            for (long j = 0; j < np; j++)
                if (dtype_bf16_to_f32(wb[j]) != wp[j]) fail_msg("%s: bf16 packing differs at %ld", cpu_family_name(f[i]), j);
            LinBfFn fn = f[i] == CPU_FAMILY_AVX512 ? cpu_linear_packed_bf16_ex_avx512
                         : f[i] == CPU_FAMILY_AVX2 ? cpu_linear_packed_bf16_ex_avx2 : cpu_linear_packed_bf16_ex_generic;
            for (int acc = 0; acc < 2; acc++) {
                float *want = malloc((size_t)M * N * sizeof(float)), *got = malloc((size_t)M * N * sizeof(float));
                memcpy(want, y0, (size_t)M * N * sizeof(float));
                memcpy(got, y0, (size_t)M * N * sizeof(float));
                cpu_linear_packed_ex_generic(want, N, x, wp, acc ? NULL : b, M, N, K, acc);
                fn(got, N, x, wb, acc ? NULL : b, M, N, K, acc);
                for (long j = 0; j < (long)M * N; j++) assert_false(isnan(got[j]));
                if (memcmp(got, want, (size_t)M * N * sizeof(float)))
                    fail_msg("%s: bf16 packed linear M %d N %d K %d (%s) differs from fp32 on rounded weights by %.3g",
                             cpu_family_name(f[i]), M, N, K, acc ? "+=" : "=, bias", rel_diff(got, want, (long)M * N));
                free(want); free(got);
            }
            free(wb);
        }
        free(x); free(w); free(b); free(y0); free(wr); free(wp);
    }
}

static int omp_max(void) { return omp_get_max_threads(); }

typedef void (*AttFn)(float *, int, const float *, int, int, const int32_t *, const int32_t *const *, const float *,
                      const float *, int, int, int, int, float, float *, long);

/* the paged attention (the AVX-512 kernel for 16-token blocks and hd % 16 == 0, the C loops otherwise): bitwise */
static void test_paged_attention_bitwise_across_families(void **state) {
    (void)state;
    CpuFamily f[2] = { CPU_FAMILY_GENERIC, CPU_FAMILY_GENERIC };
    int nf = n_fams(f);
    if (!nf) skip();
    enum { R = 5, NH = 8, NKV = 2, HD = 32, BS = 16, NB = 12, CTX = NB * BS };
    float *kc = rvec((long)NB * NKV * HD * BS), *vc = rvec((long)NB * BS * NKV * HD), *q = rvec((long)R * NH * HD);
    int32_t tab[R][NB], pos[R] = {0, 15, 16, 77, 191};
    const int32_t *tp[R];
    for (int r = 0; r < R; r++) {
        for (int b = 0; b < NB; b++) tab[r][b] = (b * 5 + r) % NB;
        tp[r] = tab[r];
    }
    long scr = (long)omp_max() * (NH / NKV) * CTX;
    float *s = malloc((size_t)scr * sizeof(float)), want[R * NH * HD], got[R * NH * HD];
    cpu_paged_attention_generic(want, NH * HD, q, NH * HD, R, pos, tp, kc, vc, BS, NH, NKV, HD, 0.17f, s, CTX);
    for (int i = 0; i < nf; i++) {
        AttFn fn = f[i] == CPU_FAMILY_AVX2 ? cpu_paged_attention_avx2 : cpu_paged_attention_avx512;
        fn(got, NH * HD, q, NH * HD, R, pos, tp, kc, vc, BS, NH, NKV, HD, 0.17f, s, CTX);
        if (memcmp(got, want, sizeof got))
            fail_msg("%s: paged attention differs from generic by %.3g", cpu_family_name(f[i]),
                     rel_diff(got, want, R * NH * HD));
    }
    /* the bf16 cache: bitwise the fp32 kernel on a cache holding the rounded values, on every family */
    long nk = (long)NB * NKV * HD * BS;
    uint16_t *kb = malloc((size_t)nk * 2), *vb = malloc((size_t)nk * 2);
    dtype_bf16_from_f32_n(kb, kc, nk);
    dtype_bf16_from_f32_n(vb, vc, nk);
    dtype_bf16_to_f32_n(kc, kb, nk);
    dtype_bf16_to_f32_n(vc, vb, nk);
    cpu_paged_attention_generic(want, NH * HD, q, NH * HD, R, pos, tp, kc, vc, BS, NH, NKV, HD, 0.17f, s, CTX);
    typedef void (*AttBfFn)(float *, int, const float *, int, int, const int32_t *, const int32_t *const *,
                            const uint16_t *, const uint16_t *, int, int, int, int, float, float *, long);
    CpuFamily all[3] = { CPU_FAMILY_GENERIC, f[0], f[1] };
    for (int i = 0; i <= nf; i++) {
        AttBfFn fn = all[i] == CPU_FAMILY_AVX512 ? cpu_paged_attention_bf16_avx512
                     : all[i] == CPU_FAMILY_AVX2 ? cpu_paged_attention_bf16_avx2 : cpu_paged_attention_bf16_generic;
        fn(got, NH * HD, q, NH * HD, R, pos, tp, kb, vb, BS, NH, NKV, HD, 0.17f, s, CTX);
        if (memcmp(got, want, sizeof got))
            fail_msg("%s: paged attention on the bf16 cache differs from fp32 on the rounded cache by %.3g",
                     cpu_family_name(all[i]), rel_diff(got, want, R * NH * HD));
    }
    /* cpu_kv_store_bf16 stores the rounded row */
    float kr[NKV * HD], vr[NKV * HD];
    for (int j = 0; j < NKV * HD; j++) kr[j] = frand(), vr[j] = frand();
    cpu_kv_store_bf16_generic(kb, vb, tab[0], 37, kr, vr, BS, NKV, HD);
    long blk = tab[0][37 / BS];
    for (int j = 0; j < NKV * HD; j++) {
        assert_int_equal(kb[(blk * NKV * HD + j) * BS + 37 % BS], dtype_bf16_from_f32(kr[j]));
        assert_int_equal(vb[(blk * BS + 37 % BS) * NKV * HD + j], dtype_bf16_from_f32(vr[j]));
    }
    free(kb); free(vb);
    free(kc); free(vc); free(q); free(s);
}

/* max |a - b| / (1 + |b|) over n; +inf on a NaN */
static double rel_diff(const float *a, const float *b, long n) {
    double worst = 0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
        if (!(d == d)) return INFINITY;
        if (d > worst) worst = d;
    }
    return worst;
}

static void test_elementwise_within_fp32_across_families(void **state) {
    (void)state;
    CpuFamily f[2] = { CPU_FAMILY_GENERIC, CPU_FAMILY_GENERIC };
    int nf = n_fams(f);
    if (!nf) skip();
    enum { M = 9, D = 384, V = 1000 };
    float *x = rvec((long)M * D), *w = rvec(D), *gu = rvec(2L * M * D), *lg = rvec((long)M * V);
    int32_t tgt[M];
    for (int m = 0; m < M; m++) tgt[m] = (m * 97) % V;
    float y0[M * D], r0[M], h0[M * D], lp0[M], en0[M];
    cpu_rmsnorm_generic(y0, r0, x, w, M, D, 1e-6f);
    cpu_swiglu_generic(h0, gu, M, D);
    cpu_logprob_entropy_generic(lg, tgt, M, V, 0.7f, lp0, en0);
    for (int i = 0; i < nf; i++) {
        int a = f[i] == CPU_FAMILY_AVX2;
        float y[M * D], r[M], h[M * D], lp[M], en[M];
        (a ? cpu_rmsnorm_avx2 : cpu_rmsnorm_avx512)(y, r, x, w, M, D, 1e-6f);
        (a ? cpu_swiglu_avx2 : cpu_swiglu_avx512)(h, gu, M, D);
        (a ? cpu_logprob_entropy_avx2 : cpu_logprob_entropy_avx512)(lg, tgt, M, V, 0.7f, lp, en);
        double dn = rel_diff(y, y0, M * D), ds = rel_diff(h, h0, M * D), dl = rel_diff(lp, lp0, M),
               de = rel_diff(en, en0, M);
        print_message("%s vs generic: rmsnorm %.2g, swiglu %.2g, logprob %.2g, entropy %.2g (relative)\n",
                      cpu_family_name(f[i]), dn, ds, dl, de);
        assert_true(dn <= 1e-6 && ds <= 1e-6 && dl <= 1e-6 && de <= 1e-6);
    }
    float nan_lg[V];
    memcpy(nan_lg, lg, sizeof nan_lg);
    nan_lg[3] = NAN;                                  /* NaN never passes the comparison */
    float lpn[1], enn[1];
    cpu_logprob_entropy_generic(nan_lg, tgt, 1, V, 1.0f, lpn, enn);
    assert_true(isinf(rel_diff(lpn, lp0, 1)) || isinf(rel_diff(enn, en0, 1)));
    free(x); free(w); free(gu); free(lg);
}

/* This program started again (/proc/self/exe --family-child) with DAPO_CPU_FAMILY=name — the family is chosen as a
 * program loads: cpu_family_init's code and, on success, the family chosen (-1 on error); its message in err_out. */
static int child_family(const char *name, char *err_out) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t p = fork();
    if (p == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        setenv("DAPO_CPU_FAMILY", name, 1);
        execl("/proc/self/exe", "test_cpu_family", "--family-child", (char *)NULL);
        _exit(99);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], err_out, ERR_LEN - 1);
    err_out[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int st;
    waitpid(p, &st, 0);
    return WEXITSTATUS(st) == 100 ? -1 : WEXITSTATUS(st);
}

static void test_forced_family(void **state) {
    (void)state;
    char err[ERR_LEN];
    for (int f = 0; f <= CPU_FAMILY_AVX512; f++) {
        int got = child_family(cpu_family_name((CpuFamily)f), err);
        if (cpu_family_supported((CpuFamily)f)) assert_int_equal(got, f);
        else {
            assert_int_equal(got, -1);
            assert_non_null(strstr(err, "this CPU (or build) has no"));
        }
    }
    assert_int_equal(child_family("avx9", err), -1);
    assert_non_null(strstr(err, "DAPO_CPU_FAMILY=avx9: not a kernel family"));
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--family-child")) {   /* child_family's side: the choice made at load */
        char err[ERR_LEN] = "";
        int rc = cpu_family_init(err);
        if (write(1, err, strlen(err) + 1) < 0) return 99;
        return rc ? 100 : (int)cpu_family();
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_linear_bitwise_across_families),
        cmocka_unit_test(test_packed_linear_bf16_weights),
        cmocka_unit_test(test_elementwise_within_fp32_across_families),
        cmocka_unit_test(test_paged_attention_bitwise_across_families),
        cmocka_unit_test(test_forced_family),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
