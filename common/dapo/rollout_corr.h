/* common/dapo/rollout_corr.h: rollout-vs-learner mismatch — the off-policy diagnostics verl logs under
 * rollout_corr/ and the truncated importance-sampling (TIS) weights of verl's rollout correction, which
 * correct the loss for a sampler whose log-probs differ from the learner's (async mode, bf16 rollout).
 * Source: verl verl/trainer/ppo/rollout_corr_helper.py (verl 0.9.1):
 * compute_offpolicy_metrics (via compute_rollout_corr_metrics_from_logprobs) and
 * compute_rollout_correction_weights (TIS: "token" or "sequence" level, single upper threshold).
 * With logp = the learner's log-probs (old/recomputed), rlogp = the rollout's, M = mask, per sequence s
 * (every segment counts in the batch means, an empty one with mean 0 — as verl's row means):
 *   mean_s(x)           = sum_t M x / (n_s + 1e-8)
 *   training_log_ppl    = mean over s of -mean_s(logp);     training_ppl = mean over s of exp(-mean_s(logp))
 *   rollout_log_ppl / rollout_ppl likewise with rlogp
 *   kl                  = masked mean of (rlogp - logp);    k3_kl = masked mean of (e^r - r - 1), r = logp - rlogp
 *   log_ppl_diff        = mean over s of (mean_s(rlogp) - mean_s(logp)) (+ its |.| mean, max, min)
 *   ppl_ratio           = mean over s of exp(log_ppl_diff_s)
 *   chi2_token          = masked mean of exp(2 clamp(r, +-20)) - 1
 *   chi2_seq            = mean over s of exp(2 clamp(sum_t M r, +-20)) - 1
 *   abs_logprob_diff    = masked mean of |logp - rlogp|   (ours, docs/design.md §2)
 * IS weights: token w_t = min(exp(clamp(r_t, +-20)), threshold); sequence w_t = min(exp(clamp(sum M r, +-20)),
 * threshold) for every token of the sequence; 0 where M = 0. They multiply the per-token loss
 * (LossInput.is_weight in loss.h), as verl multiplies pg_losses by rollout_is_weights.
 * Also verl's rollout_correction config (rollout_is / rollout_rs / bypass_mode), IcePop, rejection masks and the
 * IS / RS metrics, below. Not here: applying weights and masks to the loss (loss.h, the learner). */
#ifndef DAPO_ROLLOUT_CORR_H
#define DAPO_ROLLOUT_CORR_H

#include <stdint.h>

#include "core/err.h"

typedef struct {
    double training_ppl, training_log_ppl;
    double rollout_ppl, rollout_log_ppl;
    double kl, k3_kl;
    double log_ppl_diff, log_ppl_abs_diff, log_ppl_diff_max, log_ppl_diff_min;
    double ppl_ratio;
    double chi2_token, chi2_seq;
    double abs_logprob_diff;    /* ours: mean |logp - rlogp| per counted token */
    double n_tokens;            /* mask sum */
    int    n_seq;
} RolloutCorrStats;

/* logp[N], rlogp[N] (fp32 log-probs), mask[N] (NULL = all count), segments seq_off[n_seq + 1] as in loss.h.
 * Fills *st. ERR_INVAL for NULL arrays, bad offsets, n_seq < 1, or no counted token at all (verl asserts
 * the same). Borrowed inputs, nothing allocated. */
int rollout_corr_metrics(const float *logp, const float *rlogp, const uint8_t *mask, const int *seq_off, int n_seq,
                         RolloutCorrStats *st, char err[ERR_LEN]);

typedef enum { ROLLOUT_IS_TOKEN = 0, ROLLOUT_IS_SEQUENCE } RolloutIsLevel;

/* Writes TIS weights w[N] (caller-owned) for the segments; threshold > 0 (verl default 2.0).
 * ERR_INVAL for bad arguments. (= rollout_corr_weights with that level and threshold, no IcePop, no stats.) */
int rollout_corr_is_weights(const float *logp, const float *rlogp, const uint8_t *mask, const int *seq_off,
                            int n_seq, RolloutIsLevel level, double threshold, float *w, char err[ERR_LEN]);

/* ----------------------------------------------------------------------------------------------------------------
 * verl's algorithm.rollout_correction (verl/trainer/config/algorithm.py RolloutCorrectionConfig, verl 0.9.1), resolved.
 * Decoupled mode (bypass 0; AReaL's decoupled PPO): the learner's recompute is the proximal policy, the PPO ratio
 * and clip are taken against it, and the rollout (behaviour) gap is corrected by IS weights pi_prox / pi_rollout
 * (rollout_corr_weights) and/or rejection of tokens / sequences (rollout_corr_reject), once per step.
 * Bypass mode (bypass 1 = actor.use_rollout_log_probs): the rollout log-probs are the old policy; with loss_type
 * ppo_clip verl applies no IS weight (the PPO ratio is the IS ratio) and only the rejection mask, computed from the
 * CURRENT log-probs per micro-batch (core_algos.compute_policy_loss_bypass_mode). */
#define ROLLOUT_RS_MAX 11            /* verl's SUPPORTED_ROLLOUT_RS_OPTIONS */

typedef enum {
    RS_TOKEN_K1 = 0, RS_TOKEN_K2, RS_TOKEN_K3, RS_SEQ_SUM_K1, RS_SEQ_SUM_K2, RS_SEQ_SUM_K3,
    RS_SEQ_MEAN_K1, RS_SEQ_MEAN_K2, RS_SEQ_MEAN_K3, RS_SEQ_MAX_K2, RS_SEQ_MAX_K3
} RolloutRsOption;

typedef struct {
    RolloutRsOption opt;
    double lower, upper;             /* *_k1: ratio bounds (kept where log(lower) <= stat <= log(upper));
                                        k2/k3: kept where stat <= upper (lower unused) */
} RolloutRsCriterion;

typedef struct {
    int                is_on;         /* rollout_is set (token|sequence); 0: no IS weights (metrics only) */
    RolloutIsLevel     is_level;
    double             is_upper;      /* TIS: weights clamped at it; IcePop: zeroed above it */
    double             is_lower;      /* > 0: IcePop ("lower_upper" threshold), weights outside [lower, upper] are 0 */
    int                is_batch_normalize;   /* divide the weights by their step mean (rollout_is_batch_normalize) */
    int                n_rs;          /* rejection criteria, all must pass (rollout_rs "a,b"); 0: none */
    RolloutRsCriterion rs[ROLLOUT_RS_MAX];
    int                bypass;        /* bypass_mode (= actor.use_rollout_log_probs) */
    int                is_auto;       /* rollout_is was "auto" and resolved to token (staleness >= 1) */
} RolloutCorrConfig;

/* Parses verl's values: rollout_is "null"/"none"/"" (off), "token", "sequence", or "auto" (ours: token when
 * staleness >= 1, off otherwise); rollout_is_threshold a positive number (TIS) or "lower_upper" (IcePop, 0 < lower
 * <= upper); rollout_rs "" / "null" / comma-separated options (verl's names, duplicates dropped); rollout_rs_threshold
 * one value for all options or one per option, comma-separated ("lower_upper" or a single upper, lower = 1/upper,
 * for *_k1; a single positive upper bound for k2/k3); loss_type "ppo_clip" (verl's "reinforce" is refused: not
 * implemented). With bypass, is_on is 0 whatever rollout_is says (verl's bypass ppo_clip applies no IS weight).
 * ERR_INVAL naming the key and the allowed values. */
int rollout_corr_config_parse(const char *rollout_is, const char *is_threshold, int is_batch_normalize,
                              const char *rollout_rs, const char *rs_threshold, int bypass, const char *loss_type,
                              int staleness, RolloutCorrConfig *out, char err[ERR_LEN]);

/* From the config table (algorithm.rollout_correction.*, actor.use_rollout_log_probs, trainer.staleness):
 * settings_rollout_corr (settings/settings.h). */

/* verl's rollout_is_* metrics (compute_is_metrics; names without the rollout_corr/ prefix). Token level: over the
 * counted tokens of the applied weights (fractions from the raw weights); sequence level: max / min / fractions from
 * the per-sequence log-ratio sums over every segment. seq_*: per-segment masked means of the applied weights, except
 * seq_fraction_high/low: the fraction of segments whose mean RAW weight is above the upper / below the lower bound
 * (verl 0.9.1; 0.8.0 took the applied weights' means, whose high fraction is always 0 under truncation). */
typedef struct {
    double mean, max, min, ratio_fraction_high, ratio_fraction_low, std, eff_sample_size;
    double seq_mean, seq_std, seq_max, seq_min, seq_max_deviation, seq_fraction_high, seq_fraction_low;
    double oob_ratio;                /* IcePop only: fraction of counted tokens whose raw weight is out of bounds */
    double n_tokens_truncated;       /* ours: counted tokens whose raw weight was changed (clamped or zeroed) */
    int    n_seq_truncated;          /* ours: segments with at least one such token */
} RolloutIsStats;

/* IS weights w[N] = pi_train / pi_rollout per token (exp of clamp(logp - rlogp, +-20)) or per sequence (exp of the
 * clamped masked sum), 0 where mask = 0, then TIS (min(w, upper)) or IcePop (w outside [lower, upper] -> 0) —
 * verl compute_rollout_correction_weights; batch normalisation is the caller's (it spans mini-batches and ranks).
 * rc->is_on must be set. st may be NULL. ERR_INVAL for bad arguments, or no counted token when st is given. */
int rollout_corr_weights(const RolloutCorrConfig *rc, const float *logp, const float *rlogp, const uint8_t *mask,
                         const int *seq_off, int n_seq, float *w, RolloutIsStats *st, char err[ERR_LEN]);

/* verl's rollout_rs_* metrics (compute_rollout_rejection_mask / compute_rs_metrics) for each criterion, and over all. */
typedef struct {
    double mean, max, min, fraction_high, fraction_low;
    double masked_fraction;          /* counted tokens this criterion rejects */
    double seq_masked_fraction;      /* segments with counted tokens that it rejects */
} RolloutRsOptionStats;

typedef struct {
    RolloutRsOptionStats opt[ROLLOUT_RS_MAX];   /* in rc->rs order */
    double masked_fraction;          /* counted tokens rejected by any criterion */
    double seq_masked_fraction;      /* segments (all of them, as verl) with a rejected token */
    double n_tokens_rejected;        /* ours: the count behind masked_fraction */
    int    n_seq_rejected;
} RolloutRsStats;

/* Rejection mask keep[N] (caller-owned): mask AND every criterion of rc (token criteria per token, sequence criteria
 * for the whole segment), r = logp - rlogp clamped to +-20, k1 = -r, k2 = r^2 / 2, k3 = e^r - 1 - r; a segment's
 * sum / mean (sum / (n + 1e-8)) / max (0 for an empty one) over its counted tokens. mask NULL = all count.
 * rc->n_rs >= 1. st may be NULL. ERR_INVAL for bad arguments, or no counted token when st is given. */
int rollout_corr_reject(const RolloutCorrConfig *rc, const float *logp, const float *rlogp, const uint8_t *mask,
                        const int *seq_off, int n_seq, uint8_t *keep, RolloutRsStats *st, char err[ERR_LEN]);

/* verl's option name ("token_k1", ...) of o (static string). */
const char *rollout_rs_option_name(RolloutRsOption o);

#endif
