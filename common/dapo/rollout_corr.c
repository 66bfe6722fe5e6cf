/* common/dapo/rollout_corr.c: verl's rollout-correction diagnostics and TIS weights (formulas in
 * rollout_corr.h). Per-token arithmetic in fp32 like verl's torch code, sums in double.
 * rollout_corr_config_parse and the rejection masks are in rollout_rs.c.
 * Not here: applying the weights (loss.c, the learner). */
#include "dapo/rollout_corr.h"

#include <math.h>
#include <string.h>

#include "core/err.h"

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
    if (!(threshold > 0)) return err_set(err, ERR_INVAL, "rollout_is_threshold must be > 0, got %g", threshold);
    RolloutCorrConfig rc = {.is_on = 1, .is_level = level, .is_upper = threshold};
    return rollout_corr_weights(&rc, logp, rlogp, mask, seq_off, n_seq, w, NULL, err);
}

/* Per-segment log-ratio sums (unclamped, as verl's masked_sum) of the counted tokens. */
static float seg_log_ratio(const float *logp, const float *rlogp, const uint8_t *mask, int a, int b) {
    float sum = 0.0f;
    for (int t = a; t < b; t++)
        if (!mask || mask[t]) sum += logp[t] - rlogp[t];
    return sum;
}

static void is_stats(const RolloutCorrConfig *rc, const float *logp, const float *rlogp, const uint8_t *mask,
                     const int *seq_off, int n_seq, const float *w, RolloutIsStats *st) {
    memset(st, 0, sizeof *st);
    const double up = rc->is_upper, lo = rc->is_lower > 0 ? rc->is_lower : 1.0 / rc->is_upper;
    const int seq = rc->is_level == ROLLOUT_IS_SEQUENCE;
    double n = 0, sw = 0, sw2 = 0, hi = 0, low = 0, oob = 0, wmax = -INFINITY, wmin = INFINITY;
    double smax = -INFINITY, smin = INFINITY;       /* sequence level: log-ratio sums over every segment */
    double seq_sum = 0, seq_sq = 0, seq_hi = 0, seq_lo = 0;
    double sm_max = -INFINITY, sm_min = INFINITY, dev = 0;
    double *sm = xmalloc((size_t)n_seq * sizeof *sm);
    for (int s = 0; s < n_seq; s++) {
        double ns = 0, ws = 0, rs = 0;   /* rs: the raw (pre-truncation) weights' sum */
        int changed = 0;
        float S = seg_log_ratio(logp, rlogp, mask, seq_off[s], seq_off[s + 1]);
        if (seq) {
            if (S > smax) smax = S;
            if (S < smin) smin = S;
            hi += S > (float)log(up);
            low += S < (float)log(lo);
        }
        for (int t = seq_off[s]; t < seq_off[s + 1]; t++) {
            if (mask && !mask[t]) continue;
            float raw = expf(clampf20(seq ? S : logp[t] - rlogp[t]));
            double x = w[t], wc = x < 0 ? 0 : (x > up ? up : x);
            n += 1; ns += 1; ws += x; rs += raw;
            sw += wc; sw2 += wc * wc;
            if (!seq) { hi += raw > (float)up; low += raw < (float)lo; }
            if (x > wmax) wmax = x;
            if (x < wmin) wmin = x;
            oob += raw < (float)rc->is_lower || raw > (float)up;
            if ((float)x != raw) { st->n_tokens_truncated += 1; changed = 1; }
        }
        st->n_seq_truncated += changed;
        sm[s] = (float)ws / ((float)ns + 1e-8f);      /* fp32 as torch: a row of capped weights is the cap exactly */
        seq_sum += sm[s];
        if (sm[s] > sm_max) sm_max = sm[s];
        if (sm[s] < sm_min) sm_min = sm[s];
        if (fabs(sm[s] - 1.0) > dev) dev = fabs(sm[s] - 1.0);
        const float raw_mean = (float)rs / ((float)ns + 1e-8f); /* verl 0.9.1: the fractions count raw sequence means
                                                                  (a mean of capped weights never exceeds the cap) */
        seq_hi += raw_mean > (float)up;
        seq_lo += raw_mean < (float)lo;
    }
    const double den = n + 1e-8, mean_c = sw / den;
    st->mean = 0;
    for (int s = 0; s < n_seq; s++)
        for (int t = seq_off[s]; t < seq_off[s + 1]; t++)
            if (!mask || mask[t]) st->mean += w[t];
    st->mean /= den;
    if (seq) {
        st->max = exp(smax > SAFETY_BOUND ? SAFETY_BOUND : smax);
        st->min = exp(smin);
        st->ratio_fraction_high = hi / n_seq;
        st->ratio_fraction_low = low / n_seq;
    } else {
        st->max = wmax;
        st->min = wmin;
        st->ratio_fraction_high = hi / den;
        st->ratio_fraction_low = low / den;
    }
    double var = sw2 / den - mean_c * mean_c;
    st->std = n > 1 ? sqrt(var > 0 ? var : 0) : 0;
    st->eff_sample_size = 1.0 / ((sw2 / ((mean_c + 1e-8) * (mean_c + 1e-8))) / den);
    st->oob_ratio = rc->is_lower > 0 ? oob / den : 0;
    st->seq_mean = seq_sum / n_seq;
    for (int s = 0; s < n_seq; s++) seq_sq += (sm[s] - st->seq_mean) * (sm[s] - st->seq_mean);
    st->seq_std = n_seq > 1 ? sqrt(seq_sq / (n_seq - 1)) : 0;       /* torch.std: unbiased */
    st->seq_max = sm_max;
    st->seq_min = sm_min;
    st->seq_max_deviation = dev;
    st->seq_fraction_high = seq_hi / n_seq;
    st->seq_fraction_low = seq_lo / n_seq;
    xfree(sm);
}

int rollout_corr_weights(const RolloutCorrConfig *rc, const float *logp, const float *rlogp, const uint8_t *mask,
                         const int *seq_off, int n_seq, float *w, RolloutIsStats *st, char err[ERR_LEN]) {
    int rc_ = check(logp, rlogp, seq_off, n_seq, err);
    if (rc_) return rc_;
    if (!w || !rc) return err_set(err, ERR_INVAL, "rollout_corr_weights: NULL output or config");
    if (!rc->is_on) return err_set(err, ERR_INVAL, "rollout_corr_weights: rollout_is is off");
    if (!(rc->is_upper > 0) || rc->is_lower < 0 || (rc->is_lower > 0 && rc->is_lower > rc->is_upper))
        return err_set(err, ERR_INVAL, "rollout_is_threshold: bounds %g, %g: need 0 < lower <= upper", rc->is_lower,
                       rc->is_upper);
    if (rc->is_level != ROLLOUT_IS_TOKEN && rc->is_level != ROLLOUT_IS_SEQUENCE)
        return err_set(err, ERR_INVAL, "rollout_is level %d: expected token or sequence", (int)rc->is_level);
    const float up = (float)rc->is_upper, lo = (float)rc->is_lower;
    long counted = 0;
    for (int s = 0; s < n_seq; s++) {
        float seq_w = rc->is_level == ROLLOUT_IS_SEQUENCE
                          ? expf(clampf20(seg_log_ratio(logp, rlogp, mask, seq_off[s], seq_off[s + 1]))) : 0.0f;
        for (int t = seq_off[s]; t < seq_off[s + 1]; t++) {
            if (mask && !mask[t]) { w[t] = 0.0f; continue; }
            counted++;
            float x = rc->is_level == ROLLOUT_IS_TOKEN ? expf(clampf20(logp[t] - rlogp[t])) : seq_w;
            if (lo > 0) w[t] = x >= lo && x <= up ? x : 0.0f;             /* IcePop */
            else w[t] = x > up ? up : x;                                   /* TIS */
        }
    }
    if (!st) return 0;
    if (!counted) return err_set(err, ERR_INVAL, "rollout_corr_weights: no counted token");
    is_stats(rc, logp, rlogp, mask, seq_off, n_seq, w, st);
    return 0;
}
