/* common/dapo/rollout_corr.c: verl's rollout-correction diagnostics and TIS weights (formulas in
 * rollout_corr.h). Per-token arithmetic in fp32 like verl's torch code, sums in double.
 * Not here: applying the weights (loss.c), IcePop / rejection sampling. */
#include "dapo/rollout_corr.h"

#include <math.h>
#include <string.h>

#define SAFETY_BOUND 20.0f   /* verl rollout_corr_helper.SAFETY_BOUND */

static float clampf20(float x) { return x < -SAFETY_BOUND ? -SAFETY_BOUND : (x > SAFETY_BOUND ? SAFETY_BOUND : x); }

static int check(const float *logp, const float *rlogp, const int *seq_off, int n_seq, char err[ERR_LEN]) {
    if (n_seq < 1 || !seq_off || !logp || !rlogp)
        return err_set(err, ERR_INVAL, "rollout_corr: NULL arrays or n_seq %d", n_seq);
    if (seq_off[0] != 0) return err_set(err, ERR_INVAL, "rollout_corr: seq_off[0] = %d, expected 0", seq_off[0]);
    for (int s = 0; s < n_seq; s++)
        if (seq_off[s + 1] < seq_off[s]) return err_set(err, ERR_INVAL, "rollout_corr: seq_off decreases at %d", s);
    return 0;
}

int rollout_corr_metrics(const float *logp, const float *rlogp, const uint8_t *mask, const int *seq_off, int n_seq,
                         RolloutCorrStats *st, char err[ERR_LEN]) {
    int rc = check(logp, rlogp, seq_off, n_seq, err);
    if (rc) return rc;
    if (!st) return err_set(err, ERR_INVAL, "rollout_corr_metrics: NULL stats");
    RolloutCorrStats z;
    memset(&z, 0, sizeof z);
    z.n_seq = n_seq;
    double kl = 0, k3 = 0, chi2 = 0, absd = 0;
    z.log_ppl_diff_max = -INFINITY;
    z.log_ppl_diff_min = INFINITY;
    for (int s = 0; s < n_seq; s++) {
        double n = 0, sl = 0, sr = 0, slr = 0;
        for (int t = seq_off[s]; t < seq_off[s + 1]; t++) {
            if (mask && !mask[t]) continue;
            float r = logp[t] - rlogp[t];
            n += 1;
            sl += logp[t];
            sr += rlogp[t];
            slr += r;
            kl += rlogp[t] - logp[t];
            k3 += (double)(expf(r) - r - 1.0f);
            float rho = expf(clampf20(r));
            chi2 += (double)(rho * rho);
            absd += fabsf(r);
        }
        double ml = sl / (n + 1e-8), mr = sr / (n + 1e-8), d = mr - ml;
        z.n_tokens += n;
        z.training_log_ppl += -ml;
        z.training_ppl += exp(-ml);
        z.rollout_log_ppl += -mr;
        z.rollout_ppl += exp(-mr);
        z.log_ppl_diff += d;
        z.log_ppl_abs_diff += fabs(d);
        if (d > z.log_ppl_diff_max) z.log_ppl_diff_max = d;
        if (d < z.log_ppl_diff_min) z.log_ppl_diff_min = d;
        z.ppl_ratio += exp(d);
        float ls = clampf20((float)slr);
        z.chi2_seq += exp(2.0 * (double)ls);
    }
    if (!(z.n_tokens > 0)) return err_set(err, ERR_INVAL, "rollout_corr_metrics: no counted token");
    const double den = z.n_tokens + 1e-8;
    z.training_log_ppl /= n_seq;
    z.training_ppl /= n_seq;
    z.rollout_log_ppl /= n_seq;
    z.rollout_ppl /= n_seq;
    z.log_ppl_diff /= n_seq;
    z.log_ppl_abs_diff /= n_seq;
    z.ppl_ratio /= n_seq;
    z.chi2_seq = z.chi2_seq / n_seq - 1.0;
    z.kl = kl / den;
    z.k3_kl = k3 / den;
    z.chi2_token = chi2 / den - 1.0;
    z.abs_logprob_diff = absd / den;
    *st = z;
    return 0;
}

int rollout_corr_is_weights(const float *logp, const float *rlogp, const uint8_t *mask, const int *seq_off,
                            int n_seq, RolloutIsLevel level, double threshold, float *w, char err[ERR_LEN]) {
    int rc = check(logp, rlogp, seq_off, n_seq, err);
    if (rc) return rc;
    if (!w) return err_set(err, ERR_INVAL, "rollout_corr_is_weights: NULL output");
    if (!(threshold > 0)) return err_set(err, ERR_INVAL, "rollout_is_threshold must be > 0, got %g", threshold);
    if (level != ROLLOUT_IS_TOKEN && level != ROLLOUT_IS_SEQUENCE)
        return err_set(err, ERR_INVAL, "rollout_is level %d: expected token or sequence", (int)level);
    const float cap = (float)threshold;
    for (int s = 0; s < n_seq; s++) {
        float seq_w = 0.0f;
        if (level == ROLLOUT_IS_SEQUENCE) {
            float sum = 0.0f;
            for (int t = seq_off[s]; t < seq_off[s + 1]; t++)
                if (!mask || mask[t]) sum += logp[t] - rlogp[t];
            seq_w = expf(clampf20(sum));
        }
        for (int t = seq_off[s]; t < seq_off[s + 1]; t++) {
            if (mask && !mask[t]) { w[t] = 0.0f; continue; }
            float x = level == ROLLOUT_IS_TOKEN ? expf(clampf20(logp[t] - rlogp[t])) : seq_w;
            w[t] = x > cap ? cap : x;
        }
    }
    return 0;
}
