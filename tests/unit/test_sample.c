/* tests/unit/test_sample.c: the sampler (common/model/sample.h): kept sets equal Hugging Face's own
 * temperature / top-k / top-p warpers on 36 random 1000-token rows (tests/data/dapo/sample_cases.bin, from
 * tests/reference/make_dapo_fixtures.py), the returned log-prob equals torch's full-vocabulary log_softmax of
 * logits / temperature, hand-made top-k / top-p / greedy cases and ties, empirical frequencies over many
 * Philox draws match the renormalised distribution (chi-square), -inf logits never drawn, determinism,
 * bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "dapo_fixture.h"
#include "model/sample.h"

static float gauss(void) {
    double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = (rand() + 1.0) / (RAND_MAX + 2.0);
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static void test_against_hf(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/sample_cases.bin", &fx), 0);
    const FxTensor *nc = fx_get(&fx, "n_cases", FX_I32), *vt = fx_get(&fx, "V", FX_I32);
    assert_true(nc && vt);
    int n = ((int32_t *)nc->data)[0], V = ((int32_t *)vt->data)[0];
    assert_true(n >= 36 && V == 1000);
    void *scratch = malloc(sample_scratch_bytes(V));
    int32_t kept[1000], tok;
    for (int c = 0; c < n; c++) {
        char name[64];
        snprintf(name, sizeof name, "s%d/logits", c);
        const FxTensor *lg = fx_get(&fx, name, FX_F32);
        snprintf(name, sizeof name, "s%d/params", c);
        const FxTensor *pr = fx_get(&fx, name, FX_F64);
        snprintf(name, sizeof name, "s%d/kept", c);
        const FxTensor *kp = fx_get(&fx, name, FX_I32);
        snprintf(name, sizeof name, "s%d/logprob", c);
        const FxTensor *lp = fx_get(&fx, name, FX_F32);
        assert_true(lg && pr && kp && lp);
        const double *p = pr->data;
        SampleParams sp = { (float)p[0], (float)p[1], (int)p[2], 0 };
        int nk = 0;
        char err[ERR_LEN];
        assert_int_equal(sample_support(lg->data, V, &sp, scratch, kept, &nk, err), 0);
        int want = 0;
        for (int i = 0; i < V; i++) want += ((int32_t *)kp->data)[i];
        if (nk != want) fprintf(stderr, "case %d (T %g p %g k %d): kept %d, HF kept %d\n", c, p[0], p[1], (int)p[2], nk, want);
        assert_int_equal(nk, want);
        for (int j = 0; j < nk; j++) assert_int_equal(((int32_t *)kp->data)[kept[j]], 1);
        /* draws land in the kept set; the log-prob is torch's full log_softmax(logits / T) */
        for (int d = 0; d < 50; d++) {
            float logprob;
            assert_int_equal(sample_token(lg->data, V, &sp, rng_uniform(5, (uint64_t)c, 0, (uint32_t)d), scratch,
                                          &tok, &logprob, err), 0);
            assert_int_equal(((int32_t *)kp->data)[tok], 1);
            float ref = ((float *)lp->data)[tok];
            assert_true(fabsf(logprob - ref) <= 2e-5f + 2e-6f * fabsf(ref));
        }
        float l2;
        assert_int_equal(sample_logprob(lg->data, V, sp.temperature, 17, &l2, err), 0);
        assert_true(fabsf(l2 - ((float *)lp->data)[17]) <= 2e-5f + 2e-6f * fabsf(((float *)lp->data)[17]));
    }
    free(scratch);
    fx_free(&fx);
}

static void test_sets_by_hand(void **state) {
    (void)state;
    char err[ERR_LEN];
    int32_t kept[8];
    int nk;
    /* top-k with a tie: 5 at ids 1 and 3 -> lower id first */
    float lg[5] = { 1, 5, 3, 5, 2 };
    SampleParams p = { 1.0f, 1.0f, 2, 0 };
    assert_int_equal(sample_support(lg, 5, &p, NULL, kept, &nk, err), 0);
    assert_int_equal(nk, 2);
    assert_true(kept[0] == 1 && kept[1] == 3);
    p.top_k = 3;
    assert_int_equal(sample_support(lg, 5, &p, NULL, kept, &nk, err), 0);
    assert_true(nk == 3 && kept[2] == 2);
    p.top_k = 0;   /* off: the whole row, descending */
    assert_int_equal(sample_support(lg, 5, &p, NULL, kept, &nk, err), 0);
    int32_t all[5] = { 1, 3, 2, 4, 0 };
    assert_int_equal(nk, 5);
    assert_memory_equal(kept, all, sizeof all);
    /* top-p on probabilities 0.5, 0.2, 0.15, 0.1, 0.05 */
    float q[5] = { logf(0.2f), logf(0.05f), logf(0.5f), logf(0.15f), logf(0.1f) };
    const struct { float top_p; int n; } c[] = { { 0.45f, 1 }, { 0.69f, 2 }, { 0.71f, 3 }, { 0.84f, 3 }, { 0.86f, 4 },
                                                 { 0.96f, 5 }, { 1e-6f, 1 } };   /* cumulative 0.5, 0.7, 0.85, 0.95, 1 */
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        SampleParams pp = { 1.0f, c[i].top_p, -1, 0 };
        assert_int_equal(sample_support(q, 5, &pp, NULL, kept, &nk, err), 0);
        assert_int_equal(nk, c[i].n);
        assert_int_equal(kept[0], 2);
    }
    /* top-k then top-p renormalised over the top-k: k = 2 keeps {0.5, 0.2} -> 0.714, 0.286; p = 0.7 -> 1 */
    SampleParams kp = { 1.0f, 0.7f, 2, 0 };
    assert_int_equal(sample_support(q, 5, &kp, NULL, kept, &nk, err), 0);
    assert_int_equal(nk, 1);
    kp.top_p = 0.72f;
    assert_int_equal(sample_support(q, 5, &kp, NULL, kept, &nk, err), 0);
    assert_int_equal(nk, 2);
    /* temperature sharpens: T = 0.25 makes 0.5 vs 0.2 into 0.5^4 : 0.2^4 -> p = 0.9 keeps one token */
    SampleParams tp = { 0.25f, 0.9f, 0, 0 };
    assert_int_equal(sample_support(q, 5, &tp, NULL, kept, &nk, err), 0);
    assert_int_equal(nk, 1);
}

static void test_greedy(void **state) {
    (void)state;
    char err[ERR_LEN];
    float lg[6] = { 0.5f, 2.0f, -1.0f, 2.0f, 1.0f, -INFINITY };
    int32_t tok;
    float lp;
    SampleParams g = { 0.7f, 0.9f, 3, 1 };
    assert_int_equal(sample_token(lg, 6, &g, 0.99, NULL, &tok, &lp, err), 0);
    assert_int_equal(tok, 1);   /* first of the tied maxima, as torch.argmax */
    float ref;
    assert_int_equal(sample_logprob(lg, 6, 0.7f, 1, &ref, err), 0);
    assert_true(lp == ref);
    /* temperature 0 means greedy; the log-prob then uses temperature 1 */
    SampleParams z = { 0.0f, 1.0f, 0, 0 };
    assert_int_equal(sample_token(lg, 6, &z, 0.3, NULL, &tok, &lp, err), 0);
    assert_int_equal(tok, 1);
    double s = 0;
    for (int i = 0; i < 5; i++) s += exp(lg[i] - 2.0);
    assert_true(fabs(lp - (-log(s))) < 1e-6);
    int32_t kept[6];
    int nk;
    assert_int_equal(sample_support(lg, 6, &z, NULL, kept, &nk, err), 0);
    assert_true(nk == 1 && kept[0] == 1);
}

/* log-prob under the full vocabulary, computed here in double */
static double full_logprob(const float *lg, int V, float T, int tok) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < V; i++) if (lg[i] / T > m) m = lg[i] / T;
    for (int i = 0; i < V; i++) s += exp((double)(lg[i] / T) - m);
    return (double)(lg[tok] / T) - m - log(s);
}

/* Frequencies over N Philox draws vs the renormalised kept distribution (chi-square, df <= 7; p = 1e-4
 * critical value 29.9 at df 7), for the untruncated O(V) path and for top-k / top-p; truncated tokens and
 * -inf logits are never drawn. Deterministic seeds. */
static void test_frequencies(void **state) {
    (void)state;
    enum { V = 8, N = 200000 };
    float lg[V] = { 0.3f, -1.2f, 1.1f, 0.0f, -INFINITY, 0.8f, -0.4f, 1.5f };
    const SampleParams ps[4] = {
        { 1.0f, 1.0f, 0, 0 }, { 0.8f, 1.0f, 4, 0 }, { 1.3f, 0.8f, 0, 0 }, { 1.0f, 0.75f, 5, 0 },
    };
    char err[ERR_LEN];
    void *scratch = malloc(sample_scratch_bytes(V));
    for (int c = 0; c < 4; c++) {
        int32_t kept[V];
        int nk;
        assert_int_equal(sample_support(lg, V, &ps[c], scratch, kept, &nk, err), 0);
        double w[V] = { 0 }, z = 0;
        for (int j = 0; j < nk; j++) { w[kept[j]] = exp(lg[kept[j]] / ps[c].temperature); z += w[kept[j]]; }
        long cnt[V] = { 0 };
        for (uint32_t i = 0; i < N; i++) {
            int32_t tok;
            float lp;
            assert_int_equal(sample_token(lg, V, &ps[c], rng_uniform(77, (uint64_t)c, 3, i), scratch, &tok, &lp, err), 0);
            cnt[tok]++;
            if (i < 64) assert_true(fabs(lp - full_logprob(lg, V, ps[c].temperature, tok)) < 1e-5);
        }
        double chi = 0;
        for (int t = 0; t < V; t++) {
            if (w[t] == 0) { assert_int_equal(cnt[t], 0); continue; }
            double e = N * w[t] / z;
            chi += (cnt[t] - e) * (cnt[t] - e) / e;
        }
        assert_int_equal(cnt[4], 0);   /* -inf */
        if (chi >= 29.9) fprintf(stderr, "params %d: chi-square %.2f\n", c, chi);
        assert_true(chi < 29.9);
    }
    free(scratch);
}

/* Many blocks (V = 5000 > 256): the block-skipping inverse-CDF scan picks the same token as a plain
 * sequential scan in double, and token-range frequencies match the softmax (chi-square, df 9: 33.7). */
static void test_untruncated_blocks(void **state) {
    (void)state;
    enum { V = 5000, N = 60000 };
    float *lg = malloc(V * sizeof *lg);
    srand(17);
    for (int i = 0; i < V; i++) lg[i] = 1.5f * gauss() + (i % 777 == 5 ? 6.0f : 0.0f);
    lg[123] = -INFINITY;
    void *scratch = malloc(sample_scratch_bytes(V));
    char err[ERR_LEN];
    const SampleParams p = { 0.9f, 1.0f, 0, 0 };
    double m = -INFINITY, z = 0, wsum[10] = { 0 };
    for (int i = 0; i < V; i++) if (lg[i] / p.temperature > m) m = lg[i] / p.temperature;
    for (int i = 0; i < V; i++) { double w = exp(lg[i] / p.temperature - m); z += w; wsum[i / (V / 10)] += w; }
    long cnt[10] = { 0 };
    int same = 0;
    for (uint32_t d = 0; d < N; d++) {
        double u = rng_uniform(8, 9, 10, d);
        int32_t tok;
        float lp;
        assert_int_equal(sample_token(lg, V, &p, u, scratch, &tok, &lp, err), 0);
        assert_true(tok != 123);
        cnt[tok / (V / 10)]++;
        if (d < 2000) {
            double cum = 0, target = u * z;
            int ref = -1;
            for (int i = 0; i < V; i++) { cum += exp(lg[i] / p.temperature - m); if (cum > target) { ref = i; break; } }
            same += ref == tok;
        }
    }
    assert_true(same >= 1998);   /* only a draw within ~1e-7 of a boundary may differ (fp32 vs double weights) */
    double chi = 0;
    for (int b = 0; b < 10; b++) { double e = N * wsum[b] / z; chi += (cnt[b] - e) * (cnt[b] - e) / e; }
    if (chi >= 33.7) fprintf(stderr, "chi-square %.2f\n", chi);
    assert_true(chi < 33.7);
    free(scratch);
    free(lg);
}

static void test_determinism_and_large_vocab(void **state) {
    (void)state;
    enum { V = 151936 };
    float *lg = malloc(V * sizeof *lg);
    srand(3);
    for (int i = 0; i < V; i++) lg[i] = (float)(rand() % 20000) / 1000.0f - 10.0f;
    void *scratch = malloc(sample_scratch_bytes(V));
    char err[ERR_LEN];
    const SampleParams ps[3] = { { 1.0f, 1.0f, -1, 0 }, { 0.6f, 0.95f, -1, 0 }, { 1.0f, 0.7f, 20, 0 } };
    for (int c = 0; c < 3; c++) {
        for (uint32_t pos = 0; pos < 20; pos++) {
            double u = rng_uniform(1, 2, 3, pos);
            int32_t t1, t2;
            float l1, l2;
            assert_int_equal(sample_token(lg, V, &ps[c], u, scratch, &t1, &l1, err), 0);
            assert_int_equal(sample_token(lg, V, &ps[c], u, NULL, &t2, &l2, err), 0);   /* own scratch */
            assert_true(t1 == t2 && l1 == l2);
            assert_true(t1 >= 0 && t1 < V);
            assert_true(fabs(l1 - full_logprob(lg, V, ps[c].temperature, t1)) < 1e-4);
        }
    }
    free(scratch);
    free(lg);
}

/* Large vocabulary: the candidate prefilters (strided-sample threshold for top-k, mass bound for the nucleus)
 * must give exactly the set a brute-force full sort gives. */
typedef struct { double x; int i; } Ref;
static int ref_cmp(const void *a, const void *b) {
    const Ref *x = a, *y = b;
    if (x->x != y->x) return x->x > y->x ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int brute_support(const float *lg, int V, const SampleParams *p, Ref *r, int32_t *out) {
    for (int i = 0; i < V; i++) { r[i].x = lg[i] / p->temperature; r[i].i = i; }
    qsort(r, (size_t)V, sizeof *r, ref_cmp);
    int k = p->top_k > 0 && p->top_k < V ? p->top_k : V;
    double z = 0;
    for (int j = 0; j < k; j++) z += exp(r[j].x - r[0].x);
    int n = k;
    if (p->top_p < 1.0f) {
        double cum = 0;
        for (int j = 0; j < k; j++) { cum += exp(r[j].x - r[0].x); if (cum >= p->top_p * z) { n = j + 1; break; } }
    }
    for (int j = 0; j < n; j++) out[j] = r[j].i;
    return n;
}

static void test_large_vocab_sets(void **state) {
    (void)state;
    enum { V = 151936 };
    float *lg = malloc(V * sizeof *lg);
    Ref *r = malloc(V * sizeof *r);
    int32_t *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    void *scratch = malloc(sample_scratch_bytes(V));
    char err[ERR_LEN];
    srand(99);
    const SampleParams ps[] = {
        { 1.0f, 1.0f, 1, 0 }, { 1.0f, 1.0f, 50, 0 }, { 0.7f, 1.0f, 5000, 0 }, { 1.0f, 0.5f, -1, 0 },
        { 1.0f, 0.9f, -1, 0 }, { 0.6f, 0.95f, -1, 0 }, { 1.0f, 0.8f, 40, 0 }, { 1.3f, 0.99f, 200, 0 },
    };
    for (int row = 0; row < 3; row++) {
        for (int i = 0; i < V; i++)   /* peaked like an LM head: a Gaussian bulk, a few strong tokens, ties */
            lg[i] = row == 2 ? (float)(rand() % 64) * 0.25f : 2.5f * gauss() + (i % (4000 + 997 * row) == 0 ? 11.0f : 0.0f);
        for (size_t c = 0; c < sizeof ps / sizeof ps[0]; c++) {
            int na = 0, nb = brute_support(lg, V, &ps[c], r, b);
            assert_int_equal(sample_support(lg, V, &ps[c], scratch, a, &na, err), 0);
            if (na != nb) fprintf(stderr, "row %d params %zu: kept %d, brute force %d\n", row, c, na, nb);
            assert_int_equal(na, nb);
            assert_memory_equal(a, b, (size_t)na * sizeof *a);
        }
    }
    free(scratch); free(b); free(a); free(r); free(lg);
}

static void test_bad_input(void **state) {
    (void)state;
    char err[ERR_LEN];
    float lg[3] = { 0, 1, 2 };
    int32_t tok, kept[3];
    int nk;
    float lp;
    SampleParams p = { 1.0f, 1.0f, 0, 0 };
    assert_int_equal(sample_token(lg, 0, &p, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    assert_int_equal(sample_token(NULL, 3, &p, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    assert_int_equal(sample_token(lg, 3, NULL, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    assert_int_equal(sample_token(lg, 3, &p, 1.0, NULL, &tok, &lp, err), ERR_INVAL);
    assert_int_equal(sample_token(lg, 3, &p, -0.1, NULL, &tok, &lp, err), ERR_INVAL);
    assert_int_equal(sample_token(lg, 3, &p, NAN, NULL, &tok, &lp, err), ERR_INVAL);
    assert_int_equal(sample_token(lg, 3, &p, 0.5, NULL, NULL, &lp, err), ERR_INVAL);
    p.top_p = 0.0f;
    assert_int_equal(sample_token(lg, 3, &p, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    assert_non_null(strstr(err, "top_p"));
    p.top_p = NAN;
    assert_int_equal(sample_support(lg, 3, &p, NULL, kept, &nk, err), ERR_INVAL);
    p.top_p = 1.0f;
    p.temperature = NAN;
    assert_int_equal(sample_token(lg, 3, &p, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    p.temperature = 1e-40f;   /* 2 / 1e-40 overflows fp32 */
    assert_int_equal(sample_token(lg, 3, &p, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    assert_non_null(strstr(err, "overflows"));
    p.temperature = 1.0f;
    float nan_row[3] = { 0, NAN, 1 }, inf_row[3] = { 0, INFINITY, 1 };
    float dead[3] = { -INFINITY, -INFINITY, -INFINITY };
    assert_int_equal(sample_token(nan_row, 3, &p, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    assert_non_null(strstr(err, "NaN"));
    assert_int_equal(sample_token(inf_row, 3, &p, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    assert_int_equal(sample_token(dead, 3, &p, 0.5, NULL, &tok, &lp, err), ERR_INVAL);
    assert_int_equal(sample_logprob(lg, 3, 1.0f, 3, &lp, err), ERR_INVAL);
    assert_int_equal(sample_logprob(lg, 3, 1.0f, -1, &lp, err), ERR_INVAL);
    assert_int_equal(sample_support(lg, 3, &p, NULL, NULL, &nk, err), ERR_INVAL);
    /* u = 0 and u just below 1 pick the first / last token with non-zero weight */
    float edge[4] = { -INFINITY, 0, 0, -INFINITY };
    assert_int_equal(sample_token(edge, 4, &p, 0.0, NULL, &tok, &lp, err), 0);
    assert_int_equal(tok, 1);
    assert_int_equal(sample_token(edge, 4, &p, 1.0 - 0x1p-53, NULL, &tok, &lp, err), 0);
    assert_int_equal(tok, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_hf),
        cmocka_unit_test(test_sets_by_hand),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_frequencies),
        cmocka_unit_test(test_untruncated_blocks),
        cmocka_unit_test(test_determinism_and_large_vocab),
        cmocka_unit_test(test_large_vocab_sets),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
