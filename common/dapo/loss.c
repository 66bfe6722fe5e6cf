/* common/dapo/loss.c: DAPO token-level clipped policy loss, verl's aggregation modes, metrics and gradient
 * (formulas and sources in loss.h). Per-token arithmetic is fp32 in the order verl's torch code evaluates it,
 * so clip decisions match verl bit for bit on the same inputs; sums are accumulated in double.
 * Not here: advantages (advantages.c), the model backward that consumes dlogp, the optimizer.
 * One deliberate difference: tokens with mask 0 are skipped outright, while verl's seq-mean-* modes multiply
 * by the mask (a NaN at a masked position would poison verl's sum; it cannot poison ours). */
#include "dapo/loss.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

static const char *const k_mode_names[] = {
    "token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm",
};
#define N_MODES ((int)(sizeof k_mode_names / sizeof k_mode_names[0]))

int loss_agg_mode_parse(const char *name, LossAggMode *mode, char err[ERR_LEN]) {
    for (int i = 0; name && i < N_MODES; i++)
        if (strcmp(name, k_mode_names[i]) == 0) { *mode = (LossAggMode)i; return 0; }
    return err_set(err, ERR_INVAL, "loss_agg_mode '%s': expected token-mean, seq-mean-token-mean, "
                   "seq-mean-token-sum or seq-mean-token-sum-norm", name ? name : "(null)");
}

const char *loss_agg_mode_name(LossAggMode mode) {
    return (int)mode >= 0 && (int)mode < N_MODES ? k_mode_names[mode] : "?";
}

static const char *const k_loss_modes[] = {"vanilla", "gspo", "cispo", "sapo", "gpg", "dppo_tv", "dppo_kl",
                                           "clip_cov", "kl_cov", "geo_mean"};
#define N_LOSS_MODES ((int)(sizeof k_loss_modes / sizeof k_loss_modes[0]))

int loss_mode_parse(const char *name, LossMode *mode, char err[ERR_LEN]) {
    for (int i = 0; name && i < N_LOSS_MODES; i++)
        if (strcmp(name, k_loss_modes[i]) == 0) { *mode = (LossMode)i; return 0; }
    return err_set(err, ERR_INVAL, "policy_loss.loss_mode '%s': dapo has vanilla, gspo, cispo, sapo, gpg, dppo_tv, "
                   "dppo_kl, clip_cov, kl_cov and geo_mean (verl's dro and bypass_mode are not implemented)",
                   name ? name : "(null)");
}

const char *loss_mode_name(LossMode mode) {
    return (int)mode >= 0 && (int)mode < N_LOSS_MODES ? k_loss_modes[mode] : "?";
}

void loss_params_default(LossParams *p) {
    memset(p, 0, sizeof *p);
    p->clip_ratio_low = 0.2;
    p->clip_ratio_high = 0.28;
    p->clip_ratio_c = 10.0;
    p->agg = LOSS_AGG_TOKEN_MEAN;
    p->dp_size = 1;
    p->tau_pos = 1.0;
    p->tau_neg = 1.05;
    p->clip_cov_ratio = 0.0002;
    p->clip_cov_lb = 1.0;
    p->clip_cov_ub = 5.0;
    p->kl_cov_ratio = 0.0002;
    p->ppo_kl_coef = 0.1;
}

static int check_args(const LossParams *p, const LossInput *in, char err[ERR_LEN]) {
    if (!p || !in) return err_set(err, ERR_INVAL, "loss_compute: NULL params or input");
    if ((int)p->agg < 0 || (int)p->agg >= N_MODES)
        return err_set(err, ERR_INVAL, "loss_compute: unknown loss_agg_mode %d", (int)p->agg);
    if ((int)p->mode < 0 || (int)p->mode >= N_LOSS_MODES)
        return err_set(err, ERR_INVAL, "loss_compute: unknown policy loss mode %d", (int)p->mode);
    if (p->mode == LOSS_MODE_SAPO && (!(p->tau_pos > 0) || !(p->tau_neg > 0) || !isfinite(p->tau_pos) ||
                                      !isfinite(p->tau_neg)))
        return err_set(err, ERR_INVAL, "sapo: tau_pos %g and tau_neg %g must be finite and > 0", p->tau_pos, p->tau_neg);
    if (!(p->clip_ratio_c > 1.0))
        return err_set(err, ERR_INVAL, "clip_ratio_c must be > 1 for dual-clip PPO, got %g", p->clip_ratio_c);
    if (!(p->clip_ratio_low >= 0.0) || !(p->clip_ratio_high >= 0.0))
        return err_set(err, ERR_INVAL, "clip ratios must be >= 0, got low %g high %g",
                       p->clip_ratio_low, p->clip_ratio_high);
    if (!isfinite(p->entropy_coeff)) return err_set(err, ERR_INVAL, "entropy_coeff must be finite");
    if (p->mode == LOSS_MODE_CLIP_COV && !(p->clip_cov_ratio > 0))
        return err_set(err, ERR_INVAL, "clip_cov: policy_loss.clip_cov_ratio must be > 0, got %g", p->clip_cov_ratio);
    if (p->mode == LOSS_MODE_KL_COV && (!(p->kl_cov_ratio > 0) || !isfinite(p->ppo_kl_coef)))
        return err_set(err, ERR_INVAL, "kl_cov: policy_loss.kl_cov_ratio must be > 0 (got %g) and ppo_kl_coef finite",
                       p->kl_cov_ratio);
    if (in->n_seq < 0 || (in->n_seq > 0 && !in->seq_off))
        return err_set(err, ERR_INVAL, "loss_compute: bad n_seq %d or NULL seq_off", in->n_seq);
    if (in->n_seq > 0 && in->seq_off[0] != 0)
        return err_set(err, ERR_INVAL, "loss_compute: seq_off[0] = %d, expected 0", in->seq_off[0]);
    for (int s = 0; s < in->n_seq; s++)
        if (in->seq_off[s + 1] < in->seq_off[s])
            return err_set(err, ERR_INVAL, "loss_compute: seq_off decreases at segment %d", s);
    int n = in->n_seq > 0 ? in->seq_off[in->n_seq] : 0;
    if (n > 0 && (!in->logp || !in->old_logp || !in->adv))
        return err_set(err, ERR_INVAL, "loss_compute: NULL logp, old_logp or adv");
    return 0;
}

/* One token: value, clip flags, d(loss_t)/d(logp_t). Torch's evaluation order and fp32 throughout. */
typedef struct { float loss, grad, negkl; int clipped, lower; } TokOut;

static TokOut token_eval(float logp, float old_logp, float a, float lo, float hi, float c) {
    TokOut o;
    float d = logp - old_logp;
    int in_range = d > -20.0f && d < 20.0f;   /* torch.clamp's gradient is 0 ON the bounds too (open interval) */
    float dc = d < -20.0f ? -20.0f : (d > 20.0f ? 20.0f : d);   /* NaN stays NaN */
    float r = expf(dc);
    float na = -a;
    float l1 = na * r;
    float rc = r < lo ? lo : (r > hi ? hi : r);
    float l2 = na * rc;
    float g1 = na, g2 = (r > lo && r < hi) ? na : 0.0f;   /* same open interval for the ratio clamp */
    float lc, glc;
    if (l1 > l2)      { lc = l1; glc = g1; }
    else if (l2 > l1) { lc = l2; glc = g2; }
    else              { lc = (isnan(l1) || isnan(l2)) ? NAN : l1; glc = 0.5f * (g1 + g2); }
    o.clipped = l2 > l1;
    float l3 = na * c;
    o.lower = (lc > l3) && (a < 0.0f);
    float loss = lc, g = glc;
    if (a < 0.0f) {
        if (l3 < lc)      { loss = l3; g = 0.0f; }
        else if (lc == l3) g = 0.5f * glc;
    }
    o.loss = loss;
    o.grad = in_range ? g * r : (isnan(d) ? NAN : 0.0f);
    o.negkl = -dc;
    return o;
}

/* d(agg)/d(loss_t) for a counted token of a segment with cnt counted tokens (verl's agg_loss, see loss.h) */
static double agg_weight(LossAggMode agg, int cnt, double tok_den, double seq_den, double norm, double dp) {
    switch (agg) {
    case LOSS_AGG_TOKEN_MEAN:          return tok_den > 0 ? dp / tok_den : 0;
    case LOSS_AGG_SEQ_MEAN_TOKEN_MEAN: return seq_den > 0 ? dp / ((cnt + 1e-8) * seq_den) : 0;
    case LOSS_AGG_SEQ_MEAN_TOKEN_SUM:  return seq_den > 0 ? dp / seq_den : 0;
    default:                           return seq_den > 0 ? dp / seq_den / norm : 0;
    }
}

/* torch.maximum(l1, l2) with its gradient (g1, g2 the branches'; ties split half-half, NaN propagates) */
static void max_pair(float l1, float l2, float g1, float g2, float *l, float *g) {
    if (l1 > l2)      { *l = l1; *g = g1; }
    else if (l2 > l1) { *l = l2; *g = g2; }
    else              { *l = (isnan(l1) || isnan(l2)) ? NAN : l1; *g = 0.5f * (g1 + g2); }
}

/* gspo: the sequence's ratio s = exp(min(ls, 10)) (ls its mean log-ratio); the gradient flows through logp_t only */
static TokOut token_gspo(float logp, float old_logp, float a, float ls, float lo, float hi) {
    TokOut o;
    float lr = ls > 10.0f ? 10.0f : ls, sr = expf(lr), na = -a;
    float l1 = na * sr, src = sr < lo ? lo : (sr > hi ? hi : sr), l2 = na * src;
    float g2 = (sr > lo && sr < hi) ? na : 0.0f, g;
    max_pair(l1, l2, na, g2, &o.loss, &g);
    o.grad = ls < 10.0f ? g * sr : (isnan(ls) ? NAN : 0.0f);
    o.clipped = l2 > l1;
    o.lower = 0;
    o.negkl = -(logp - old_logp);
    return o;
}

/* dppo_tv / dppo_kl (see loss.h); dlo, dhi: the divergence bounds (clip_ratio_low / _high), c: clip_ratio_c */
static TokOut token_dppo(int kl, float logp, float old_logp, float a, float dlo, float dhi, float c) {
    TokOut o = {0};
    float d = logp - old_logp, dc = d < -20.0f ? -20.0f : (d > 20.0f ? 20.0f : d), r = expf(dc);
    float tr = r > c ? c : r, p = expf(logp), po = expf(old_logp);
    int valid;
    if (!kl) valid = a > 0.0f ? (p - po) <= dhi : (p - po) >= -dlo;
    else {
        float bkl = po * (old_logp - logp) + (1.0f - po) * logf((1.0f - po + 1e-8f) / (1.0f - p + 1e-8f));
        valid = a > 0.0f ? (bkl <= dhi || p <= po) : (bkl <= dlo || p >= po);
    }
    float v = valid ? 1.0f : 0.0f;
    o.loss = ((-a * tr) * logp) * v;
    o.grad = (-a * tr) * v;
    o.clipped = !valid;
    o.lower = (r > c) && valid;
    o.negkl = -dc;
    return o;
}

/* cispo, sapo, gpg: token-local losses (see loss.h) */
static TokOut token_other(LossMode mode, float logp, float old_logp, float a, float lo, float hi, float tp, float tn) {
    TokOut o = {0};
    float d = logp - old_logp;
    int in_range = d > -20.0f && d < 20.0f;
    float dc = d < -20.0f ? -20.0f : (d > 20.0f ? 20.0f : d), r = expf(dc);
    o.negkl = -dc;
    if (mode == LOSS_MODE_CISPO) {
        float rc = r < lo ? lo : (r > hi ? hi : r);
        o.loss = (-rc * a) * logp;
        o.grad = -rc * a;
        o.clipped = r != rc;
    } else if (mode == LOSS_MODE_SAPO) {
        float tau = a > 0.0f ? tp : tn, sg = 1.0f / (1.0f + expf(-(tau * (r - 1.0f))));
        o.loss = -(sg * (4.0f / tau)) * a;
        o.grad = in_range ? -a * (4.0f / tau) * (sg * (1.0f - sg)) * tau * r : (isnan(d) ? NAN : 0.0f);
    } else {                                          /* gpg */
        o.loss = -logp * a;
        o.grad = -a;
    }
    return o;
}

/* clip_cov: vanilla's clipped loss without the log-ratio clamp or the dual clip, zeroed (corr 0) on a selected token */
static TokOut token_clip_cov(float logp, float old_logp, float a, float lo, float hi, int sel) {
    TokOut o = {0};
    float d = logp - old_logp, r = expf(d), na = -a, rc = r < lo ? lo : (r > hi ? hi : r), g;
    max_pair(na * r, na * rc, na, (r > lo && r < hi) ? na : 0.0f, &o.loss, &g);
    float corr = sel ? 0.0f : 1.0f;
    o.loss *= corr;
    o.grad = g * r * corr;
    o.clipped = sel;                                  /* verl's pg_clipfrac: the fraction with corr 0 */
    o.negkl = -d;
    return o;
}

/* kl_cov: -A r, plus ppo_kl_coef |d| on a selected token; its ppo_kl is the mean |d| */
static TokOut token_kl_cov(float logp, float old_logp, float a, float coef, int sel) {
    TokOut o = {0};
    float d = logp - old_logp, r = expf(d);
    o.loss = -a * r;
    o.grad = -a * r;
    if (sel) {
        o.loss = o.loss + coef * fabsf(d);
        o.grad += coef * (d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f);   /* torch's abs: 0 at 0 */
    }
    o.negkl = fabsf(d);
    return o;
}

typedef struct { float cov; int pos; } CovRank;
static int by_cov_desc(const void *a, const void *b) {
    const CovRank *x = a, *y = b;
    int xn = isnan(x->cov), yn = isnan(y->cov);
    if (xn != yn) return yn - xn;                     /* NaN first, as torch.topk ranks it */
    if (!xn && x->cov != y->cov) return x->cov > y->cov ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* clip_cov / kl_cov's selection over one call (verl computes it per micro-batch): sel[t] = 1 for the chosen tokens.
 * cov_t = (A_t - mean A) (logp_t - mean logp) over the counted tokens (clip_cov: verl_F.masked_mean, sum / (n + 1e-8);
 * kl_cov: the plain mean). clip_cov: the candidates are the counted tokens the clip does not already bind (l2 <= l1)
 * with clip_cov_lb < cov < clip_cov_ub; max(int(clip_cov_ratio n), 1) of them are zeroed — all when there are no more
 * candidates than that, else the first of a seeded permutation (verl: torch.randperm; loss.h). kl_cov: the
 * max(1, int(n kl_cov_ratio)) largest cov (ties: the lower index first; torch.topk leaves ties unspecified). */
static void cov_select(const LossParams *p, const LossInput *in, int n, double ntok, uint8_t *sel) {
    const uint8_t *m = in->mask;
    memset(sel, 0, (size_t)n);
    if (ntok <= 0) return;
    double sa = 0, sl = 0;
    for (int t = 0; t < n; t++)
        if (!m || m[t]) { sa += in->adv[t]; sl += in->logp[t]; }
    int kl = p->mode == LOSS_MODE_KL_COV;
    float ma = (float)(sa / (kl ? ntok : ntok + 1e-8)), ml = (float)(sl / (kl ? ntok : ntok + 1e-8));
    float lo = (float)(1.0 - p->clip_ratio_low), hi = (float)(1.0 + p->clip_ratio_high);
    int *idx = malloc((size_t)n * sizeof(int)), nc = 0;
    float *cov = malloc((size_t)n * sizeof(float));
    if (!idx || !cov) abort();
    for (int t = 0; t < n; t++) {
        if (m && !m[t]) continue;
        float c = (in->adv[t] - ma) * (in->logp[t] - ml);
        if (!kl) {
            float r = expf(in->logp[t] - in->old_logp[t]), rc = r < lo ? lo : (r > hi ? hi : r);
            if (-in->adv[t] * rc > -in->adv[t] * r || !(c > (float)p->clip_cov_lb && c < (float)p->clip_cov_ub)) continue;
        }
        cov[nc] = c;
        idx[nc++] = t;
    }
    long want = kl ? (long)(ntok * p->kl_cov_ratio) : (long)(p->clip_cov_ratio * ntok);
    if (want < 1) want = 1;
    if (kl) {                                         /* the `want` largest cov, ties: the lower position first */
        CovRank *rk = malloc((size_t)(nc > 0 ? nc : 1) * sizeof *rk);
        if (!rk) abort();
        for (int i = 0; i < nc; i++) rk[i] = (CovRank){cov[i], idx[i]};
        qsort(rk, (size_t)nc, sizeof *rk, by_cov_desc);
        for (long k = 0; k < want && k < nc; k++) sel[rk[k].pos] = 1;
        free(rk);
    } else if (nc <= want) {
        for (int i = 0; i < nc; i++) sel[idx[i]] = 1;
    } else {
        int *perm = malloc((size_t)nc * sizeof(int));
        if (!perm) abort();
        rng_permutation(perm, nc, in->draw_seed, in->draw_stream, 0xc1c0u);
        for (long k = 0; k < want; k++) sel[idx[perm[k]]] = 1;
        free(perm);
    }
    free(idx);
    free(cov);
}

/* geo_mean (GMPO) of one sequence: its loss -adv ratio w (w: the IS weights' geometric mean, 1 without them) and the
 * factor g_s with d(loss)/d(logp_t) = g_s dmin'(d_t) / (cnt + 1e-8) (see loss.h) */
typedef struct { float loss, g; } GeoSeq;
static GeoSeq geo_seq(const LossInput *in, int a, int b, int cnt, float lo, float hi) {
    const uint8_t *m = in->mask;
    float sd = 0, sa = 0, sw = 0;
    for (int t = a; t < b; t++) {
        if (m && !m[t]) continue;
        float d = in->logp[t] - in->old_logp[t], dc = d < -lo ? -lo : (d > hi ? hi : d), A = in->adv[t];
        float sg = A > 0.0f ? 1.0f : A < 0.0f ? -1.0f : 0.0f, x = sg * d, y = sg * dc;
        sd += sg * (x < y ? x : y);
        sa += A;
        if (in->is_weight) sw += logf(in->is_weight[t] + 1e-10f);
    }
    float den = (float)cnt + 1e-8f, ratio = expf(sd / den), adv = sa / den, w = in->is_weight ? expf(sw / den) : 1.0f;
    GeoSeq o = {.loss = -adv * ratio * w, .g = -adv * ratio * w};
    return o;
}

/* d dmin_t / d d_t for geo_mean: dmin = sgn min(sgn d, sgn clamp(d, -low, high)), torch's min splitting ties */
static float geo_dmin_grad(float d, float A, float lo, float hi) {
    if (!(A != 0.0f)) return 0.0f;
    float sg = A > 0.0f ? 1.0f : -1.0f, dc = d < -lo ? -lo : (d > hi ? hi : d), x = sg * d, y = sg * dc;
    float gy = (d > -lo && d < hi) ? 1.0f : 0.0f;     /* clamp's gradient on its open interval */
    float gm = x < y ? 1.0f : y < x ? gy : 0.5f * (1.0f + gy);
    return gm;                                        /* sg * (sg * ...) */
}

/* geo_mean's token: its share of the sequence's loss (loss_tok), its gradient, verl's clip flags (d outside
 * [-low, high] with A > 0, resp. A < 0) and ppo_kl's -d */
static TokOut token_geo(float logp, float old_logp, float a, GeoSeq g, int cnt, float lo, float hi) {
    TokOut o = {0};
    float d = logp - old_logp, den = (float)cnt + 1e-8f, dc = d < -lo ? -lo : (d > hi ? hi : d);
    o.loss = g.loss / den;
    o.grad = g.g * geo_dmin_grad(d, a, lo, hi) / den;
    o.clipped = d != dc && a > 0.0f;
    o.lower = d != dc && a < 0.0f;
    o.negkl = -d;
    return o;
}

/* Every token-local mode's token (see loss.h); ls: gspo's sequence mean log-ratio, sel: clip_cov / kl_cov's mark */
static TokOut token_mode(const LossParams *p, float x, float x0, float A, float ls, int sel) {
    const float lo = (float)(1.0 - p->clip_ratio_low), hi = (float)(1.0 + p->clip_ratio_high);
    const float c = (float)p->clip_ratio_c;
    switch (p->mode) {
    case LOSS_MODE_VANILLA:  return token_eval(x, x0, A, lo, hi, c);
    case LOSS_MODE_GSPO:     return token_gspo(x, x0, A, ls, lo, hi);
    case LOSS_MODE_DPPO_TV:
    case LOSS_MODE_DPPO_KL:  return token_dppo(p->mode == LOSS_MODE_DPPO_KL, x, x0, A, (float)p->clip_ratio_low,
                                               (float)p->clip_ratio_high, c);
    case LOSS_MODE_CLIP_COV: return token_clip_cov(x, x0, A, lo, hi, sel);
    case LOSS_MODE_KL_COV:   return token_kl_cov(x, x0, A, (float)p->ppo_kl_coef, sel);
    default:                 return token_other(p->mode, x, x0, A, lo, hi, (float)p->tau_pos, (float)p->tau_neg);
    }
}

int loss_compute(const LossParams *p, const LossInput *in, float *loss_tok, float *dlogp, float *dentropy,
                 LossStats *st, char err[ERR_LEN]) {
    int rc = check_args(p, in, err);
    if (rc) return rc;
    if (dentropy && !in->entropy) return err_set(err, ERR_INVAL, "loss_compute: dentropy needs entropies");
    if (p->use_kl && (!in->ref_logp || !isfinite(p->kl_coef)))
        return err_set(err, ERR_INVAL, "loss_compute: the KL loss needs the reference log-probs and a finite kl_coef");
    const uint8_t *m = in->mask;

    /* Local counts: the fallbacks verl uses when no global batch info is given. */
    double ntok = 0;
    int nonempty = 0, longest = 0;
    for (int s = 0; s < in->n_seq; s++) {
        int a = in->seq_off[s], b = in->seq_off[s + 1], cnt = 0;
        for (int t = a; t < b; t++) cnt += m ? (m[t] != 0) : 1;
        ntok += cnt;
        nonempty += cnt > 0;
        if (b - a > longest) longest = b - a;
    }
    const double dp = p->dp_size > 0 ? p->dp_size : 1;
    const double tok_den = p->batch_num_tokens > 0 ? p->batch_num_tokens : ntok;
    const double seq_den = p->global_batch_size > 0 ? p->global_batch_size : nonempty;
    const double norm = p->loss_scale_factor > 0 ? p->loss_scale_factor : (longest > 0 ? longest : 1);
    /* geo_mean: verl's torch.mean over the call's rows (every sequence, counted tokens or not); with the global batch
     * size given, over the mini-batch's sequences instead (loss.h) */
    const double geo_den = p->global_batch_size > 0 ? p->global_batch_size : in->n_seq;
    const int n = in->n_seq > 0 ? in->seq_off[in->n_seq] : 0;
    uint8_t *sel = NULL;
    if (p->mode == LOSS_MODE_CLIP_COV || p->mode == LOSS_MODE_KL_COV) {
        sel = malloc((size_t)(n > 0 ? n : 1));
        if (!sel) return err_set(err, ERR_NOMEM, "loss_compute: out of memory");
        cov_select(p, in, n, ntok, sel);
    }

    const LossAggMode agg = p->mode == LOSS_MODE_SAPO ? LOSS_AGG_SEQ_MEAN_TOKEN_MEAN : p->agg;   /* verl's sapo */
    LossStats z;
    memset(&z, 0, sizeof z);
    z.n_tokens = ntok;
    z.n_seq_nonempty = nonempty;

    for (int s = 0; s < in->n_seq; s++) {
        int a = in->seq_off[s], b = in->seq_off[s + 1], cnt = 0;
        for (int t = a; t < b; t++) cnt += m ? (m[t] != 0) : 1;
        /* d(agg)/d(loss_t) for a counted token of this segment (verl's agg_loss, see loss.h). */
        double w;
        float ls = 0;                                 /* gspo: the sequence's mean log-ratio (fp32, as torch) */
        if (p->mode == LOSS_MODE_GSPO) {
            for (int t = a; t < b; t++)
                if (!m || m[t]) ls += in->logp[t] - in->old_logp[t];
            ls /= (float)(cnt > 1 ? cnt : 1);
        }
        double we = agg_weight(p->agg, cnt, tok_den, seq_den, norm, dp);   /* the entropy term's: loss_agg_mode */
        w = agg == p->agg ? we : agg_weight(agg, cnt, tok_den, seq_den, norm, dp);
        GeoSeq geo = {0};
        if (p->mode == LOSS_MODE_GEO_MEAN) {          /* one loss per sequence, mean over the sequences */
            geo = geo_seq(in, a, b, cnt, (float)p->clip_ratio_low, (float)p->clip_ratio_high);
            w = geo_den > 0 ? dp / geo_den : 0;
            z.pg_loss += w * geo.loss;
        }
        for (int t = a; t < b; t++) {
            if (m && !m[t]) {
                if (loss_tok) loss_tok[t] = 0.0f;
                if (dlogp) dlogp[t] = 0.0f;
                if (dentropy) dentropy[t] = 0.0f;
                continue;
            }
            float x = in->logp[t], x0 = in->old_logp[t], A = in->adv[t];
            TokOut o = p->mode == LOSS_MODE_GEO_MEAN ? token_geo(x, x0, A, geo, cnt, (float)p->clip_ratio_low,
                                                                (float)p->clip_ratio_high)
                                                     : token_mode(p, x, x0, A, ls, sel ? sel[t] : 0);
            if (in->is_weight && p->mode != LOSS_MODE_GEO_MEAN) { o.loss *= in->is_weight[t]; o.grad *= in->is_weight[t]; }
            if (p->mode != LOSS_MODE_GEO_MEAN) z.pg_loss += w * o.loss;
            z.clipfrac_sum += o.clipped;
            z.clipfrac_lower_sum += o.lower;
            z.kl_sum += o.negkl;
            if (loss_tok) loss_tok[t] = o.loss;
            double g = w * o.grad;
            if (p->use_kl) {
                float kg, kv = kl_penalty_eval(p->kl, x, in->ref_logp[t], &kg);
                z.kl_loss += we * kv;
                g += p->kl_coef * we * kg;
            }
            if (dlogp) dlogp[t] = (float)g;
            if (in->entropy) {
                z.entropy += we * in->entropy[t];
                z.entropy_sum += in->entropy[t];
            }
            if (dentropy) dentropy[t] = (float)(-p->entropy_coeff * we);
        }
    }
    free(sel);
    z.loss = z.pg_loss - p->entropy_coeff * z.entropy + (p->use_kl ? p->kl_coef * z.kl_loss : 0.0);
    z.pg_clipfrac = z.clipfrac_sum / (ntok + 1e-8);
    z.pg_clipfrac_lower = z.clipfrac_lower_sum / (ntok + 1e-8);
    z.ppo_kl = z.kl_sum / (ntok + 1e-8);
    if (st) *st = z;
    return 0;
}

void loss_stats_merge(LossStats *acc, const LossStats *s) {
    acc->pg_loss += s->pg_loss;
    acc->entropy += s->entropy;
    acc->kl_loss += s->kl_loss;
    acc->loss += s->loss;
    acc->n_tokens += s->n_tokens;
    acc->clipfrac_sum += s->clipfrac_sum;
    acc->clipfrac_lower_sum += s->clipfrac_lower_sum;
    acc->kl_sum += s->kl_sum;
    acc->entropy_sum += s->entropy_sum;
    acc->n_seq_nonempty += s->n_seq_nonempty;
    acc->pg_clipfrac = acc->clipfrac_sum / (acc->n_tokens + 1e-8);
    acc->pg_clipfrac_lower = acc->clipfrac_lower_sum / (acc->n_tokens + 1e-8);
    acc->ppo_kl = acc->kl_sum / (acc->n_tokens + 1e-8);
}
