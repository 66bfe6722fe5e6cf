/* common/dapo/rollout_rs.c: verl's rollout_correction config (parsed and resolved) and its rejection sampling
 * (rollout_corr.h). Source: verl 0.9.1 verl/trainer/ppo/rollout_corr_helper.py (_parse_rollout_is_threshold,
 * _parse_rollout_rs_thresholds, compute_rollout_rejection_mask, compute_rs_metrics) and
 * verl/trainer/config/algorithm.py (RolloutCorrectionConfig). Per-token arithmetic in fp32 like verl's torch code,
 * sums in double. Not here: IS weights and off-policy diagnostics (rollout_corr.c), the loss (loss.c). */
#include "dapo/rollout_corr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


#define SAFETY_BOUND 20.0f

static const char *rs_names[ROLLOUT_RS_MAX] = {
    "token_k1", "token_k2", "token_k3", "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
    "seq_mean_k1", "seq_mean_k2", "seq_mean_k3", "seq_max_k2", "seq_max_k3",
};

const char *rollout_rs_option_name(RolloutRsOption o) {
    return (unsigned)o < ROLLOUT_RS_MAX ? rs_names[o] : "?";
}

static int is_null(const char *s) {
    return !s || !*s || !strcmp(s, "null") || !strcmp(s, "None") || !strcmp(s, "none") || !strcmp(s, "~");
}

/* A positive number filling the whole of s[0..n). */
static int parse_pos(const char *s, size_t n, double *out) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    double v = strtod(buf, &end);
    if (*end || !(v > 0) || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* "upper" or "lower_upper" (k1 and IcePop). *lower = 0 when only an upper bound is given. */
static int parse_bounds(const char *s, size_t n, double *lower, double *upper) {
    const char *us = memchr(s, '_', n);
    *lower = 0;
    if (!us) return parse_pos(s, n, upper);
    return parse_pos(s, (size_t)(us - s), lower) || parse_pos(us + 1, n - (size_t)(us - s) - 1, upper) ? -1 : 0;
}

static const char *next_item(const char *p, size_t *len) {     /* comma-separated, spaces trimmed */
    while (*p == ' ') p++;
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    while (n && p[n - 1] == ' ') n--;
    *len = n;
    return p;
}

static int parse_rs(const char *rollout_rs, const char *rs_threshold, RolloutCorrConfig *o, char err[ERR_LEN]) {
    const char *K = "algorithm.rollout_correction.rollout_rs";
    for (const char *p = rollout_rs; *p;) {
        size_t n;
        const char *it = next_item(p, &n);
        int found = -1;
        for (int i = 0; i < ROLLOUT_RS_MAX; i++)
            if (strlen(rs_names[i]) == n && !strncmp(rs_names[i], it, n)) found = i;
        if (found < 0)
            return err_set(err, ERR_INVAL, "%s: '%.*s' is not a rejection option; allowed: token_k1, token_k2, token_k3, "
                           "seq_sum_k1|k2|k3, seq_mean_k1|k2|k3, seq_max_k2|k3 (comma-separated)", K, (int)n, it);
        int dup = 0;
        for (int i = 0; i < o->n_rs; i++) dup |= o->rs[i].opt == (RolloutRsOption)found;
        if (!dup) o->rs[o->n_rs++].opt = (RolloutRsOption)found;
        p = it + n;
        while (*p == ' ') p++;
        if (*p == ',') p++;
    }
    if (!o->n_rs) return err_set(err, ERR_INVAL, "%s: '%s' names no option", K, rollout_rs);
    if (is_null(rs_threshold))
        return err_set(err, ERR_INVAL, "algorithm.rollout_correction.rollout_rs_threshold must be set when rollout_rs is "
                       "('%s')", rollout_rs);
    const char *spec[ROLLOUT_RS_MAX];
    size_t len[ROLLOUT_RS_MAX];
    int ns = 0;
    for (const char *p = rs_threshold; *p && ns <= ROLLOUT_RS_MAX;) {
        size_t n;
        const char *it = next_item(p, &n);
        if (n && ns < ROLLOUT_RS_MAX) { spec[ns] = it; len[ns] = n; }
        if (n) ns++;
        p = it + n;
        while (*p == ' ') p++;
        if (*p == ',') p++;
    }
    if (ns != 1 && ns != o->n_rs)
        return err_set(err, ERR_INVAL, "algorithm.rollout_correction.rollout_rs_threshold: %d values for %d rollout_rs "
                       "options: give one shared value or one per option", ns, o->n_rs);
    for (int i = 0; i < o->n_rs; i++) {
        const char *s = spec[ns == 1 ? 0 : i];
        size_t n = len[ns == 1 ? 0 : i];
        int k1 = o->rs[i].opt == RS_TOKEN_K1 || o->rs[i].opt == RS_SEQ_SUM_K1 || o->rs[i].opt == RS_SEQ_MEAN_K1;
        double lo, up;
        if (parse_bounds(s, n, &lo, &up) || (!k1 && lo > 0))
            return err_set(err, ERR_INVAL, "algorithm.rollout_correction.rollout_rs_threshold: '%.*s' for %s: expected %s",
                           (int)n, s, rs_names[o->rs[i].opt],
                           k1 ? "a positive ratio bound or 'lower_upper'" : "one positive upper bound");
        o->rs[i].upper = up;
        o->rs[i].lower = k1 ? (lo > 0 ? lo : 1.0 / up) : 0;
        if (o->rs[i].lower > o->rs[i].upper)          /* verl 0.9.1 refuses it too (an empty kept band) */
            return err_set(err, ERR_INVAL, "algorithm.rollout_correction.rollout_rs_threshold: '%.*s' for %s: the "
                           "bounds are %g and %g: need lower <= upper", (int)n, s, rs_names[o->rs[i].opt],
                           o->rs[i].lower, o->rs[i].upper);
    }
    return 0;
}

int rollout_corr_config_parse(const char *rollout_is, const char *is_threshold, int is_batch_normalize,
                              const char *rollout_rs, const char *rs_threshold, int bypass, const char *loss_type,
                              int staleness, RolloutCorrConfig *out, char err[ERR_LEN]) {
    RolloutCorrConfig o;
    memset(&o, 0, sizeof o);
    o.bypass = bypass != 0;
    o.is_batch_normalize = is_batch_normalize != 0;
    const char *K = "algorithm.rollout_correction.";
    if (loss_type && *loss_type && strcmp(loss_type, "ppo_clip"))
        return err_set(err, ERR_UNSUPPORTED, "%sloss_type: '%s': only ppo_clip is implemented (verl's reinforce is not)",
                       K, loss_type);
    if (rollout_is && !strcmp(rollout_is, "auto")) {
        o.is_on = staleness >= 1 && !o.bypass;
        o.is_auto = o.is_on;
        o.is_level = ROLLOUT_IS_TOKEN;
    } else if (rollout_is && !strcmp(rollout_is, "token")) {
        o.is_on = 1;
        o.is_level = ROLLOUT_IS_TOKEN;
    } else if (rollout_is && !strcmp(rollout_is, "sequence")) {
        o.is_on = 1;
        o.is_level = ROLLOUT_IS_SEQUENCE;
    } else if (!is_null(rollout_is)) {
        return err_set(err, ERR_INVAL, "%srollout_is: '%s'; allowed: null, token, sequence, auto (token when "
                       "trainer.staleness >= 1)", K, rollout_is);
    }
    int is_set = o.is_on || (rollout_is && !strcmp(rollout_is, "auto"));     /* the threshold is checked for auto too */
    if (is_set && (is_null(is_threshold) || parse_bounds(is_threshold, strlen(is_threshold), &o.is_lower, &o.is_upper) ||
                   (o.is_lower > 0 && o.is_lower > o.is_upper)))
        return err_set(err, ERR_INVAL, "%srollout_is_threshold: '%s': expected a positive number (truncation) or "
                       "'lower_upper' with 0 < lower <= upper (IcePop)", K, is_threshold ? is_threshold : "");
    if (!is_null(rollout_rs)) {
        int rc = parse_rs(rollout_rs, rs_threshold, &o, err);
        if (rc) return rc;
    }
    if (o.bypass) o.is_on = o.is_auto = 0;   /* verl's bypass ppo_clip: the PPO ratio is the IS ratio; no weight applied */
    *out = o;
    return 0;
}

/* ------------------------------------------------------------------------------------------- rejection */

static float clampf20(float x) { return x < -SAFETY_BOUND ? -SAFETY_BOUND : (x > SAFETY_BOUND ? SAFETY_BOUND : x); }

static int opt_k(RolloutRsOption o) { return o == RS_SEQ_MAX_K2 ? 2 : o == RS_SEQ_MAX_K3 ? 3 : (int)o % 3 + 1; }

/* the per-token divergence of option o's family */
static float token_stat(RolloutRsOption o, float r_raw) {
    float r = clampf20(r_raw);
    switch (opt_k(o)) {
    case 1: return -r;
    case 2: return 0.5f * r * r;
    default: return expf(r) - 1.0f - r;
    }
}

static int keep_value(const RolloutRsCriterion *c, double v) {
    if (opt_k(c->opt) == 1) return v >= (float)log(c->lower) && v <= (float)log(c->upper);
    return v <= (float)c->upper;            /* torch compares an fp32 tensor with the bound as fp32 */
}

/* One criterion: keep_opt[N] (1 kept), its metrics. */
static void reject_one(const RolloutRsCriterion *c, const float *logp, const float *rlogp, const uint8_t *mask,
                       const int *seq_off, int n_seq, uint8_t *keep_opt, RolloutRsOptionStats *st) {
    const int token = c->opt <= RS_TOKEN_K3, k1 = opt_k(c->opt) == 1;
    const double thr_hi = k1 ? (float)log(c->upper) : c->upper, thr_lo = k1 ? (float)log(c->lower) : 0.0;
    double n = 0, ssum = 0, masked = 0, hi = 0, lo = 0, vmax = -INFINITY, vmin = INFINITY;
    int n_valid = 0, seq_masked = 0;
    for (int s = 0; s < n_seq; s++) {
        double ns = 0, agg = 0, mx = -INFINITY;
        for (int t = seq_off[s]; t < seq_off[s + 1]; t++) {
            if (mask && !mask[t]) continue;
            float v = token_stat(c->opt, logp[t] - rlogp[t]);
            ns += 1;
            agg += v;
            if (v > mx) mx = v;
        }
        double seq_v = c->opt >= RS_SEQ_MAX_K2 ? (ns > 0 ? mx : 0) : c->opt >= RS_SEQ_MEAN_K1 ? agg / (ns + 1e-8) : agg;
        int seq_keep = token || keep_value(c, seq_v), any_rej = 0;
        for (int t = seq_off[s]; t < seq_off[s + 1]; t++) {
            double v = token ? token_stat(c->opt, logp[t] - rlogp[t]) : seq_v;
            keep_opt[t] = (uint8_t)(token ? keep_value(c, v) : seq_keep);
            if (mask && !mask[t]) continue;
            n += 1;
            ssum += v;
            masked += !keep_opt[t];
            any_rej |= !keep_opt[t];
            if (token) {
                hi += v > thr_hi;
                lo += k1 && v < thr_lo;
                if (v > vmax) vmax = v;
                if (v < vmin) vmin = v;
            }
        }
        if (ns > 0) {
            n_valid++;
            seq_masked += any_rej;
            if (!token) {
                hi += seq_v > thr_hi;
                lo += k1 && seq_v < thr_lo;
                if (seq_v > vmax) vmax = seq_v;
                if (seq_v < vmin) vmin = seq_v;
            }
        }
    }
    const double den = n + 1e-8;
    st->mean = ssum / den;
    st->max = vmax;
    st->min = vmin;
    st->fraction_high = token ? hi / den : hi / (n_valid ? n_valid : 1);
    st->fraction_low = token ? lo / den : lo / (n_valid ? n_valid : 1);
    st->masked_fraction = masked / den;
    st->seq_masked_fraction = n_valid ? (double)seq_masked / n_valid : 0;
}

int rollout_corr_reject(const RolloutCorrConfig *rc, const float *logp, const float *rlogp, const uint8_t *mask,
                        const int *seq_off, int n_seq, uint8_t *keep, RolloutRsStats *st, char err[ERR_LEN]) {
    if (!rc || !keep || !logp || !rlogp || !seq_off || n_seq < 1 || rc->n_rs < 1 || rc->n_rs > ROLLOUT_RS_MAX)
        return err_set(err, ERR_INVAL, "rollout_corr_reject: bad arguments (n_seq %d, %d criteria)", n_seq,
                       rc ? rc->n_rs : -1);
    if (seq_off[0] != 0) return err_set(err, ERR_INVAL, "rollout_corr_reject: seq_off[0] = %d, expected 0", seq_off[0]);
    for (int s = 0; s < n_seq; s++)
        if (seq_off[s + 1] < seq_off[s]) return err_set(err, ERR_INVAL, "rollout_corr_reject: seq_off decreases at %d", s);
    const int N = seq_off[n_seq];
    uint8_t *k = xmalloc((size_t)(N > 0 ? N : 1));
    RolloutRsStats z;
    memset(&z, 0, sizeof z);
    for (int t = 0; t < N; t++) keep[t] = !mask || mask[t];
    for (int i = 0; i < rc->n_rs; i++) {
        reject_one(&rc->rs[i], logp, rlogp, mask, seq_off, n_seq, k, &z.opt[i]);
        for (int t = 0; t < N; t++) keep[t] &= k[t];
    }
    xfree(k);
    double n = 0;
    for (int s = 0; s < n_seq; s++) {
        int any = 0;
        for (int t = seq_off[s]; t < seq_off[s + 1]; t++) {
            if (mask && !mask[t]) continue;
            n += 1;
            z.n_tokens_rejected += !keep[t];
            any |= !keep[t];
        }
        z.n_seq_rejected += any;
    }
    if (st && !(n > 0)) return err_set(err, ERR_INVAL, "rollout_corr_reject: no counted token");
    z.masked_fraction = z.n_tokens_rejected / (n + 1e-8);
    z.seq_masked_fraction = (double)z.n_seq_rejected / n_seq;
    if (st) *st = z;
    return 0;
}
