/* tests/unit/test_dapo_rollout_corr.c: rollout-vs-learner diagnostics and TIS weights
 * (common/dapo/rollout_corr.h) — a hand-computed batch, bad input, and verl's own compute_offpolicy_metrics,
 * compute_rollout_correction_weights (token and sequence level) and the vanilla loss with those weights and
 * its autograd gradient (tests/data/dapo/rollout_corr_cases.bin, from make_dapo_fixtures.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dapo/loss.h"
#include "dapo/rollout_corr.h"
#include "dapo_fixture.h"

#define CLOSE(a, b, atol, rtol) (fabs((double)(a) - (double)(b)) <= (atol) + (rtol) * fabs((double)(b)))
#define ASSERT_CLOSE(a, b, atol, rtol) do { double a_ = (a), b_ = (b); if (!CLOSE(a_, b_, atol, rtol)) { \
    fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, #a, a_, b_); fail(); } } while (0)

static void test_hand_computed(void **state) {
    (void)state;
    /* seq 0: logp {-1, -2}, rollout {-1.5, -2}; seq 1: logp {-3}, rollout {-2} */
    float lp[3] = { -1, -2, -3 }, rl[3] = { -1.5f, -2, -2 };
    int off[3] = { 0, 2, 3 };
    RolloutCorrStats st;
    char err[ERR_LEN];
    assert_int_equal(rollout_corr_metrics(lp, rl, NULL, off, 2, &st, err), 0);
    ASSERT_CLOSE(st.abs_logprob_diff, (0.5 + 0 + 1) / 3.0, 1e-7, 1e-6);
    ASSERT_CLOSE(st.kl, (-0.5 + 0 + 1) / 3.0, 1e-7, 1e-6);
    /* per-sequence mean diffs (rollout - learner): seq 0: -1.75 - -1.5 = -0.25; seq 1: -2 - -3 = 1 */
    ASSERT_CLOSE(st.log_ppl_diff, (-0.25 + 1) / 2, 1e-7, 1e-6);
    ASSERT_CLOSE(st.log_ppl_abs_diff, (0.25 + 1) / 2, 1e-7, 1e-6);
    ASSERT_CLOSE(st.log_ppl_diff_max, 1, 1e-7, 1e-6);
    ASSERT_CLOSE(st.log_ppl_diff_min, -0.25, 1e-7, 1e-6);
    ASSERT_CLOSE(st.training_log_ppl, (1.5 + 3) / 2, 1e-7, 1e-6);
    ASSERT_CLOSE(st.chi2_seq, (exp(2 * 0.5) + exp(2 * -1.0)) / 2 - 1, 1e-6, 1e-6);
    /* TIS weights, token: exp(0.5) = 1.65, exp(0) = 1, exp(-1) = 0.37; sequence: exp(0.5), exp(-1); cap 1.5 */
    float w[3];
    assert_int_equal(rollout_corr_is_weights(lp, rl, NULL, off, 2, ROLLOUT_IS_TOKEN, 1.5, w, err), 0);
    ASSERT_CLOSE(w[0], 1.5, 0, 0);
    ASSERT_CLOSE(w[1], 1.0, 0, 0);
    ASSERT_CLOSE(w[2], exp(-1.0), 1e-7, 1e-6);
    assert_int_equal(rollout_corr_is_weights(lp, rl, NULL, off, 2, ROLLOUT_IS_SEQUENCE, 2.0, w, err), 0);
    ASSERT_CLOSE(w[0], exp(0.5), 1e-7, 1e-6);
    ASSERT_CLOSE(w[1], exp(0.5), 1e-7, 1e-6);
    ASSERT_CLOSE(w[2], exp(-1.0), 1e-7, 1e-6);
}

static void test_bad_input(void **state) {
    (void)state;
    float lp[2] = { -1, -1 };
    int off[2] = { 0, 2 }, bad[2] = { 1, 2 };
    uint8_t none[2] = { 0, 0 };
    RolloutCorrStats st;
    float w[2];
    char err[ERR_LEN];
    assert_int_equal(rollout_corr_metrics(lp, lp, none, off, 1, &st, err), ERR_INVAL);   /* no token */
    assert_int_equal(rollout_corr_metrics(lp, NULL, NULL, off, 1, &st, err), ERR_INVAL);
    assert_int_equal(rollout_corr_metrics(lp, lp, NULL, bad, 1, &st, err), ERR_INVAL);
    assert_int_equal(rollout_corr_metrics(lp, lp, NULL, off, 0, &st, err), ERR_INVAL);
    assert_int_equal(rollout_corr_is_weights(lp, lp, NULL, off, 1, ROLLOUT_IS_TOKEN, 0.0, w, err), ERR_INVAL);
    assert_int_equal(rollout_corr_is_weights(lp, lp, NULL, off, 1, (RolloutIsLevel)5, 2.0, w, err), ERR_INVAL);
    assert_int_equal(rollout_corr_is_weights(lp, lp, NULL, off, 1, ROLLOUT_IS_TOKEN, 2.0, NULL, err), ERR_INVAL);
}

static void test_against_verl(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/rollout_corr_cases.bin", &fx), 0);
    const FxTensor *nc = fx_get(&fx, "n_cases", FX_I32);
    assert_non_null(nc);
    int n = ((int32_t *)nc->data)[0];
    assert_true(n >= 6);
    for (int c = 0; c < n; c++) {
        char name[64];
#define GET(var, key, dt) snprintf(name, sizeof name, "r%d/%s", c, key); const FxTensor *var = fx_get(&fx, name, dt); assert_non_null(var)
        GET(shape, "shape", FX_I32);
        GET(lp, "logp", FX_F32);
        GET(rl, "rlogp", FX_F32);
        GET(mk, "mask", FX_I32);
        GET(met, "metrics", FX_F64);
        GET(wt, "weights", FX_F32);
        GET(ol, "old_logp", FX_F32);
        GET(ad, "adv", FX_F32);
        GET(pl, "pg_loss", FX_F64);
        GET(gl, "dlogp", FX_F32);
#undef GET
        const int32_t *sh = shape->data;
        int B = sh[0], T = sh[1], N = B * T;
        uint8_t mask[128];
        int off[16];
        assert_true(N <= 128 && B < 16);
        for (int t = 0; t < N; t++) mask[t] = (uint8_t)((int32_t *)mk->data)[t];
        for (int s = 0; s <= B; s++) off[s] = s * T;
        RolloutCorrStats st;
        char err[ERR_LEN];
        assert_int_equal(rollout_corr_metrics(lp->data, rl->data, mask, off, B, &st, err), 0);
        const double *m = met->data;
        const double got[13] = { st.training_ppl, st.training_log_ppl, st.rollout_ppl, st.rollout_log_ppl, st.kl,
                                 st.k3_kl, st.log_ppl_diff, st.log_ppl_abs_diff, st.log_ppl_diff_max,
                                 st.log_ppl_diff_min, st.ppl_ratio, st.chi2_token, st.chi2_seq };
        for (int k = 0; k < 13; k++) {
            if (!CLOSE(got[k], m[k], 1e-5, 1e-5)) fprintf(stderr, "case %d metric %d: %.9g vs verl %.9g\n", c, k, got[k], m[k]);
            assert_true(CLOSE(got[k], m[k], 1e-5, 1e-5));
        }
        float w[128], g[128];
        assert_int_equal(rollout_corr_is_weights(lp->data, rl->data, mask, off, B,
                                                 sh[2] ? ROLLOUT_IS_SEQUENCE : ROLLOUT_IS_TOKEN, 2.0, w, err), 0);
        for (int t = 0; t < N; t++) ASSERT_CLOSE(w[t], ((float *)wt->data)[t], 1e-7, 1e-5);
        LossParams p;
        loss_params_default(&p);
        LossInput in = { lp->data, ol->data, ad->data, mask, NULL, off, B, w };
        LossStats ls;
        assert_int_equal(loss_compute(&p, &in, NULL, g, NULL, &ls, err), 0);
        ASSERT_CLOSE(ls.pg_loss, ((double *)pl->data)[0], 1e-6, 1e-5);
        for (int t = 0; t < N; t++) ASSERT_CLOSE(g[t], ((float *)gl->data)[t], 1e-12, 1e-5);
    }
    fx_free(&fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_computed),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_against_verl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
