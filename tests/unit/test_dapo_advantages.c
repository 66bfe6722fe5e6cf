/* tests/unit/test_dapo_advantages.c: GRPO outcome advantages (common/dapo/advantages.h) — hand-computed
 * groups (unbiased std, norm_adv_by_std_in_grpo false, a group of one, all-equal rewards -> exactly 0, never
 * NaN), bad input, and verl's own compute_grpo_outcome_advantage on mixed group sizes
 * (tests/data/dapo/grpo_cases.bin, written by tests/reference/make_dapo_fixtures.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dapo/advantages.h"
#include "dapo_fixture.h"

#define ASSERT_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); if (!(fabs(a_ - b_) <= (tol))) { \
    fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, #a, a_, b_); fail(); } } while (0)

static void test_hand_computed(void **state) {
    (void)state;
    /* group {1, -1, -1, -1}: mean -0.5, unbiased std sqrt(3 / 3) = 1 -> A = {1.5, -0.5 x3} / (1 + 1e-6)
     * group {2, 4}: mean 3, std sqrt(2) -> A = -+1 / sqrt(2)
     * group {0.5}: a group of one -> mean 0, std 1 -> 0.5 / (1 + 1e-6) */
    float r[7] = { 1, -1, -1, -1, 2, 4, 0.5f }, a[7];
    int sizes[3] = { 4, 2, 1 };
    char err[ERR_LEN];
    assert_int_equal(adv_grpo(r, sizes, 3, true, ADV_GRPO_EPS, a, err), 0);
    ASSERT_NEAR(a[0], 1.5 / (1 + 1e-6), 1e-6);
    ASSERT_NEAR(a[1], -0.5 / (1 + 1e-6), 1e-6);
    ASSERT_NEAR(a[3], -0.5 / (1 + 1e-6), 1e-6);
    ASSERT_NEAR(a[4], -1.0 / (sqrt(2.0) + 1e-6), 1e-6);
    ASSERT_NEAR(a[5], 1.0 / (sqrt(2.0) + 1e-6), 1e-6);
    ASSERT_NEAR(a[6], 0.5 / (1 + 1e-6), 1e-7);
    /* Dr. GRPO: no std */
    assert_int_equal(adv_grpo(r, sizes, 3, false, ADV_GRPO_EPS, a, err), 0);
    ASSERT_NEAR(a[0], 1.5, 1e-6);
    ASSERT_NEAR(a[2], -0.5, 1e-6);
    ASSERT_NEAR(a[4], -1.0, 1e-6);
    ASSERT_NEAR(a[6], 0.5, 0);
    /* in place */
    float rr[7];
    memcpy(rr, r, sizeof rr);
    assert_int_equal(adv_grpo(rr, sizes, 3, false, ADV_GRPO_EPS, rr, err), 0);
    ASSERT_NEAR(rr[5], 1.0, 1e-6);
}

static void test_all_equal_is_zero(void **state) {
    (void)state;
    /* all-equal groups (including values whose fp mean is inexact) give exactly 0 — never NaN or huge */
    float r[10] = { 0.1f, 0.1f, 0.1f, -1, -1, -1, -1, 0.7f, 0.7f, 0.7f }, a[10];
    int sizes[3] = { 3, 4, 3 };
    char err[ERR_LEN];
    for (int norm = 0; norm < 2; norm++) {
        assert_int_equal(adv_grpo(r, sizes, 3, norm, ADV_GRPO_EPS, a, err), 0);
        for (int i = 0; i < 10; i++) assert_true(a[i] == 0.0f);
    }
    /* eps = 0 with equal rewards: still 0, not 0/0 */
    assert_int_equal(adv_grpo(r, sizes, 3, true, 0.0, a, err), 0);
    for (int i = 0; i < 10; i++) assert_true(a[i] == 0.0f && !isnan(a[i]));
}

static void test_bad_input(void **state) {
    (void)state;
    float r[3] = { 1, NAN, 0 }, a[3];
    int sizes[2] = { 2, 1 }, zero[2] = { 0, 3 };
    char err[ERR_LEN];
    assert_int_equal(adv_grpo(r, sizes, 2, true, ADV_GRPO_EPS, a, err), ERR_INVAL);
    assert_non_null(strstr(err, "response 1"));
    r[1] = INFINITY;
    assert_int_equal(adv_grpo(r, sizes, 2, true, ADV_GRPO_EPS, a, err), ERR_INVAL);
    r[1] = 0;
    assert_int_equal(adv_grpo(r, zero, 2, true, ADV_GRPO_EPS, a, err), ERR_INVAL);
    assert_non_null(strstr(err, "group 0"));
    assert_int_equal(adv_grpo(r, sizes, 2, true, -1.0, a, err), ERR_INVAL);
    assert_int_equal(adv_grpo(NULL, sizes, 2, true, ADV_GRPO_EPS, a, err), ERR_INVAL);
    assert_int_equal(adv_grpo(r, sizes, -1, true, ADV_GRPO_EPS, a, err), ERR_INVAL);
    assert_int_equal(adv_grpo(NULL, NULL, 0, true, ADV_GRPO_EPS, NULL, err), 0);   /* empty batch */
}

static void test_against_verl(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/grpo_cases.bin", &fx), 0);
    const FxTensor *sz = fx_get(&fx, "grpo/sizes", FX_I32), *rw = fx_get(&fx, "grpo/reward", FX_F32);
    const FxTensor *an = fx_get(&fx, "grpo/adv_norm", FX_F32), *au = fx_get(&fx, "grpo/adv_nonorm", FX_F32);
    assert_true(sz && rw && an && au);
    int n = (int)rw->n;
    assert_true(n > 20 && an->n == rw->n);
    float a[64];
    char err[ERR_LEN];
    assert_int_equal(adv_grpo(rw->data, sz->data, (int)sz->n, true, ADV_GRPO_EPS, a, err), 0);
    for (int i = 0; i < n; i++) ASSERT_NEAR(a[i], ((float *)an->data)[i], 2e-6 + 2e-6 * fabs(((float *)an->data)[i]));
    assert_int_equal(adv_grpo(rw->data, sz->data, (int)sz->n, false, ADV_GRPO_EPS, a, err), 0);
    for (int i = 0; i < n; i++) ASSERT_NEAR(a[i], ((float *)au->data)[i], 2e-6 + 2e-6 * fabs(((float *)au->data)[i]));
    fx_free(&fx);
}

/* verl's other estimators (get_adv_estimator_fn) on make_dapo_fixtures.py's groups: each response's advantage within
 * 1e-5 relative (double here, fp32 torch there); the names and the refusals. */
static void test_estimators_against_verl(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/estimators.bin", &fx), 0);
    const FxTensor *nc = fx_get(&fx, "n_cases", FX_I32);
    assert_non_null(nc);
    int n_cases = ((int32_t *)nc->data)[0], seen[ADV_REINFORCE_PP_BASELINE + 1] = {0};
    for (int c = 0; c < n_cases; c++) {
        char name[64];
#define GET(var, key, dt) snprintf(name, sizeof name, "e%d/%s", c, key); const FxTensor *var = fx_get(&fx, name, dt); assert_non_null(var)
        GET(est, "est", FX_I32);
        GET(sz, "sizes", FX_I32);
        GET(rw, "reward", FX_F32);
        GET(tk, "tokens", FX_I32);
        GET(ad, "adv", FX_F32);
#undef GET
        AdvEstimator e = (AdvEstimator)((int32_t *)est->data)[0];
        bool norm = ((int32_t *)est->data)[1] != 0;
        seen[e]++;
        float out[128];
        char err[ERR_LEN];
        assert_true(rw->n <= 128);
        assert_int_equal(adv_compute(e, rw->data, tk->data, sz->data, (int)sz->n, norm, ADV_GRPO_EPS, out, err), 0);
        const float *want = ad->data;
        for (uint32_t i = 0; i < rw->n; i++)
            if (fabs(out[i] - want[i]) > 1e-6 + 1e-5 * fabs(want[i]))
                fail_msg("case %d (%s, norm %d) response %u: %.9g vs verl %.9g", c, adv_estimator_name(e), norm, i,
                         out[i], want[i]);
    }
    for (int k = 0; k <= ADV_REINFORCE_PP_BASELINE; k++) assert_true(seen[k] >= 6);
    fx_free(&fx);
    AdvEstimator e;
    char err[ERR_LEN];
    assert_int_equal(adv_estimator_parse("rloo_vectorized", &e, err), 0);
    assert_int_equal(e, ADV_RLOO);
    assert_int_equal(adv_estimator_parse("gae", &e, err), ERR_INVAL);
    assert_non_null(strstr(err, "reinforce_plus_plus_baseline"));
    float r[3] = {1, 0, 1}, a[3];
    int one[2] = {2, 1}, tok[3] = {3, 2, 4};
    assert_int_equal(adv_compute(ADV_GRPO_PASSK, r, tok, one, 2, true, ADV_GRPO_EPS, a, err), ERR_INVAL);   /* size 1 */
    int none[3] = {0, 0, 1}, all3[1] = {3};
    assert_int_equal(adv_compute(ADV_REINFORCE_PP, r, none, all3, 1, true, ADV_GRPO_EPS, a, err), ERR_INVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_computed),
        cmocka_unit_test(test_all_equal_is_zero),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_against_verl),
        cmocka_unit_test(test_estimators_against_verl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
