/* common/dapo/rollout_corr.h: rollout-vs-learner mismatch — the off-policy diagnostics verl logs under
 * rollout_corr/ and the truncated importance-sampling (TIS) weights of verl's rollout correction, which
 * correct the loss for a sampler whose log-probs differ from the learner's (async mode, bf16 rollout).
 * Source: verl verl/trainer/ppo/rollout_corr_helper.py (DESIGN.md commit; verl 0.8.0):
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
 *   abs_logprob_diff    = masked mean of |logp - rlogp|   (ours, DESIGN.md §2)
 * IS weights: token w_t = min(exp(clamp(r_t, +-20)), threshold); sequence w_t = min(exp(clamp(sum M r, +-20)),
 * threshold) for every token of the sequence; 0 where M = 0. They multiply the per-token loss
 * (LossInput.is_weight in loss.h), as verl multiplies pg_losses by rollout_is_weights.
 * Not here: IcePop (lower/upper band) weights, rejection sampling masks, batch normalisation of weights. */
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
 * ERR_INVAL for bad arguments. */
int rollout_corr_is_weights(const float *logp, const float *rlogp, const uint8_t *mask, const int *seq_off,
                            int n_seq, RolloutIsLevel level, double threshold, float *w, char err[ERR_LEN]);

#endif
