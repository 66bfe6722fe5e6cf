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
        LossInput in = { lp->data, ol->data, ad->data, mask, NULL, off, B, w, NULL, 0, 0 };
        LossStats ls;
        assert_int_equal(loss_compute(&p, &in, NULL, g, NULL, &ls, err), 0);
        ASSERT_CLOSE(ls.pg_loss, ((double *)pl->data)[0], 1e-6, 1e-5);
        for (int t = 0; t < N; t++) ASSERT_CLOSE(g[t], ((float *)gl->data)[t], 1e-12, 1e-5);
    }
    fx_free(&fx);
}

/* RS_SPECS / IS_SPECS of make_dapo_fixtures.py, in order */
static const char *rs_specs[][2] = {
    {"token_k1", "0.5_2.0"}, {"token_k2", "0.05"}, {"token_k3", "0.05"}, {"seq_sum_k1", "0.3_3.0"},
    {"seq_sum_k2", "0.5"}, {"seq_sum_k3", "0.5"}, {"seq_mean_k1", "2.0"}, {"seq_mean_k2", "0.05"},
    {"seq_mean_k3", "0.05"}, {"seq_max_k2", "0.5"}, {"seq_max_k3", "0.5"},
    {"token_k1,seq_mean_k3", "0.5_2.0,0.05"}, {"seq_sum_k3,token_k2,token_k2", "0.4"},
};
static const char *is_specs[][2] = {{"token", "2.0"}, {"sequence", "2.0"}, {"token", "0.5_1.5"}, {"sequence", "0.2_3.0"},
                                    {"token", "1.2"}};

static void cfg(RolloutCorrConfig *rc, const char *is, const char *ist, const char *rs, const char *rst, int bypass) {
    char err[ERR_LEN];
    int r = rollout_corr_config_parse(is, ist, 0, rs, rst, bypass, "ppo_clip", 0, rc, err);
    if (r) fprintf(stderr, "config: %s\n", err);
    assert_int_equal(r, 0);
}

static void test_rs_is_against_verl(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/rollout_rs_cases.bin", &fx), 0);
    const FxTensor *nc = fx_get(&fx, "n_cases", FX_I32);
    assert_non_null(nc);
    int n = ((int32_t *)nc->data)[0];
    assert_true(n >= 3);
    char name[64], err[ERR_LEN];
    for (int c = 0; c < n; c++) {
#define GET(var, key, dt) snprintf(name, sizeof name, "c%d/%s", c, key); const FxTensor *var = fx_get(&fx, name, dt); assert_non_null(var)
        GET(shape, "shape", FX_I32);
        GET(lp, "logp", FX_F32);
        GET(rl, "rlogp", FX_F32);
        GET(ol, "old_logp", FX_F32);
        GET(ad, "adv", FX_F32);
        GET(mk, "mask", FX_I32);
        int B = ((int32_t *)shape->data)[0], T = ((int32_t *)shape->data)[1], N = B * T;
        uint8_t mask[128], keep[128];
        int off[16];
        float w[128], g[128];
        assert_true(N <= 128 && B < 16);
        for (int t = 0; t < N; t++) mask[t] = (uint8_t)((int32_t *)mk->data)[t];
        for (int s = 0; s <= B; s++) off[s] = s * T;
        for (size_t si = 0; si < sizeof rs_specs / sizeof rs_specs[0]; si++) {
            char key[32];
            snprintf(key, sizeof key, "rs%zu/keep", si);
            GET(kp, key, FX_I32);
            snprintf(key, sizeof key, "rs%zu/metrics", si);
            GET(met, key, FX_F64);
            RolloutCorrConfig rc;
            cfg(&rc, "null", "2.0", rs_specs[si][0], rs_specs[si][1], 0);
            RolloutRsStats st;
            assert_int_equal(rollout_corr_reject(&rc, lp->data, rl->data, mask, off, B, keep, &st, err), 0);
            for (int t = 0; t < N; t++) {
                if (keep[t] != (uint8_t)((int32_t *)kp->data)[t])
                    fprintf(stderr, "case %d %s: token %d kept %d, verl %d\n", c, rs_specs[si][0], t, keep[t],
                            ((int32_t *)kp->data)[t]);
                assert_int_equal(keep[t], ((int32_t *)kp->data)[t]);
            }
            const double *m = met->data;
            ASSERT_CLOSE(st.masked_fraction, m[0], 1e-6, 1e-5);
            ASSERT_CLOSE(st.seq_masked_fraction, m[1], 1e-6, 1e-5);
            assert_int_equal((int)met->n, 2 + 7 * rc.n_rs);
            for (int o = 0; o < rc.n_rs; o++) {
                const RolloutRsOptionStats *x = &st.opt[o];
                const double got[7] = {x->mean, x->max, x->min, x->fraction_high, x->fraction_low, x->masked_fraction,
                                       x->seq_masked_fraction};
                for (int k = 0; k < 7; k++) {
                    if (!CLOSE(got[k], m[2 + 7 * o + k], 1e-5, 1e-4))
                        fprintf(stderr, "case %d %s option %d metric %d: %.9g vs verl %.9g\n", c, rs_specs[si][0], o, k,
                                got[k], m[2 + 7 * o + k]);
                    assert_true(CLOSE(got[k], m[2 + 7 * o + k], 1e-5, 1e-4));
                }
            }
        }
        for (size_t ii = 0; ii < sizeof is_specs / sizeof is_specs[0]; ii++) {
            char key[32];
            snprintf(key, sizeof key, "is%zu/weights", ii);
            GET(wt, key, FX_F32);
            snprintf(key, sizeof key, "is%zu/metrics", ii);
            GET(met, key, FX_F64);
            RolloutCorrConfig rc;
            cfg(&rc, is_specs[ii][0], is_specs[ii][1], "", "", 0);
            RolloutIsStats st;
            assert_int_equal(rollout_corr_weights(&rc, lp->data, rl->data, mask, off, B, w, &st, err), 0);
            for (int t = 0; t < N; t++) ASSERT_CLOSE(w[t], ((float *)wt->data)[t], 1e-7, 1e-5);
            const double got[15] = {st.mean, st.max, st.min, st.ratio_fraction_high, st.ratio_fraction_low, st.std,
                                    st.eff_sample_size, st.seq_mean, st.seq_std, st.seq_max, st.seq_min,
                                    st.seq_max_deviation, st.seq_fraction_high, st.seq_fraction_low, st.oob_ratio};
            const double *m = met->data;
            for (int k = 0; k < 15; k++) {
                if (!CLOSE(got[k], m[k], 1e-5, 1e-4))
                    fprintf(stderr, "case %d IS %s %s metric %d: %.9g vs verl %.9g\n", c, is_specs[ii][0],
                            is_specs[ii][1], k, got[k], m[k]);
                assert_true(CLOSE(got[k], m[k], 1e-5, 1e-4));
            }
        }
        /* decoupled: token TIS 2.0 + token_k1 0.5_2.0 from the proximal policy, then the loss on the kept tokens */
        GET(dpl, "dec/pg_loss", FX_F64);
        GET(dgl, "dec/dlogp", FX_F32);
        RolloutCorrConfig rc;
        cfg(&rc, "token", "2.0", "token_k1", "0.5_2.0", 0);
        assert_int_equal(rollout_corr_weights(&rc, ol->data, rl->data, mask, off, B, w, NULL, err), 0);
        assert_int_equal(rollout_corr_reject(&rc, ol->data, rl->data, mask, off, B, keep, NULL, err), 0);
        LossParams p;
        loss_params_default(&p);
        LossStats ls;
        LossInput in = {lp->data, ol->data, ad->data, keep, NULL, off, B, w, NULL, 0, 0};
        assert_int_equal(loss_compute(&p, &in, NULL, g, NULL, &ls, err), 0);
        ASSERT_CLOSE(ls.pg_loss, ((double *)dpl->data)[0], 1e-6, 1e-5);
        for (int t = 0; t < N; t++) ASSERT_CLOSE(g[t], ((float *)dgl->data)[t], 1e-9, 1e-5);
        /* bypass: old = rollout, seq_mean_k3 0.08 from the current log-probs, no IS weight (ppo_clip) */
        GET(bpl, "byp/pg_loss", FX_F64);
        GET(bgl, "byp/dlogp", FX_F32);
        cfg(&rc, "token", "2.0", "seq_mean_k3", "0.08", 1);
        assert_int_equal(rollout_corr_reject(&rc, lp->data, rl->data, mask, off, B, keep, NULL, err), 0);
        LossInput bin = {lp->data, rl->data, ad->data, keep, NULL, off, B, NULL, NULL, 0, 0};
        assert_int_equal(loss_compute(&p, &bin, NULL, g, NULL, &ls, err), 0);
        ASSERT_CLOSE(ls.pg_loss, ((double *)bpl->data)[0], 1e-6, 1e-5);
        for (int t = 0; t < N; t++) ASSERT_CLOSE(g[t], ((float *)bgl->data)[t], 1e-9, 1e-5);
#undef GET
    }
    fx_free(&fx);
}

/* On-policy rows (rollout log-probs = the learner's): every IS weight is exactly 1, nothing is rejected, and the
 * weighted loss is bitwise the unweighted one. */
static void test_on_policy_weights_are_one(void **state) {
    (void)state;
    float lp[6] = {-0.1f, -2.5f, -0.7f, -30.0f, -1.0f, -0.3f}, old[6] = {-0.2f, -2.0f, -0.9f, -29.0f, -1.5f, -0.3f};
    float adv[6] = {1, 1, 1, -0.5f, -0.5f, -0.5f}, w[6], g1[6], g2[6];
    uint8_t mask[6] = {1, 1, 1, 1, 1, 0}, keep[6];
    int off[3] = {0, 3, 6};
    char err[ERR_LEN];
    for (size_t i = 0; i < sizeof is_specs / sizeof is_specs[0]; i++) {
        RolloutCorrConfig rc;
        cfg(&rc, is_specs[i][0], is_specs[i][1], "token_k1,seq_sum_k3,seq_max_k2", "0.5_2.0,0.01,0.01", 0);
        RolloutIsStats st;
        assert_int_equal(rollout_corr_weights(&rc, lp, lp, mask, off, 2, w, &st, err), 0);
        for (int t = 0; t < 6; t++) assert_true(w[t] == (mask[t] ? 1.0f : 0.0f));
        assert_true(st.n_tokens_truncated == 0 && st.n_seq_truncated == 0);
        RolloutRsStats rs;
        assert_int_equal(rollout_corr_reject(&rc, lp, lp, mask, off, 2, keep, &rs, err), 0);
        for (int t = 0; t < 6; t++) assert_int_equal(keep[t], mask[t]);
        assert_true(rs.masked_fraction == 0 && rs.n_seq_rejected == 0);
        LossParams p;
        loss_params_default(&p);
        LossStats a, b;
        LossInput in = {lp, old, adv, mask, NULL, off, 2, w, NULL, 0, 0}, in0 = {lp, old, adv, mask, NULL, off, 2, NULL, NULL, 0, 0};
        assert_int_equal(loss_compute(&p, &in, NULL, g1, NULL, &a, err), 0);
        assert_int_equal(loss_compute(&p, &in0, NULL, g2, NULL, &b, err), 0);
        assert_true(a.pg_loss == b.pg_loss);
        assert_memory_equal(g1, g2, sizeof g1);
    }
}

/* Hand-computed: token_k2 0.05 rejects |r| > sqrt(0.1); sequence IcePop zeroes a whole row outside its band. */
static void test_rs_icepop_hand_computed(void **state) {
    (void)state;
    float lp[4] = {-1.0f, -1.0f, -1.0f, -1.0f}, rl[4] = {-1.0f, -1.5f, -0.9f, -3.0f};
    int off[3] = {0, 2, 4};
    uint8_t keep[4];
    float w[4];
    char err[ERR_LEN];
    RolloutCorrConfig rc;
    cfg(&rc, "sequence", "0.5_5.0", "token_k2", "0.05", 0);
    RolloutRsStats rs;
    assert_int_equal(rollout_corr_reject(&rc, lp, rl, NULL, off, 2, keep, &rs, err), 0);
    /* r = 0, 0.5, -0.1, 2.0: k2 = 0, 0.125, 0.005, 2: tokens 1 and 3 rejected */
    assert_true(keep[0] == 1 && keep[1] == 0 && keep[2] == 1 && keep[3] == 0);
    ASSERT_CLOSE(rs.masked_fraction, 0.5, 1e-7, 1e-6);
    assert_int_equal(rs.n_seq_rejected, 2);
    RolloutIsStats st;
    assert_int_equal(rollout_corr_weights(&rc, lp, rl, NULL, off, 2, w, &st, err), 0);
    /* row sums 0.5 -> e^0.5 = 1.65 (kept); 1.9 -> e^1.9 = 6.69 > 5 (zeroed) */
    ASSERT_CLOSE(w[0], exp(0.5), 1e-6, 1e-6);
    ASSERT_CLOSE(w[1], exp(0.5), 1e-6, 1e-6);
    assert_true(w[2] == 0 && w[3] == 0);
    assert_int_equal(st.n_seq_truncated, 1);
    ASSERT_CLOSE(st.oob_ratio, 0.5, 1e-7, 1e-6);
}

static void test_config_parse(void **state) {
    (void)state;
    RolloutCorrConfig rc;
    char err[ERR_LEN];
    /* auto: token TIS 2.0 exactly when async (staleness >= 1) and not bypass */
    assert_int_equal(rollout_corr_config_parse("auto", "2.0", 0, "", "", 0, "ppo_clip", 1, &rc, err), 0);
    assert_true(rc.is_on && rc.is_auto && rc.is_level == ROLLOUT_IS_TOKEN && rc.is_upper == 2.0 && rc.is_lower == 0);
    assert_int_equal(rollout_corr_config_parse("auto", "2.0", 0, "", "", 0, "ppo_clip", 0, &rc, err), 0);
    assert_false(rc.is_on);
    assert_int_equal(rollout_corr_config_parse("auto", "2.0", 0, "", "", 1, "ppo_clip", 1, &rc, err), 0);
    assert_false(rc.is_on);
    assert_true(rc.bypass);
    assert_int_equal(rollout_corr_config_parse("", "2.0", 0, "null", "", 0, "ppo_clip", 1, &rc, err), 0);   /* YAML null */
    assert_false(rc.is_on);
    assert_int_equal(rc.n_rs, 0);
    /* k1 single bound: lower = 1/upper; a shared threshold; duplicates dropped */
    assert_int_equal(rollout_corr_config_parse("null", "", 0, "seq_mean_k1, token_k3,seq_mean_k1", "4", 0, "ppo_clip", 0,
                                               &rc, err), 0);
    assert_int_equal(rc.n_rs, 2);
    assert_true(rc.rs[0].opt == RS_SEQ_MEAN_K1 && rc.rs[0].upper == 4 && rc.rs[0].lower == 0.25);
    assert_true(rc.rs[1].opt == RS_TOKEN_K3 && rc.rs[1].upper == 4);
    /* bad values name the key */
    const char *bad[][4] = {
        {"tokens", "2.0", "", ""}, {"token", "0", "", ""}, {"token", "3_2", "", ""}, {"token", "x", "", ""},
        {"null", "", "token_k4", "1"}, {"null", "", "token_k2", ""}, {"null", "", "token_k2", "0.5_1"},
        {"null", "", "token_k1,token_k2", "1,2,3"}, {"null", "", "token_k2", "-1"}, {"null", "", ",", "1"},
        {"null", "", "token_k1", "2_1.5"}, {"null", "", "seq_mean_k1", "0.5"},   /* lower > upper (verl 0.9.1) */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(rollout_corr_config_parse(bad[i][0], bad[i][1], 0, bad[i][2], bad[i][3], 0, "ppo_clip", 0, &rc,
                                                   err), ERR_INVAL);
        assert_non_null(strstr(err, "algorithm.rollout_correction."));
    }
    assert_int_equal(rollout_corr_config_parse("token", "2", 0, "", "", 0, "reinforce", 0, &rc, err), ERR_UNSUPPORTED);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_computed),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_against_verl),
        cmocka_unit_test(test_rs_is_against_verl),
        cmocka_unit_test(test_on_policy_weights_are_one),
        cmocka_unit_test(test_rs_icepop_hand_computed),
        cmocka_unit_test(test_config_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
