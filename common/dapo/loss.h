/* common/dapo/loss.h: the DAPO token-level policy loss (docs/design.md §2), its aggregation over a mini-batch, its
 * metrics, and its gradient with respect to the per-token log-probs and entropies — the pure-math part of a
 * learner step. Formula source: verl `verl/trainer/ppo/core_algos.py` (docs/design.md commit; identical in the
 * verl 0.7.1 / 0.8.0 releases): `compute_policy_loss_vanilla`, `agg_loss` with verl's `global_batch_info`
 * (dp_size, batch_num_tokens, global_batch_size, loss_scale_factor), `verl_F.masked_mean`; the entropy term
 * as verl's actor: `policy_loss = pg_loss - entropy_coeff * agg_loss(entropy)`.
 *
 * Per response token t (fp32, as verl):
 *   d = clamp(logp - old_logp, -20, 20);  r = exp(d)
 *   l1 = -A r;  l2 = -A clamp(r, 1 - clip_ratio_low, 1 + clip_ratio_high);  lc = max(l1, l2)
 *   l3 = -A clip_ratio_c;  loss_t = A < 0 ? min(l3, lc) : lc      (times is_weight_t when given)
 * Aggregation (this call = one micro-batch on one rank; S = its sequences, M = mask):
 *   token-mean               sum_t M_t loss_t / batch_num_tokens * dp_size
 *   seq-mean-token-mean      sum_s [sum_t M loss / (n_s + 1e-8)] / global_batch_size * dp_size   (n_s > 0 only)
 *   seq-mean-token-sum       sum_s [sum_t M loss] / global_batch_size * dp_size
 *   seq-mean-token-sum-norm  (seq-mean-token-sum) / loss_scale_factor
 * With the mini-batch-global denominators, the sum of these values over every micro-batch of every rank,
 * divided by dp_size, is the mini-batch loss, so gradient accumulation and data parallelism do not change the
 * result. Metrics (verl): pg_clipfrac = masked mean of [l2 > l1]; pg_clipfrac_lower = masked mean of
 * [lc > l3 and A < 0]; ppo_kl = masked mean of -d; masked mean = sum / (mask sum + 1e-8).
 * Gradient: d(loss)/d(logp_t) through exp and both clamps with torch's conventions, so it equals torch.autograd
 * on verl's code: torch's clamp passes the gradient only strictly inside its bounds (a log-ratio of exactly
 * +-20, or a ratio exactly 1 - low or 1 + high, gets none through that clamp), and torch.maximum / minimum split
 * the gradient half-half on ties (so a ratio exactly on a clip bound gets half of the unclipped gradient).
 *
 * The other policy losses of verl (LossMode below) share the aggregation, the metrics' definitions and the weights.
 * Not here: log-probs and entropies themselves (the model's forward), advantages (advantages.h), KL-to-reference
 * loss (DAPO uses none), rollout importance weights, the optimizer. */
#ifndef DAPO_LOSS_H
#define DAPO_LOSS_H

#include <stdint.h>

#include "core/err.h"
#include "dapo/kl.h"

typedef enum {
    LOSS_AGG_TOKEN_MEAN = 0,            /* "token-mean" (DAPO) */
    LOSS_AGG_SEQ_MEAN_TOKEN_MEAN,       /* "seq-mean-token-mean" (GRPO paper) */
    LOSS_AGG_SEQ_MEAN_TOKEN_SUM,        /* "seq-mean-token-sum" */
    LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM,   /* "seq-mean-token-sum-norm" (Dr. GRPO) */
} LossAggMode;

/* verl's name -> mode. ERR_INVAL (message lists the allowed names) for anything else or NULL. */
int loss_agg_mode_parse(const char *name, LossAggMode *mode, char err[ERR_LEN]);
/* mode -> verl's name (static string; "?" for an out-of-range value). */
const char *loss_agg_mode_name(LossAggMode mode);

/* verl's actor.policy_loss.loss_mode (core_algos.py, verl 0.9.1), per counted token t with d = logp - old_logp:
 *   vanilla  the clipped loss with dual clip above (DAPO's);
 *   gspo     sequence-level ratio (GSPO, arXiv 2507.18071): s = exp(min(sum_t M d / max(n_s, 1), 10)) for every token of
 *            the sequence, its gradient through logp_t only (s_t = sg[s] pi / sg[pi]); loss_t = max(-A s, -A clip(s,
 *            1 - low, 1 + high)), no dual clip; pg_clipfrac = mean [l2 > l1], ppo_kl = mean(-d) (d not clamped);
 *   cispo    loss_t = -sg[clip(r, 1 - low, 1 + high)] A logp_t (CISPO, arXiv 2506.13585; r = exp(clamp(d, +-20)));
 *            pg_clipfrac = mean [r != clip(r)];
 *   sapo     loss_t = -A (4 / tau) sigmoid(tau (r - 1)), tau = tau_pos when A > 0 else tau_neg (SAPO, arXiv
 *            2511.20347), aggregated as seq-mean-token-mean whatever loss_agg_mode says (verl does so); clip
 *            fractions 0;
 *   gpg      loss_t = -logp_t A (GPG); verl reports no clip metrics for it (dapo: 0, and ppo_kl as vanilla's);
 *   dppo_tv, dppo_kl  DPPO-Binary (arXiv 2602.04879): loss_t = -A sg[min(r, clip_ratio_c)] logp_t v_t with v_t = 1 while
 *            the token's divergence from the old policy stays inside its bound, else 0 — dppo_tv: p - p_old <=
 *            clip_ratio_high (A > 0) or >= -clip_ratio_low (A <= 0), p = exp(logp); dppo_kl: the binary KL
 *            p_old log(p_old / p) + (1 - p_old) log((1 - p_old + 1e-8) / (1 - p + 1e-8)) <= clip_ratio_high (A > 0,
 *            or p <= p_old) / clip_ratio_low (A <= 0, or p >= p_old); pg_clipfrac = mean(1 - v), pg_clipfrac_lower =
 *            mean([r > clip_ratio_c] v);
 *   clip_cov (arXiv 2505.22617) loss_t = max(-A r, -A clip(r, 1 - low, 1 + high)) corr_t with r = exp(d) (no clamp, no
 *            dual clip); corr_t = 0 on max(int(clip_cov_ratio n), 1) tokens drawn among the counted tokens the clip does
 *            not bind whose cov_t = (A_t - mean A)(logp_t - mean logp) lies in (clip_cov_lb, clip_cov_ub) — all of them
 *            when there are no more; verl draws with torch.randperm, dapo with a seeded permutation (core/rng.h
 *            rng_permutation keyed by LossInput.draw_seed / draw_stream: the same draw on a rerun or a resume, THE
 *            deviation from verl); pg_clipfrac = mean [corr_t = 0];
 *   kl_cov   loss_t = -A r, plus ppo_kl_coef |d| on the max(1, int(n kl_cov_ratio)) tokens of largest cov_t (plain means;
 *            ties: the lower position first); ppo_kl = mean |d|, no clip fractions;
 *   geo_mean (GMPO, arXiv 2507.20673) one loss per sequence: -adv_s exp(sum_t M dmin_t / (n_s + 1e-8)) w_s with
 *            dmin_t = sgn(A_t) min(sgn(A_t) d_t, sgn(A_t) clamp(d_t, -low, high)), adv_s = sum_t M A_t / (n_s + 1e-8),
 *            w_s the IS weights' geometric mean exp(sum_t M log(w_t + 1e-10) / (n_s + 1e-8)); pg_loss = the mean over
 *            sequences, whatever loss_agg_mode says — verl's torch.mean over the call's rows; with global_batch_size
 *            given, sum / global_batch_size x dp_size, so micro-batches add up to the mini-batch mean (verl's engine
 *            adds its micro-batches' means instead); pg_clipfrac / _lower = mean [d != clamp(d)] with A > 0 / A < 0.
 * clip_cov and kl_cov select over one call's tokens (verl: one micro-batch). Every token-local mode multiplies loss_t by
 * the rollout-correction weight when given and aggregates as below. */
typedef enum {
    LOSS_MODE_VANILLA = 0, LOSS_MODE_GSPO, LOSS_MODE_CISPO, LOSS_MODE_SAPO, LOSS_MODE_GPG, LOSS_MODE_DPPO_TV,
    LOSS_MODE_DPPO_KL, LOSS_MODE_CLIP_COV, LOSS_MODE_KL_COV, LOSS_MODE_GEO_MEAN,
} LossMode;

/* verl's name -> mode. ERR_INVAL naming the modes dapo has (verl's dro and bypass_mode are not among them). */
int loss_mode_parse(const char *name, LossMode *mode, char err[ERR_LEN]);
const char *loss_mode_name(LossMode mode);   /* static string; "?" for an out-of-range value */

typedef struct {
    LossMode mode;             /* vanilla in DAPO */
    double tau_pos, tau_neg;   /* sapo's temperatures (verl: actor.tau_pos 1.0, actor.tau_neg 1.05); > 0 */
    double clip_cov_ratio, clip_cov_lb, clip_cov_ub;   /* verl's policy_loss.* (0.0002, 1.0, 5.0); ratio > 0 */
    double kl_cov_ratio, ppo_kl_coef;                   /* verl's policy_loss.* (0.0002, 0.1); ratio > 0 */
    double clip_ratio_low;     /* epsilon_low, 0.2 in DAPO; >= 0 (the bound 1 - low is rounded to fp32, as torch) */
    double clip_ratio_high;    /* epsilon_high, 0.28 in DAPO; >= 0 */
    double clip_ratio_c;       /* dual-clip bound for A < 0, 10.0 in the DAPO recipe; must be > 1 (verl asserts) */
    LossAggMode agg;
    double entropy_coeff;      /* loss = pg_loss - entropy_coeff * entropy_agg; 0 in DAPO */
    int    use_kl;             /* verl's actor.use_kl_loss: loss += kl_coef * agg(kl(logp, ref_logp)) (kl.h), aggregated
                                  with loss_agg_mode (also under sapo); needs LossInput.ref_logp */
    KlPenalty kl;              /* actor.kl_loss_type */
    double kl_coef;            /* actor.kl_loss_coef */
    /* verl's global_batch_info. A value <= 0 means "not given": verl then uses this call's own count. */
    double batch_num_tokens;   /* token-mean: response tokens (mask sum) of the WHOLE mini-batch, every
                                  micro-batch of every rank (each shard carries it, layout.h) */
    double global_batch_size;  /* seq-mean-*: sequences of the whole mini-batch (ppo_mini_batch_size x n) */
    double loss_scale_factor;  /* seq-mean-token-sum-norm divisor; <= 0: the longest segment of this call
                                  (verl: loss_mask.shape[-1], the padded response length) — set it to
                                  max_response_length to keep it constant as Dr. GRPO intends */
    int    dp_size;            /* verl multiplies by dp_size because DDP/FSDP AVERAGE gradients over ranks:
                                  pass W when the all-reduce averages, 1 when it sums; <= 0 means 1 */
} LossParams;

/* Fills p with the DAPO recipe's values: vanilla, 0.2 / 0.28 / 10.0, token-mean, entropy_coeff 0, no global info,
 * dp 1 (tau_pos 1.0, tau_neg 1.05 and the clip_cov / kl_cov knobs: verl's). */
void loss_params_default(LossParams *p);

/* From the config: settings_loss_params (settings/settings.h). */

/* One call's tokens, packed: n_seq segments back to back, segment s = tokens [seq_off[s], seq_off[s+1]).
 * A padded [B, T] batch is the special case seq_off[s] = s*T with mask 0 on the padding.
 * All arrays are borrowed for the duration of the call. */
typedef struct {
    const float   *logp;       /* [N] log pi_theta(token) under logits/temperature, fp32 */
    const float   *old_logp;   /* [N] log pi_old(token) (recomputed, or the rollout's) */
    const float   *adv;        /* [N] advantage per token (A_i of its response, advantages.h) */
    const uint8_t *mask;       /* [N] 1 = response token that counts, 0 = ignored; NULL = all count */
    const float   *entropy;    /* [N] per-token entropy of pi_theta (nats); NULL = no entropy term */
    const int     *seq_off;    /* [n_seq + 1], non-decreasing, seq_off[0] = 0, seq_off[n_seq] = N */
    int            n_seq;      /* >= 0 */
    const float   *is_weight;  /* [N] rollout-correction weights multiplying loss_t (constants: no gradient
                                  flows into them), verl's rollout_is_weights (rollout_corr.h); NULL = none */
    const float   *ref_logp;   /* [N] log pi_ref(token): the reference policy's (use_kl); NULL otherwise */
    uint64_t       draw_seed, draw_stream;   /* clip_cov's draw (rng_permutation's seed and stream) */
} LossInput;

typedef struct {
    double pg_loss;            /* agg(loss_t): verl's pg_loss for this call (with the global denominators) */
    double entropy;            /* agg(entropy_t) under the same mode and denominators; 0 without entropies */
    double kl_loss;            /* agg(kl_t) (use_kl; verl's actor/kl_loss); 0 otherwise */
    double loss;               /* pg_loss - entropy_coeff * entropy + kl_coef * kl_loss: what the gradient is of */
    double pg_clipfrac;        /* masked means over this call's tokens, verl's definitions (see top) */
    double pg_clipfrac_lower;
    double ppo_kl;
    double n_tokens;           /* mask sum of this call */
    double clipfrac_sum;       /* numerators of the three means, so loss_stats_merge can form exact token */
    double clipfrac_lower_sum; /* means over a whole mini-batch (docs/design.md §2) */
    double kl_sum;
    double entropy_sum;        /* sum of M_t entropy_t (the token mean of entropy is entropy_sum / n_tokens) */
    int    n_seq_nonempty;     /* segments with at least one counted token */
} LossStats;

/* Computes the loss of one call and, when the output pointers are non-NULL:
 *   loss_tok[N]  per-token loss_t (0 where mask = 0),
 *   dlogp[N]     d(stats.loss)/d(logp_t)     (0 where mask = 0) — what the model backward consumes,
 *   dentropy[N]  d(stats.loss)/d(entropy_t) = -entropy_coeff * weight_t (needs in->entropy).
 * Outputs are caller-owned, written in full. Returns 0, or ERR_INVAL with a message for bad parameters
 * (clip_ratio_c <= 1, negative clip ratios, unknown mode), bad offsets, or NULL required arrays. Non-finite
 * log-probs do not fail the call: they propagate into the loss so the learner can skip the update. */
int loss_compute(const LossParams *p, const LossInput *in, float *loss_tok, float *dlogp, float *dentropy,
                 LossStats *st, char err[ERR_LEN]);

/* Accumulates `s` into `acc` (acc zeroed first for the first call): sums add (pg_loss, entropy and loss
 * add too — with global denominators their sum over micro-batches is the mini-batch value), and the three
 * means are recomputed as token means over everything merged so far. */
void loss_stats_merge(LossStats *acc, const LossStats *s);

#endif
