/* services/learner/offpolicy.h: the learner's side of off-policy correction (issue 15; docs/design.md §1 async mode): once
 * per step, after the old-log-prob pass, for every mini-batch of the step on this rank —
 *   - the behaviour version of every row (TrainBatch.behaviour_versions) against the version the learner holds: a row
 *     newer than it, or more than trainer.staleness behind, fails the step (the coordinator never sends one);
 *   - decoupled mode (verl rollout_correction, bypass_mode false): verl's off-policy diagnostics, the IS weights
 *     pi_prox / pi_rollout (token or sequence level, truncated or IcePop) and the rejection mask, from the proximal
 *     log-probs (the recompute) and the rollout's; the weights multiply the per-token loss, rejected tokens leave the
 *     loss and its token-mean denominator (as verl, whose batch_num_tokens counts the mask after rejection);
 *   - one all-reduce of the step's counts over ranks: rejected tokens per mini-batch, rows, stale rows, lag sum and
 *     max, rows IS-weighted / truncated / rejected, and the sums for rollout_is_batch_normalize (the mean weight over
 *     the whole step, every rank);
 * and the metrics of all that with verl's names (rollout_corr/...) plus ours (staleness, row counts).
 * Bypass mode (bypass_mode = actor.use_rollout_log_probs): no IS weight (the PPO ratio is against the rollout policy),
 * rejection from the current log-probs per micro-batch (offpolicy_reject_chunk), as verl's bypass loss.
 * Not here: the formulas (dapo/rollout_corr.h), the loss (dapo/loss.h), the training loop (learner.c). */
#ifndef DAPO_LEARNER_OFFPOLICY_H
#define DAPO_LEARNER_OFFPOLICY_H

#include <stdint.h>

#include "core/err.h"
#include "core/metrics.h"
#include "dapo.pb-c.h"
#include "dapo/rollout_corr.h"

typedef struct Learner Learner;

/* Per-mini-batch correction of the step; in Learner (L->corr[k]). Arrays [response tokens of that shard]. */
typedef struct {
    float           *isw;            /* IS weights, NULL when rollout_is is off (or bypass) */
    uint8_t         *keep;           /* 1 = token kept by rejection (and counted by the mask), NULL without rejection */
    double           rejected;       /* tokens rejected in this mini-batch over ALL ranks (all-reduced) */
    RolloutCorrStats diag;           /* verl's off-policy diagnostics (decoupled mode) */
    int              has_diag;
    RolloutIsStats   is;
    RolloutRsStats   rs;
} OffpolicyMini;

/* Step totals over all ranks (identical on every rank after offpolicy_reduce). */
typedef struct {
    double rows, stale_rows, lag_sum, lag_max;
    double lag_min;                  /* this rank's least lag + 1 (0: no row yet), then the step's least lag */
    double rows_weighted, rows_truncated, rows_rejected;
    double norm_factor;              /* rollout_is_batch_normalize's divisor (1 when off) */
} OffpolicyStep;

/* Behaviour-version check, diagnostics, weights and mask of mini-batch k (shard tb, its old log-probs in
 * L->old_lp[k]) into L->corr[k]; local counts into L->corr_acc. 0, or ERR_INVAL naming the row. */
int  offpolicy_mini(Learner *L, int k, const Dapo__TrainBatch *tb, char err[ERR_LEN]);
/* The step's all-reduce (every rank calls it once per step, also after a local error: failed != 0 makes every rank
 * fail with ERR_INVAL), then batch normalisation. 0, ERR_INVAL, or ERR_COLLECTIVE when the all-reduce failed. */
int  offpolicy_reduce(Learner *L, int failed, char err[ERR_LEN]);
/* Bypass-mode rejection of one packed chunk (logp current, old = rollout log-probs, mask in/out over its n segments
 * off[0..n]); adds the counts to *rejected / *counted. */
void offpolicy_reject_chunk(Learner *L, const float *logp, const float *old, uint8_t *mask, const int *off, int n,
                            double *rejected, double *counted);
/* rollout_corr/... metrics of mini-batch k and of the step. */
void offpolicy_metrics(const Learner *L, int k, Metrics *ms);
void offpolicy_free(Learner *L);     /* the step's arrays */

#endif
