/* tests/unit/test_dapo_loss.c: the DAPO token loss, the four aggregation modes, the metrics and the gradient
 * (common/dapo/loss.h): one hand-computed case per branch (each clip region, dual clip, A = 0, the +-20
 * log-ratio clamp and its closed-interval gradient, masks, each agg mode with local and global denominators),
 * a central finite-difference check of d(loss)/d(logp), micro-batch / data-parallel invariance, bad input,
 * and 48 cases computed by verl's own compute_policy_loss_vanilla / agg_loss with torch.autograd gradients
 * (tests/data/dapo/loss_cases.bin, written by tests/reference/make_dapo_fixtures.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dapo/loss.h"
#include "dapo_fixture.h"

#define CLOSE(a, b, atol, rtol) (fabs((double)(a) - (double)(b)) <= (atol) + (rtol) * fabs((double)(b)))
#define ASSERT_CLOSE(a, b, atol, rtol) do { double a_ = (a), b_ = (b); if (!CLOSE(a_, b_, atol, rtol)) { \
    fprintf(stderr, "%s:%d: %s = %.9g, expected %s = %.9g\n", __FILE__, __LINE__, #a, a_, #b, b_); fail(); } } while (0)

/* One counted token, token-mean over itself. */
static LossStats one_token(double clip_c, float logp, float old, float a, float *dlogp, float *loss_tok) {
    LossParams p;
    loss_params_default(&p);
    p.clip_ratio_c = clip_c;
    int off[2] = { 0, 1 };
    uint8_t m = 1;
    LossInput in = { &logp, &old, &a, &m, NULL, off, 1, NULL, NULL, 0, 0 };
    LossStats st;
    char err[ERR_LEN];
    assert_int_equal(loss_compute(&p, &in, loss_tok, dlogp, NULL, &st, err), 0);
    return st;
}

static void test_each_branch(void **state) {
    (void)state;
    float g, l;
    struct { float r, a, loss, grad; int clip, lower; } c[] = {
        { 1.1f,  1.0f, -1.1f, -1.1f, 0, 0 },    /* inside the clip range: unclipped surrogate */
        { 1.5f,  1.0f, -1.28f, 0.0f, 1, 0 },    /* A > 0, ratio above 1 + eps_high: clipped, no gradient */
        { 0.5f,  1.0f, -0.5f, -0.5f, 0, 0 },    /* A > 0, ratio below 1 - eps_low: pessimistic max keeps r */
        { 0.5f, -1.0f, 0.8f, 0.0f, 1, 0 },      /* A < 0, ratio below 1 - eps_low: clipped */
        { 1.5f, -1.0f, 1.5f, 1.5f, 0, 0 },      /* A < 0, ratio above 1 + eps_high: unclipped, r A */
        { 12.0f, -1.0f, 10.0f, 0.0f, 0, 1 },    /* A < 0, ratio above clip_ratio_c: dual clip bites */
        { 1.5f,  0.0f, 0.0f, 0.0f, 0, 0 },      /* A = 0: zero loss and gradient */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        float old = -1.0f, logp = old + logf(c[i].r);
        LossStats st = one_token(10.0, logp, old, c[i].a, &g, &l);
        ASSERT_CLOSE(l, c[i].loss, 1e-6, 1e-5);
        ASSERT_CLOSE(st.pg_loss, c[i].loss, 1e-6, 1e-5);
        ASSERT_CLOSE(g, c[i].grad, 1e-6, 1e-5);
        ASSERT_CLOSE(st.pg_clipfrac, c[i].clip, 1e-7, 0);
        ASSERT_CLOSE(st.pg_clipfrac_lower, c[i].lower, 1e-7, 0);
        ASSERT_CLOSE(st.ppo_kl, -logf(c[i].r), 1e-6, 1e-5);
    }
    /* a ratio exactly on 1 + eps_high: l1 == l2, torch.maximum splits the gradient, the clamp passes none */
    const float hi = (float)(1.0 + 0.28);
    float d = logf(hi);
    for (int i = 0; i < 64 && expf(d) != hi; i++) d = nextafterf(d, expf(d) < hi ? 1.0f : -1.0f);
    if (expf(d) == hi) {
        one_token(10.0, d, 0.0f, 1.0f, &g, &l);
        ASSERT_CLOSE(l, -hi, 1e-7, 1e-6);
        ASSERT_CLOSE(g, 0.5 * -hi, 1e-7, 1e-6);
    }
    /* dual clip with clip_ratio_c = 3: ratio 4 and A = -2 -> loss 6 */
    LossStats st = one_token(3.0, -1.0f + logf(4.0f), -1.0f, -2.0f, &g, &l);
    ASSERT_CLOSE(l, 6.0, 1e-6, 1e-5);
    ASSERT_CLOSE(g, 0.0, 0, 0);
    ASSERT_CLOSE(st.pg_clipfrac_lower, 1.0, 1e-7, 0);
}

static void test_log_ratio_clamp(void **state) {
    (void)state;
    float g, l;
    /* d = -25 is clamped to -20: the loss uses exp(-20) and the gradient is cut (torch.clamp outside) */
    LossStats st = one_token(10.0, -26.0f, -1.0f, 1.0f, &g, &l);
    ASSERT_CLOSE(l, -expf(-20.0f), 1e-20, 1e-5);
    assert_true(g == 0.0f);
    ASSERT_CLOSE(st.ppo_kl, 20.0, 1e-6, 1e-6);   /* ppo_kl uses the clamped log-ratio */
    /* d = -20 exactly: torch's clamp backward gives 0 on the bound itself; just inside, the gradient passes */
    one_token(10.0, -20.0f, 0.0f, 1.0f, &g, &l);
    assert_true(g == 0.0f);
    ASSERT_CLOSE(l, -expf(-20.0f), 1e-20, 1e-5);
    one_token(10.0, -19.5f, 0.0f, 1.0f, &g, &l);
    ASSERT_CLOSE(g, -expf(-19.5f), 1e-20, 1e-5);
    /* d = +25 with A < 0: clamped ratio exp(20) is dual-clipped to 10 */
    st = one_token(10.0, 24.0f, -1.0f, -1.0f, &g, &l);
    ASSERT_CLOSE(l, 10.0, 1e-6, 1e-6);
    assert_true(g == 0.0f);
    ASSERT_CLOSE(st.pg_clipfrac_lower, 1.0, 1e-7, 0);   /* 1 / (1 + 1e-8), verl's masked mean */
}

/* Two segments: losses [1, 2, 3 | 4, (masked)] from r = 1 and A = -|loss|. */
static void agg_case(LossAggMode mode, double bnt, double gbs, double lsf, int dp, double want, const float *want_w) {
    LossParams p;
    loss_params_default(&p);
    p.agg = mode;
    p.batch_num_tokens = bnt;
    p.global_batch_size = gbs;
    p.loss_scale_factor = lsf;
    p.dp_size = dp;
    float logp[5] = { -1, -2, -0.5f, -3, -1 }, old[5], adv[5] = { -1, -2, -3, -4, -9 }, ent[5] = { 1, 1, 1, 1, 7 };
    memcpy(old, logp, sizeof old);
    uint8_t mask[5] = { 1, 1, 1, 1, 0 };
    int off[3] = { 0, 3, 5 };
    LossInput in = { logp, old, adv, mask, ent, off, 2, NULL, NULL, 0, 0 };
    float dl[5], de[5], lt[5];
    LossStats st;
    char err[ERR_LEN];
    p.entropy_coeff = 0.5;
    assert_int_equal(loss_compute(&p, &in, lt, dl, de, &st, err), 0);
    ASSERT_CLOSE(st.pg_loss, want, 1e-6, 1e-6);
    for (int t = 0; t < 5; t++) {
        ASSERT_CLOSE(dl[t], want_w[t] * (mask[t] ? -adv[t] : 0), 1e-7, 1e-6);   /* dloss_t/dlogp_t = -A r = |A| */
        ASSERT_CLOSE(de[t], -0.5 * want_w[t], 1e-7, 1e-6);
    }
    ASSERT_CLOSE(lt[4], 0.0, 0, 0);
    assert_true(st.n_tokens == 4 && st.n_seq_nonempty == 2);
}

static void test_agg_modes(void **state) {
    (void)state;
    const float e = 1e-8f;
    (void)e;
    float w_tm[5] = { .25f, .25f, .25f, .25f, 0 };
    agg_case(LOSS_AGG_TOKEN_MEAN, 0, 0, 0, 1, 2.5, w_tm);                        /* (1+2+3+4) / 4 */
    float w_tmg[5] = { .25f, .25f, .25f, .25f, 0 };
    agg_case(LOSS_AGG_TOKEN_MEAN, 8, 0, 0, 2, 2.5, w_tmg);                       /* 10 / 8 * dp 2 */
    float w_stm[5] = { 1 / 6.f, 1 / 6.f, 1 / 6.f, .5f, 0 };
    agg_case(LOSS_AGG_SEQ_MEAN_TOKEN_MEAN, 0, 0, 0, 1, 3.0, w_stm);              /* (6/3 + 4/1) / 2 */
    float w_sts[5] = { .5f, .5f, .5f, .5f, 0 };
    agg_case(LOSS_AGG_SEQ_MEAN_TOKEN_SUM, 0, 0, 0, 1, 5.0, w_sts);               /* (6 + 4) / 2 */
    float w_stsg[5] = { .25f, .25f, .25f, .25f, 0 };
    agg_case(LOSS_AGG_SEQ_MEAN_TOKEN_SUM, 0, 8, 0, 2, 2.5, w_stsg);              /* 10 / 8 * 2 */
    float w_stsn[5] = { 1 / 6.f, 1 / 6.f, 1 / 6.f, 1 / 6.f, 0 };
    agg_case(LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM, 0, 0, 0, 1, 5.0 / 3, w_stsn);     /* horizon = longest = 3 */
    float w_stsn2[5] = { .05f, .05f, .05f, .05f, 0 };
    agg_case(LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM, 0, 0, 10, 1, 0.5, w_stsn2);       /* loss_scale_factor 10 */
}

static void test_masks_and_metrics(void **state) {
    (void)state;
    /* clipped token masked out: metrics are means over the counted tokens only */
    float old[4] = { -1, -1, -1, -1 };
    float logp[4] = { -1 + logf(1.5f), -1 + logf(1.5f), -1, -1 + logf(0.5f) };
    float adv[4] = { 1, 1, 1, -1 };
    uint8_t mask[4] = { 0, 1, 1, 1 };
    int off[2] = { 0, 4 };
    LossInput in = { logp, old, adv, mask, NULL, off, 1, NULL, NULL, 0, 0 };
    LossParams p;
    loss_params_default(&p);
    LossStats st;
    char err[ERR_LEN];
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), 0);
    ASSERT_CLOSE(st.pg_clipfrac, 2.0 / (3 + 1e-8), 1e-7, 1e-6);     /* tokens 1 and 3 clip */
    ASSERT_CLOSE(st.pg_clipfrac_lower, 0.0, 0, 0);
    ASSERT_CLOSE(st.ppo_kl, (-logf(1.5f) + 0 - logf(0.5f)) / 3, 1e-6, 1e-5);
    ASSERT_CLOSE(st.pg_loss, (-1.28 - 1.0 + 0.8) / 3, 1e-6, 1e-5);
    /* NULL mask counts every token; an all-masked call is 0, not NaN */
    in.mask = NULL;
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), 0);
    assert_true(st.n_tokens == 4);
    uint8_t none[4] = { 0 };
    in.mask = none;
    float dl[4];
    assert_int_equal(loss_compute(&p, &in, NULL, dl, NULL, &st, err), 0);
    assert_true(st.pg_loss == 0 && st.ppo_kl == 0 && st.pg_clipfrac == 0 && dl[0] == 0 && dl[3] == 0);
}

/* Central differences of stats.loss against dlogp on inputs away from every kink. */
static void test_finite_difference(void **state) {
    (void)state;
    const float ratios[] = { 0.5f, 0.9f, 1.1f, 1.5f, 3.0f, 15.0f };
    const float advs[] = { 1.3f, -1.3f, 0.4f, -0.4f };
    enum { N = 24 };
    float logp[N], old[N], adv[N], ent[N];
    uint8_t mask[N];
    for (int t = 0; t < N; t++) {
        old[t] = -1.0f - 0.1f * t;
        logp[t] = old[t] + logf(ratios[t % 6]);
        adv[t] = advs[(t / 6) % 4];
        ent[t] = 0.1f * t;
        mask[t] = (t % 7) != 3;
    }
    int off[4] = { 0, 5, 13, N };
    for (int mode = 0; mode < 4; mode++) {
        LossParams p;
        loss_params_default(&p);
        p.agg = (LossAggMode)mode;
        p.batch_num_tokens = 40;
        p.global_batch_size = 6;
        p.dp_size = 2;
        LossInput in = { logp, old, adv, mask, ent, off, 3, NULL, NULL, 0, 0 };
        float g[N];
        LossStats st;
        char err[ERR_LEN];
        assert_int_equal(loss_compute(&p, &in, NULL, g, NULL, &st, err), 0);
        for (int t = 0; t < N; t++) {
            const float h = 1e-3f;
            float keep = logp[t];
            LossStats sp, sm;
            logp[t] = keep + h;
            assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &sp, err), 0);
            logp[t] = keep - h;
            assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &sm, err), 0);
            logp[t] = keep;
            double fd = (sp.loss - sm.loss) / (2.0 * h);
            ASSERT_CLOSE(g[t], fd, 2e-5, 2e-3);
        }
    }
}

/* The sum over micro-batches (and over ranks / dp) with global denominators equals the whole batch. */
static void test_split_invariance(void **state) {
    (void)state;
    enum { N = 30 };
    float logp[N], old[N], adv[N];
    uint8_t mask[N];
    for (int t = 0; t < N; t++) {
        old[t] = -0.5f - 0.05f * t;
        logp[t] = old[t] + 0.4f * sinf(1.7f * t);
        adv[t] = (t / 6) % 2 ? -0.8f : 1.1f;
        mask[t] = (t % 5) != 4;
    }
    int off[6] = { 0, 6, 12, 18, 24, 30 };
    for (int mode = 0; mode < 4; mode++) {
        LossParams p;
        loss_params_default(&p);
        p.agg = (LossAggMode)mode;
        p.batch_num_tokens = 24;     /* 30 tokens, 6 masked */
        p.global_batch_size = 5;
        p.loss_scale_factor = 6;
        LossInput whole = { logp, old, adv, mask, NULL, off, 5, NULL, NULL, 0, 0 };
        float gw[N], gs[N];
        LossStats sw, acc, s;
        memset(&acc, 0, sizeof acc);
        char err[ERR_LEN];
        assert_int_equal(loss_compute(&p, &whole, NULL, gw, NULL, &sw, err), 0);
        /* micro-batches {0,1}, {2}, {3,4} */
        int cuts[4] = { 0, 2, 3, 5 };
        for (int j = 0; j < 3; j++) {
            int o[6], ns = cuts[j + 1] - cuts[j], base = off[cuts[j]];
            for (int s2 = 0; s2 <= ns; s2++) o[s2] = off[cuts[j] + s2] - base;
            LossInput mi = { logp + base, old + base, adv + base, mask + base, NULL, o, ns, NULL, NULL, 0, 0 };
            assert_int_equal(loss_compute(&p, &mi, NULL, gs + base, NULL, &s, err), 0);
            loss_stats_merge(&acc, &s);
        }
        ASSERT_CLOSE(acc.pg_loss, sw.pg_loss, 1e-7, 1e-6);
        ASSERT_CLOSE(acc.pg_clipfrac, sw.pg_clipfrac, 1e-9, 1e-9);
        ASSERT_CLOSE(acc.ppo_kl, sw.ppo_kl, 1e-9, 1e-6);
        for (int t = 0; t < N; t++) ASSERT_CLOSE(gs[t], gw[t], 1e-9, 1e-6);
        /* two ranks with dp_size 2 (gradients averaged by the all-reduce) */
        p.dp_size = 2;
        LossInput r0 = { logp, old, adv, mask, NULL, off, 3, NULL, NULL, 0, 0 };
        int o1[3] = { 0, 6, 12 };
        LossInput r1 = { logp + 18, old + 18, adv + 18, mask + 18, NULL, o1, 2, NULL, NULL, 0, 0 };
        LossStats a0, a1;
        float g0[N];
        assert_int_equal(loss_compute(&p, &r0, NULL, g0, NULL, &a0, err), 0);
        assert_int_equal(loss_compute(&p, &r1, NULL, g0 + 18, NULL, &a1, err), 0);
        ASSERT_CLOSE((a0.pg_loss + a1.pg_loss) / 2, sw.pg_loss, 1e-7, 1e-6);
        for (int t = 0; t < N; t++) ASSERT_CLOSE(g0[t] / 2, gw[t], 1e-9, 1e-6);
    }
}

static void test_bad_input(void **state) {
    (void)state;
    float x[2] = { -1, -1 };
    int off[2] = { 0, 2 }, bad_off[2] = { 1, 2 }, dec_off[3] = { 0, 2, 1 };
    LossInput in = { x, x, x, NULL, NULL, off, 1, NULL, NULL, 0, 0 };
    LossParams p;
    loss_params_default(&p);
    LossStats st;
    char err[ERR_LEN];
    p.clip_ratio_c = 1.0;
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), ERR_INVAL);
    assert_non_null(strstr(err, "clip_ratio_c"));
    loss_params_default(&p);
    p.clip_ratio_low = -0.1;
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), ERR_INVAL);
    loss_params_default(&p);
    p.agg = (LossAggMode)7;
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), ERR_INVAL);
    loss_params_default(&p);
    in.seq_off = bad_off;
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), ERR_INVAL);
    in.seq_off = dec_off;
    in.n_seq = 2;
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), ERR_INVAL);
    in.seq_off = off;
    in.n_seq = 1;
    in.logp = NULL;
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), ERR_INVAL);
    in.logp = x;
    float de[2];
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, de, &st, err), ERR_INVAL);   /* no entropies */
    assert_int_equal(loss_compute(NULL, &in, NULL, NULL, NULL, &st, err), ERR_INVAL);
    /* names */
    LossAggMode m;
    assert_int_equal(loss_agg_mode_parse("seq-mean-token-sum-norm", &m, err), 0);
    assert_int_equal(m, LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM);
    assert_string_equal(loss_agg_mode_name(LOSS_AGG_SEQ_MEAN_TOKEN_MEAN), "seq-mean-token-mean");
    assert_int_equal(loss_agg_mode_parse("token-sum", &m, err), ERR_INVAL);
    assert_non_null(strstr(err, "token-sum"));
    assert_int_equal(loss_agg_mode_parse(NULL, &m, err), ERR_INVAL);
    /* NaN log-probs propagate (the learner skips the update), they do not fail */
    float nan2[2] = { NAN, -1 };
    in.logp = nan2;
    assert_int_equal(loss_compute(&p, &in, NULL, NULL, NULL, &st, err), 0);
    assert_true(isnan(st.pg_loss));
}

/* One case of make_dapo_fixtures.py: loss_cases.bin's "c<k>/" (the vanilla loss) or, with modes, loss_modes.bin's
 * "m<k>/", which add the policy loss mode, sapo's temperatures, rollout-correction weights and the KL term (kl name
 * index into FX_KL_NAMES, -1 for none; coefficient 0.05). dapo's loss, metrics (those verl reports; NaN: not reported)
 * and gradients against verl's, dlogp within dlogp_atol + 1e-5 relative. *p gets the case's parameters. Returns the
 * tokens checked. */
static int check_verl_case(const Fixture *fx, int modes, int c, double dlogp_atol, LossParams *p) {
    char name[64];
#define GET(var, key, dt) snprintf(name, sizeof name, "%c%d/%s", modes ? 'm' : 'c', c, key); \
    const FxTensor *var = fx_get(fx, name, dt); assert_non_null(var)
    GET(shape, "shape", FX_I32);
    GET(mode, "mode", FX_I32);
    GET(par, "params", FX_F64);
    GET(lp, "logp", FX_F32);
    GET(ol, "old_logp", FX_F32);
    GET(ad, "adv", FX_F32);
    GET(mk, "mask", FX_I32);
    GET(en, "entropy", FX_F32);
    GET(out, "out", FX_F64);
    GET(gl, "dlogp", FX_F32);
    GET(ge, "dentropy", FX_F32);
    int B = ((int32_t *)shape->data)[0], T = ((int32_t *)shape->data)[1], N = B * T;
    assert_true(lp->n == (uint32_t)N && gl->n == (uint32_t)N);
    const double *pr = par->data, *o = out->data;
    loss_params_default(p);
    p->clip_ratio_low = pr[0];
    p->clip_ratio_high = pr[1];
    p->clip_ratio_c = pr[2];
    p->entropy_coeff = pr[3];
    p->dp_size = (int)pr[4];
    p->batch_num_tokens = pr[5];
    p->global_batch_size = pr[6];
    p->loss_scale_factor = pr[7];
    p->agg = (LossAggMode)((int32_t *)mode->data)[0];
    const float *isw = NULL, *ref = NULL;
    double kl_loss = 0;
    if (modes) {
        GET(iw, "is_weight", FX_F32);
        GET(rf, "ref", FX_F32);
        GET(kl, "kl", FX_I32);
        GET(klv, "kl_loss", FX_F64);
        p->tau_pos = pr[8];
        p->tau_neg = pr[9];
        assert_true(par->n >= 15);
        p->clip_cov_ratio = pr[10];
        p->clip_cov_lb = pr[11];
        p->clip_cov_ub = pr[12];
        p->kl_cov_ratio = pr[13];
        p->ppo_kl_coef = pr[14];
        p->mode = (LossMode)((int32_t *)mode->data)[1];
        isw = iw->n ? iw->data : NULL;
        ref = rf->data;
        kl_loss = ((const double *)klv->data)[0];
        int ki = ((int32_t *)kl->data)[0];
        char kerr[ERR_LEN];
        if (ki >= 0) {
            assert_int_equal(kl_penalty_parse(FX_KL_NAMES[ki], &p->kl, kerr), 0);
            p->use_kl = 1;
            p->kl_coef = 0.05;
        }
    }
#undef GET
    uint8_t mask[256];
    int off[64];
    assert_true(N <= 256 && B < 64);
    for (int t = 0; t < N; t++) mask[t] = (uint8_t)((int32_t *)mk->data)[t];
    for (int s = 0; s <= B; s++) off[s] = s * T;
    LossInput in = { lp->data, ol->data, ad->data, mask, en->data, off, B, isw, ref, 0, 0 };
    float dl[256], de[256];
    LossStats st;
    char err[ERR_LEN];
    assert_int_equal(loss_compute(p, &in, NULL, dl, de, &st, err), 0);
    ASSERT_CLOSE(st.pg_loss, o[0], 1e-6, 1e-5);
    if (!isnan(o[1])) ASSERT_CLOSE(st.pg_clipfrac, o[1], 1e-7, 1e-6);
    if (!isnan(o[2])) ASSERT_CLOSE(st.pg_clipfrac_lower, o[2], 1e-7, 1e-6);
    if (!isnan(o[3])) ASSERT_CLOSE(st.ppo_kl, o[3], 1e-6, 1e-5);
    ASSERT_CLOSE(st.entropy, o[4], 1e-6, 1e-5);
    ASSERT_CLOSE(st.kl_loss, kl_loss, 1e-6, 1e-5);
    ASSERT_CLOSE(st.loss, o[5], 1e-6, 1e-5);
    const float *wl = gl->data, *we = ge->data;
    for (int t = 0; t < N; t++)
        if (!CLOSE(dl[t], wl[t], dlogp_atol, 1e-5) || !CLOSE(de[t], we[t], 1e-13, 1e-5)) {
            fprintf(stderr, "case %d (%s, %s) token %d: dlogp %.9g vs verl %.9g, dentropy %.9g vs %.9g\n", c,
                    loss_mode_name(p->mode), loss_agg_mode_name(p->agg), t, dl[t], wl[t], de[t], we[t]);
            fail();
        }
    return N;
}

/* verl's own functions (fixture): the vanilla loss, its metrics and gradients. */
static void test_against_verl(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/loss_cases.bin", &fx), 0);
    const FxTensor *nc = fx_get(&fx, "n_cases", FX_I32);
    assert_non_null(nc);
    int n_cases = ((int32_t *)nc->data)[0];
    assert_true(n_cases >= 48);
    int checked_tokens = 0;
    for (int c = 0; c < n_cases; c++) {
        LossParams p;
        checked_tokens += check_verl_case(&fx, 0, c, 1e-13, &p);
    }
    assert_true(checked_tokens > 1000);
    fx_free(&fx);
}

/* verl's policy losses (get_policy_loss_fn: vanilla, gspo, cispo, sapo, gpg, dppo_tv, dppo_kl, clip_cov, kl_cov,
 * geo_mean) on make_dapo_fixtures.py's cases: values, metrics (those the mode reports) and torch autograd's gradients,
 * every aggregation mode, without and with global batch info (geo_mean ignores it, as verl), rollout-correction weights
 * and the KL loss (verl's ppo_loss: + kl_loss_coef x agg(kl_penalty)); clip_cov's cases zero every candidate (no
 * draw; test_clip_cov_draw covers the draw). */
static void test_loss_modes_against_verl(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/loss_modes.bin", &fx), 0);
    const FxTensor *nc = fx_get(&fx, "n_cases", FX_I32);
    assert_non_null(nc);
    int n_cases = ((int32_t *)nc->data)[0], seen[LOSS_MODE_GEO_MEAN + 1] = {0}, n_kl = 0;
    assert_true(n_cases >= 64);
    for (int c = 0; c < n_cases; c++) {
        LossParams p;
        check_verl_case(&fx, 1, c, 1e-12, &p);
        seen[p.mode]++;
        n_kl += p.use_kl;
    }
    for (int k = LOSS_MODE_VANILLA; k <= LOSS_MODE_GEO_MEAN; k++) assert_true(seen[k] >= 16);
    assert_true(n_kl >= 80);
    LossMode m;
    char err[ERR_LEN];
    assert_int_equal(loss_mode_parse("cispo", &m, err), 0);
    assert_int_equal(m, LOSS_MODE_CISPO);
    assert_int_equal(loss_mode_parse("geo_mean", &m, err), 0);
    assert_int_equal(m, LOSS_MODE_GEO_MEAN);
    assert_int_equal(loss_mode_parse("dro", &m, err), ERR_INVAL);
    assert_non_null(strstr(err, "dppo_kl, clip_cov, kl_cov and geo_mean"));
    fx_free(&fx);
}

/* clip_cov's draw (verl: torch.randperm; dapo: a seeded permutation, loss.h): with more candidates than it zeroes,
 * exactly max(int(clip_cov_ratio n), 1) tokens lose their gradient, all of them candidates (cov inside the band); the
 * same (seed, stream) draws the same tokens, another stream other ones. kl_cov marks the max(1, int(n kl_cov_ratio))
 * tokens of largest cov. Hand-built: r = 1 everywhere (no clip binds), cov_t = ((t - 19.5) / 10)^2. */
static int zeroed(const float *g, int n, uint8_t *which) {
    int k = 0;
    for (int t = 0; t < n; t++) {
        which[t] = g[t] == 0.0f && t != 20;          /* A_20 = 0: no gradient anyway */
        k += which[t];
    }
    return k;
}

static void test_clip_cov_draw(void **state) {
    (void)state;
    enum { N = 40 };
    float lp[N], adv[N], g[N], cov[N];
    int off[2] = {0, N};
    for (int t = 0; t < N; t++) {
        adv[t] = (float)t / 10.0f - 2.0f;
        lp[t] = -3.0f + (float)(t - 20) / 10.0f;
        cov[t] = (float)((t - 19.5) / 10.0 * ((t - 19.5) / 10.0));
    }
    LossParams p;
    loss_params_default(&p);
    p.mode = LOSS_MODE_CLIP_COV;
    p.clip_cov_ratio = 0.1;
    p.clip_cov_lb = 0.1;
    p.clip_cov_ub = 5.0;
    LossInput in = {lp, lp, adv, NULL, NULL, off, 1, NULL, NULL, 7, 1};
    LossStats st;
    char err[ERR_LEN];
    uint8_t a[N], b[N];
    assert_int_equal(loss_compute(&p, &in, NULL, g, NULL, &st, err), 0);
    assert_int_equal(zeroed(g, N, a), 4);                  /* int(0.1 x 40) of 34 candidates */
    for (int t = 0; t < N; t++) assert_true(!a[t] || (cov[t] > 0.1f && cov[t] < 5.0f));
    ASSERT_CLOSE(st.pg_clipfrac, 4.0 / 40, 1e-7, 1e-6);
    assert_int_equal(loss_compute(&p, &in, NULL, g, NULL, &st, err), 0);
    zeroed(g, N, b);
    assert_memory_equal(a, b, N);                         /* the same draw */
    int differs = 0;
    for (uint64_t s = 2; s < 6; s++) {
        in.draw_stream = s;
        assert_int_equal(loss_compute(&p, &in, NULL, g, NULL, &st, err), 0);
        assert_int_equal(zeroed(g, N, b), 4);
        differs |= memcmp(a, b, N) != 0;
    }
    assert_true(differs);
    p.clip_cov_ratio = 1e-9;                              /* at least one */
    assert_int_equal(loss_compute(&p, &in, NULL, g, NULL, &st, err), 0);
    assert_int_equal(zeroed(g, N, b), 1);
    p.mode = LOSS_MODE_KL_COV;                            /* kl_cov: the 6 largest cov (t = 0..2, 37..39) */
    p.kl_cov_ratio = 0.15;
    p.ppo_kl_coef = 0.1;
    float lp2[N];
    for (int t = 0; t < N; t++) lp2[t] = lp[t] + 0.01f;    /* d = 0.01: a selected token's gradient gains 0.1 */
    LossInput k = {lp2, lp, adv, NULL, NULL, off, 1, NULL, NULL, 0, 0};
    assert_int_equal(loss_compute(&p, &k, NULL, g, NULL, &st, err), 0);
    int marked = 0;
    for (int t = 0; t < N; t++) {
        float plain = -adv[t] * expf(lp2[t] - lp[t]) / N;
        int sel = fabsf(g[t] - plain) > 1e-6f;
        marked += sel;
        assert_int_equal(sel, t <= 2 || t >= 37);
    }
    assert_int_equal(marked, 6);
    assert_int_equal(loss_compute(&p, &k, NULL, g, NULL, &st, err), 0);
    ASSERT_CLOSE(st.ppo_kl, 0.01, 1e-6, 1e-4);            /* kl_cov's ppo_kl: the mean |d| */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_branch),
        cmocka_unit_test(test_log_ratio_clamp),
        cmocka_unit_test(test_agg_modes),
        cmocka_unit_test(test_masks_and_metrics),
        cmocka_unit_test(test_finite_difference),
        cmocka_unit_test(test_split_invariance),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_against_verl),
        cmocka_unit_test(test_loss_modes_against_verl),
        cmocka_unit_test(test_clip_cov_draw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
