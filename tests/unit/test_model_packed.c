/* tests/unit/test_model_packed.c: the fixed-order packed linear kernel (backend/cpu/cpu_decode.h) that every product
 * of model_forward runs on, and the forward's sequence invariance that rests on it.
 *   - cpu_pack_weights against its definition (the AVX-512 register transpose, ragged N and K);
 *   - cpu_linear_packed_ex (=, +=, bias, row stride ldy, K split into blocks past 1536, few panels -> row split),
 *     and cpu_linear_packw_ex (packing inside the product) bitwise equal to it,
 *     BITWISE against an independent scalar reference: one fmaf chain per element over k in order, + bias after
 *     (what the header promises), and against a double-precision product within fp32 rounding;
 *   - the fused gate|up + SwiGLU product (cpu_linear_packed_swiglu), h bitwise the scalar formula;
 *   - rows invariance: rows computed alone, in a sub-batch, or with 1 or 2 threads are bitwise the same;
 *   - model_forward: a sequence's log-probs / entropies are bitwise the same alone, packed with others or moved,
 *     and an inference-mode model gives bitwise the train-mode model's values (the learner's old-log-prob pass and
 *     its training forward; the ratio == 1 on the first mini-batch relies on it), and with model_pack_weights'
 *     snapshot (dropped when the weights change). Shapes big enough to take the
 *     threaded paths (products of >= 4M multiply-adds).
 * Not here: fixture comparisons against transformers (test_model.c), generation (test_generate.c). */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cpu/cpu_decode.h"
#include "core/fexp.h"
#include "core/err.h"
#include "model/model.h"
#include "tests/model_slabs.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void) {     /* xorshift64 */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float frand(void) { return (float)((double)(next_u64() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }   /* [-1, 1) */
static float *rand_vec(long n) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(v);
    for (long i = 0; i < n; i++) v[i] = frand();
    return v;
}

static void test_pack_layout(void **state) {
    (void)state;
    const int shapes[][2] = { { 1, 1 }, { 5, 3 }, { 31, 17 }, { 32, 16 }, { 33, 33 }, { 100, 1408 }, { 64, 15 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], K = shapes[s][1];
        long P = cpu_pack_floats(N, K);
        assert_int_equal(P, (long)((N + CPU_PACK_COLS - 1) / CPU_PACK_COLS) * CPU_PACK_COLS * K);
        float *w = rand_vec((long)N * K), *d = malloc((size_t)P * sizeof(float));
        memset(d, 0xff, (size_t)P * sizeof(float));         /* NaN: every slot must be written */
        cpu_pack_weights(d, w, N, K);
        for (int b = 0; b < (N + CPU_PACK_COLS - 1) / CPU_PACK_COLS; b++)
            for (int k = 0; k < K; k++)
                for (int j = 0; j < CPU_PACK_COLS; j++) {
                    int n = b * CPU_PACK_COLS + j;
                    float want = n < N ? w[(long)n * K + k] : 0.0f, got = d[((long)b * K + k) * CPU_PACK_COLS + j];
                    if (memcmp(&want, &got, sizeof want))
                        fail_msg("N=%d K=%d: packed[%d][%d][%d] = %g, want %g", N, K, b, k, j, got, want);
                }
        free(w);
        free(d);
    }
}

/* y[m*ldy + n] per the header: acc = (accumulate ? y : 0); acc = fmaf(x[k], w[n][k], acc) for k = 0..K-1; + b[n] */
static void ref_chain(float *y, long ldy, const float *x, const float *w, const float *b, int M, int N, int K,
                      int accumulate) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = accumulate ? y[(long)m * ldy + n] : 0.0f;
            for (int k = 0; k < K; k++) acc = fmaf(x[(long)m * K + k], w[(long)n * K + k], acc);
            y[(long)m * ldy + n] = b ? acc + b[n] : acc;
        }
}

static void check_packed(int M, int N, int K, int accumulate, int with_bias, int extra_ld) {
    long ldy = N + extra_ld;
    float *x = rand_vec((long)M * K), *w = rand_vec((long)N * K), *b = with_bias ? rand_vec(N) : NULL;
    float *y = rand_vec((long)M * ldy), *want = malloc((size_t)M * ldy * sizeof(float));
    float *wp = malloc((size_t)cpu_pack_floats(N, K) * sizeof(float));
    memcpy(want, y, (size_t)M * ldy * sizeof(float));
    double *y0 = malloc((size_t)M * ldy * sizeof(double));
    for (long i = 0; i < (long)M * ldy; i++) y0[i] = y[i];
    float *y2 = malloc((size_t)M * ldy * sizeof(float)), *wp2 = malloc((size_t)cpu_pack_floats(N, K) * sizeof(float));
    memcpy(y2, y, (size_t)M * ldy * sizeof(float));
    cpu_pack_weights(wp, w, N, K);
    cpu_linear_packed_ex(y, ldy, x, wp, b, M, N, K, accumulate);
    cpu_linear_packw_ex(y2, ldy, x, w, wp2, b, M, N, K, accumulate);      /* packing inside the product */
    assert_memory_equal(y2, y, (size_t)M * ldy * sizeof(float));
    assert_memory_equal(wp2, wp, (size_t)cpu_pack_floats(N, K) * sizeof(float));
    free(y2);
    free(wp2);
    ref_chain(want, ldy, x, w, b, M, N, K, accumulate);
    for (int m = 0; m < M; m++)
        for (long n = 0; n < ldy; n++) {
            long i = (long)m * ldy + n;
            if (memcmp(&y[i], &want[i], sizeof(float)))
                fail_msg("M=%d N=%d K=%d acc=%d bias=%d ld=%ld: y[%d][%ld] = %.9g, fmaf chain %.9g", M, N, K,
                         accumulate, with_bias, ldy, m, n, y[i], want[i]);
            if (n >= N) continue;                 /* beyond N: untouched (checked bitwise above) */
            double r = accumulate ? y0[i] : 0.0, mag = fabs(r);
            for (int k = 0; k < K; k++) {
                double t = (double)x[(long)m * K + k] * w[(long)n * K + k];
                r += t;
                mag += fabs(t);
            }
            if (b) { r += b[n]; mag += fabs(b[n]); }
            if (fabs(y[i] - r) > 1e-6 * mag + 1e-7 * (K + 1) * mag + 1e-30)
                fail_msg("M=%d N=%d K=%d: y[%d][%ld] = %.9g, double product %.9g", M, N, K, m, n, y[i], r);
        }
    free(x); free(w); free(b); free(y); free(want); free(wp); free(y0);
}

static void test_packed_matches_fmaf_chain(void **state) {
    (void)state;
    check_packed(1, 1, 1, 0, 0, 0);
    check_packed(3, 17, 5, 0, 1, 0);           /* partial panel, 2- and 1-row tails */
    check_packed(13, 45, 64, 1, 0, 0);         /* += form, 8 + 4 + 1 rows */
    check_packed(7, 33, 1600, 0, 1, 0);        /* K split into two blocks (the accumulators go through y) */
    check_packed(9, 40, 1600, 1, 0, 0);
    check_packed(150, 96, 300, 0, 0, 29);      /* a column slice of a wider output (ldy > N) */
    check_packed(300, 600, 64, 0, 1, 0);       /* 11.5M multiply-adds: threaded over panels */
    check_packed(600, 20, 400, 1, 0, 0);       /* 4.8M, one panel: threaded over rows */
}

/* the fused gate|up + SwiGLU product: gu bitwise the fmaf chains of [gate; up], h = silu(g) * u to fp32 rounding */
static void check_glu(int M, int I, int K) {
    float *x = rand_vec((long)M * K), *w = rand_vec(2L * I * K), *gu = malloc((size_t)M * 2 * I * sizeof(float));
    float *want = malloc((size_t)M * 2 * I * sizeof(float)), *h = malloc((size_t)M * I * sizeof(float));
    float *wp = malloc((size_t)cpu_pack_floats_glu(I, K) * sizeof(float));
    assert_true(cpu_pack_floats_glu(I, K) >= 2L * I * K);
    cpu_pack_weights_glu(wp, w, I, K);
    cpu_linear_packed_swiglu(h, gu, x, wp, M, I, K);
    float *h2 = malloc((size_t)M * I * sizeof(float)), *gu2 = malloc((size_t)M * 2 * I * sizeof(float));
    float *wp2 = malloc((size_t)cpu_pack_floats_glu(I, K) * sizeof(float));
    cpu_linear_packw_swiglu(h2, gu2, x, w, wp2, M, I, K);
    assert_memory_equal(h2, h, (size_t)M * I * sizeof(float));
    assert_memory_equal(gu2, gu, (size_t)M * 2 * I * sizeof(float));
    assert_memory_equal(wp2, wp, (size_t)cpu_pack_floats_glu(I, K) * sizeof(float));
    free(h2); free(gu2); free(wp2);
    ref_chain(want, 2L * I, x, w, NULL, M, 2 * I, K, 0);
    for (long i = 0; i < (long)M * 2 * I; i++)
        if (memcmp(&gu[i], &want[i], sizeof(float)))
            fail_msg("glu M=%d I=%d K=%d: gu[%ld] = %.9g, fmaf chain %.9g", M, I, K, i, gu[i], want[i]);
    for (int m = 0; m < M; m++)
        for (int i = 0; i < I; i++) {
            float gf = want[(long)m * 2 * I + i], uf = want[(long)m * 2 * I + I + i];
            float hf = gf / (1.0f + fexp(-gf)) * uf;          /* the header's formula, scalar, no contraction */
            if (memcmp(&hf, &h[(long)m * I + i], sizeof hf))
                fail_msg("glu M=%d I=%d K=%d: h[%d][%d] = %.9g, scalar formula %.9g", M, I, K, m, i, h[(long)m * I + i], hf);
            double g = gf, u = uf, r = g / (1.0 + exp(-g)) * u;
            if (fabs(h[(long)m * I + i] - r) > 1e-6 * fabs(r) + 1e-7)
                fail_msg("glu M=%d I=%d K=%d: h[%d][%d] = %.9g, want %.9g", M, I, K, m, i, h[(long)m * I + i], r);
        }
    free(x); free(w); free(gu); free(want); free(h); free(wp);
}

static void test_packed_swiglu(void **state) {
    (void)state;
    check_glu(1, 1, 3);
    check_glu(11, 37, 70);        /* partial gate/up panels */
    check_glu(300, 200, 100);     /* 12M multiply-adds: threaded */
    check_glu(5, 48, 1600);       /* K split */
}

/* y of the rows [r0, r0 + n) computed on their own */
static float *rows_alone(const float *x, const float *wp, const float *b, int r0, int n, int N, int K) {
    float *y = malloc((size_t)n * N * sizeof(float));
    cpu_linear_packed_ex(y, N, x + (long)r0 * K, wp, b, n, N, K, 0);
    return y;
}

static void test_packed_rows_invariant(void **state) {
    (void)state;
    const int shapes[][3] = { { 300, 600, 700 }, { 700, 20, 400 }, { 64, 130, 1700 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *x = rand_vec((long)M * K), *w = rand_vec((long)N * K), *b = rand_vec(N);
        float *wp = malloc((size_t)cpu_pack_floats(N, K) * sizeof(float)), *all = malloc((size_t)M * N * sizeof(float));
        cpu_pack_weights(wp, w, N, K);
        cpu_linear_packed_ex(all, N, x, wp, b, M, N, K, 0);
        const int cuts[][2] = { { 0, 1 }, { 37, 1 }, { M - 1, 1 }, { 5, 100 < M - 5 ? 100 : M - 5 }, { 11, M - 11 } };
        for (int c = 0; c < 5; c++) {
            float *part = rows_alone(x, wp, b, cuts[c][0], cuts[c][1], N, K);
            assert_memory_equal(part, all + (long)cuts[c][0] * N, (size_t)cuts[c][1] * N * sizeof(float));
            free(part);
        }
        int nt = omp_get_max_threads();
        omp_set_num_threads(1);
        float *one = rows_alone(x, wp, b, 0, M, N, K);
        omp_set_num_threads(nt);
        assert_memory_equal(one, all, (size_t)M * N * sizeof(float));
        free(one); free(x); free(w); free(b); free(wp); free(all);
    }
}

/* Big enough that every product of the forward takes the threaded path (M * N * K >= 4M at M >= 256). */
static const char *CFG =
    "{\"architectures\":[\"Qwen2ForCausalLM\"],\"vocab_size\":1000,\"hidden_size\":128,\"num_hidden_layers\":2,"
    "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":352,\"max_position_embeddings\":1024,"
    "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"tie_word_embeddings\":false,\"hidden_act\":\"silu\"}";

static Model *make_model(int train) {
    char err[ERR_LEN];
    ModelOptions o = { .max_tokens = 512, .train = train };
    Model *m = model_create(CFG, &o, err);
    if (!m) fail_msg("model_create: %s", err);
    model_init_random(m, 11, 0.08f);
    return m;
}

static void forward(Model *m, const int32_t *tok, const int32_t *tgt, const int32_t *cu, int S, float *lp, float *en) {
    char err[ERR_LEN];
    ModelBatch b = { .n_tokens = cu[S], .n_seqs = S, .tokens = tok, .targets = tgt, .cu_seqlens = cu,
                     .temperature = 0.9f };
    if (model_forward(m, &b, lp, en, err)) fail_msg("model_forward: %s", err);
}

static void test_forward_sequences_bitwise(void **state) {
    (void)state;
    enum { A = 150, B = 77, C = 230, N = A + B + C };
    int32_t tok[N], tgt[N], tok2[N], tgt2[N];
    const int32_t cu[4] = { 0, A, A + B, N }, len[3] = { A, B, C };
    for (int i = 0; i < N; i++) tok[i] = (int32_t)(next_u64() % 1000u);
    for (int s = 0; s < 3; s++)
        for (int i = cu[s]; i < cu[s + 1]; i++) tgt[i] = i + 1 < cu[s + 1] ? tok[i + 1] : -1;
    Model *mi = make_model(0), *mt = make_model(1);
    assert_memory_equal(tu_params(mi), tu_params(mt), model_bytes_params(mi));
    static float lp[N], en[N], lpt[N], ent[N], lp1[N], en1[N], lp2[N], en2[N];
    forward(mi, tok, tgt, cu, 3, lp, en);
    forward(mt, tok, tgt, cu, 3, lpt, ent);
    assert_memory_equal(lp, lpt, sizeof lp);                 /* inference mode == train mode, bitwise */
    assert_memory_equal(en, ent, sizeof en);
    for (int i = 0; i < N; i++) assert_true(isfinite(lp[i]) && isfinite(en[i]) && lp[i] <= 0.0f);
    for (int s = 0; s < 3; s++) {                             /* each sequence alone */
        int32_t cu1[2] = { 0, len[s] };
        forward(mi, tok + cu[s], tgt + cu[s], cu1, 1, lp1, en1);
        assert_memory_equal(lp1, lp + cu[s], (size_t)len[s] * sizeof(float));
        assert_memory_equal(en1, en + cu[s], (size_t)len[s] * sizeof(float));
    }
    /* model_pack_weights' snapshot: bitwise the same; a train model refuses it; model_init_random drops it */
    char err[ERR_LEN];
    assert_int_equal(model_pack_weights(mt, err), ERR_INVAL);
    assert_int_equal(model_pack_weights(mi, err), 0);
    forward(mi, tok, tgt, cu, 3, lp1, en1);
    assert_memory_equal(lp1, lp, sizeof lp);
    assert_memory_equal(en1, en, sizeof en);
    model_init_random(mi, 12, 0.08f);                        /* new weights: the snapshot must not be used */
    model_init_random(mt, 12, 0.08f);
    forward(mi, tok, tgt, cu, 3, lp1, en1);
    forward(mt, tok, tgt, cu, 3, lpt, ent);
    assert_memory_equal(lp1, lpt, sizeof lp);
    assert_true(memcmp(lp1, lp, sizeof lp) != 0);
    model_init_random(mi, 11, 0.08f);                        /* back to the first weights, unpacked */
    model_unpack_weights(mi);
    /* order C, A (B dropped): each where it now sits */
    memcpy(tok2, tok + cu[2], C * sizeof(int32_t));
    memcpy(tgt2, tgt + cu[2], C * sizeof(int32_t));
    memcpy(tok2 + C, tok, A * sizeof(int32_t));
    memcpy(tgt2 + C, tgt, A * sizeof(int32_t));
    const int32_t cu2[3] = { 0, C, C + A };
    forward(mi, tok2, tgt2, cu2, 2, lp2, en2);
    assert_memory_equal(lp2, lp + cu[2], C * sizeof(float));
    assert_memory_equal(lp2 + C, lp, A * sizeof(float));
    assert_memory_equal(en2 + C, en, A * sizeof(float));
    model_free(mi);
    model_free(mt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_layout),
        cmocka_unit_test(test_packed_matches_fmaf_chain),
        cmocka_unit_test(test_packed_rows_invariant),
        cmocka_unit_test(test_packed_swiglu),
        cmocka_unit_test(test_forward_sequences_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
