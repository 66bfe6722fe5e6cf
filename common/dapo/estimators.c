/* common/dapo/estimators.c: verl's other outcome advantage estimators (formulas and sources in advantages.h).
 * Not here: GRPO itself (advantages.c), token broadcasting (the coordinator). */
#include "dapo/advantages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; AdvEstimator e; } k_names[] = {
    {"grpo", ADV_GRPO}, {"rloo", ADV_RLOO}, {"opo", ADV_OPO}, {"gpg", ADV_GPG}, {"grpo_passk", ADV_GRPO_PASSK},
    {"reinforce_plus_plus", ADV_REINFORCE_PP}, {"reinforce_plus_plus_baseline", ADV_REINFORCE_PP_BASELINE},
    {"grpo_vectorized", ADV_GRPO}, {"rloo_vectorized", ADV_RLOO},
};
#define N_NAMES ((int)(sizeof k_names / sizeof k_names[0]))

int adv_estimator_parse(const char *name, AdvEstimator *e, char err[ERR_LEN]) {
    for (int i = 0; name && i < N_NAMES; i++)
        if (!strcmp(name, k_names[i].name)) { *e = k_names[i].e; return 0; }
    return err_set(err, ERR_INVAL, "algorithm.adv_estimator '%s': dapo has grpo, rloo, opo, gpg, grpo_passk, "
                   "reinforce_plus_plus and reinforce_plus_plus_baseline (and the _vectorized spellings of grpo and "
                   "rloo); verl's gae, remax, gdpo and the optimal-token baselines are not implemented",
                   name ? name : "(null)");
}

const char *adv_estimator_name(AdvEstimator e) {
    return (int)e >= 0 && (int)e <= ADV_REINFORCE_PP_BASELINE ? k_names[e].name : "?";
}

/* verl_F.masked_whiten over the batch's tokens, each response's value counted resp_tokens[i] times */
static int whiten(float *adv, const int *tok, int n, char err[ERR_LEN]) {
    double N = 0, s = 0;
    for (int i = 0; i < n; i++) { N += tok[i]; s += (double)tok[i] * adv[i]; }
    if (N < 2) return err_set(err, ERR_INVAL, "advantages: whitening needs at least two response tokens in the batch "
                              "(it has %.0f)", N);
    double mean = s / (N + 1e-8), v = 0;
    for (int i = 0; i < n; i++) v += (double)tok[i] * (adv[i] - mean) * (adv[i] - mean);
    double var = v / (N + 1e-8) * (N / (N - 1));
    for (int i = 0; i < n; i++) adv[i] = (float)((adv[i] - mean) / sqrt(var + 1e-8));
    return 0;
}

/* one group's advantages into a[0..n) (estimators that need only the group; gpg's alpha given) */
static int group_adv(AdvEstimator e, const float *r, const int *tok, int n, bool norm, double eps, double alpha,
                     float *a, int g, char err[ERR_LEN]) {
    double mean = 0, ss = 0;
    for (int i = 0; i < n; i++) mean += r[i];
    mean = n > 1 ? mean / n : 0.0;
    for (int i = 0; i < n; i++) ss += (r[i] - mean) * (r[i] - mean);
    double sd = n > 1 ? sqrt(ss / (n - 1)) : 1.0;
    if (e == ADV_RLOO) {
        for (int i = 0; i < n; i++) a[i] = (float)(n > 1 ? r[i] * n / (n - 1.0) - mean * n / (n - 1.0) : r[i]);
    } else if (e == ADV_OPO) {
        double lw = 0, lr = 0;
        for (int i = 0; i < n; i++) { lw += tok[i]; lr += (double)tok[i] * r[i]; }
        double bsl = n > 1 && lw > 0 ? lr / lw : 0.0;   /* no counted token in the group: verl's 0 / 0 = NaN; ours 0
                                                            (every token of it is masked, so nothing reads it) */
        for (int i = 0; i < n; i++) a[i] = (float)(r[i] - bsl);
    } else if (e == ADV_GPG) {
        for (int i = 0; i < n; i++) a[i] = (float)(alpha * (r[i] - mean));
    } else if (e == ADV_GRPO_PASSK) {
        if (n < 2) return err_set(err, ERR_INVAL, "grpo_passk: group %d has %d response (Pass@k needs at least 2)", g, n);
        int best = 0, second = -1;
        for (int i = 1; i < n; i++) if (r[i] > r[best]) best = i;
        for (int i = 0; i < n; i++) if (i != best && (second < 0 || r[i] > r[second])) second = i;
        double d = (double)r[best] - r[second];
        if (norm) d /= sd + eps;
        for (int i = 0; i < n; i++) a[i] = i == best ? (float)d : 0.0f;
    } else {                                            /* reinforce_plus_plus(_baseline): whitened afterwards */
        for (int i = 0; i < n; i++) a[i] = (float)(e == ADV_REINFORCE_PP ? r[i] : r[i] - mean);
    }
    return 0;
}

int adv_compute(AdvEstimator e, const float *reward, const int *resp_tokens, const int *group_size, int n_groups,
                bool norm_by_std, double eps, float *adv, char err[ERR_LEN]) {
    if (e == ADV_GRPO) return adv_grpo(reward, group_size, n_groups, norm_by_std, eps, adv, err);
    int rc = adv_grpo(reward, group_size, n_groups, false, eps, adv, err);   /* its checks of the arguments */
    if (rc) return rc;
    if ((int)e < 0 || (int)e > ADV_REINFORCE_PP_BASELINE || !resp_tokens)
        return err_set(err, ERR_INVAL, "adv_compute: unknown estimator %d or no response token counts", (int)e);
    int n = 0;
    for (int g = 0; g < n_groups; g++) n += group_size[g];
    float *r = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));    /* adv may alias reward */
    if (!r) return err_set(err, ERR_NOMEM, "adv_compute: %d responses", n);
    memcpy(r, reward, (size_t)n * sizeof(float));
    int nz = 0;
    for (int i = 0; i < n; i++) nz += r[i] != 0.0f;
    double alpha = (double)n / (nz > 0 ? nz : 1);          /* gpg: bsz / count_nonzero(scores).clamp(min=1) */
    for (int g = 0, off = 0; g < n_groups && !rc; off += group_size[g], g++)
        rc = group_adv(e, r + off, resp_tokens + off, group_size[g], norm_by_std, eps, alpha, adv + off, g, err);
    if (!rc && (e == ADV_REINFORCE_PP || e == ADV_REINFORCE_PP_BASELINE)) rc = whiten(adv, resp_tokens, n, err);
    free(r);
    return rc;
}

void adv_rfpp_returns(const float *r, const uint8_t *m, int n, double gamma, float *ret) {
    float run = 0.0f, g = (float)gamma;
    for (int t = n - 1; t >= 0; t--) {
        float nr = r[t] + g * run;
        ret[t] = m[t] ? nr : 0.0f;
        if (m[t]) run = nr;
    }
}
