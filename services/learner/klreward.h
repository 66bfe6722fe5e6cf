/* services/learner/klreward.h: the KL penalty in the reward (verl's algorithm.use_kl_in_reward; issue 40) and the
 * advantages the learner computes itself because of it.
 *
 * verl (trainer/ppo/ray_trainer.py apply_kl_penalty, then compute_advantage): per response token
 *   kld_t = kl_penalty(old_logp_t, ref_logp_t) m_t          (algorithm.kl_penalty, dapo/kl.h)
 *   r_t   = score [t = the response's last token] - beta kld_t          (token_level_rewards)
 *   current_kl = mean over the batch's responses of sum_t kld_t / (sum_t m_t + 1e-8)
 * beta is the controller's value before the step; then the controller updates (algorithm.kl_ctrl): fixed keeps kl_coef;
 * adaptive (Ziegler et al. 2019, verl's AdaptiveKLController) multiplies it by 1 + clip(current_kl / target_kl - 1,
 * -0.2, 0.2) x n / horizon, n = the batch's responses. The estimators then read r: the outcome estimators (grpo, rloo,
 * opo, gpg, grpo_passk, reinforce_plus_plus_baseline) its sum, score - beta sum_t kld_t, per response (adv_compute);
 * reinforce_plus_plus the per-token returns (adv_rfpp_returns, algorithm.gamma), whitened over the batch's counted
 * tokens. Advantages are times the mask, as verl's.
 * The coordinator computes advantages before any log-prob exists; old and reference log-probs exist only here. So with
 * use_kl_in_reward — and with reinforce_plus_plus at gamma != 1, whose advantages differ token by token — every learner
 * rank, after the step's old and reference passes, computes its sequences' sums, the ranks all-gather one record per
 * response (group id, penalised score, counted tokens, its mean KL), every rank runs the estimator over the whole
 * batch (groups gathered by id; within a group, rank order, not the coordinator's) and keeps its own rows; the
 * per-token path whitens with sums all-reduced over the ranks. The result replaces TrainBatch.advantages of every
 * epoch's shard of the step (the same sequences). The controller's value is the same on every rank and is saved in
 * the checkpoint's state.json (kl_ctrl_value).
 * Metrics, verl's names: actor/reward_kl_penalty (current_kl), actor/reward_kl_penalty_coeff (beta); and, replacing
 * the coordinator's (computed before the penalty), critic/rewards/mean (the penalised scores' mean) and
 * critic/advantages/mean|max|min (over the counted tokens).
 * Not here: the KL estimators (dapo/kl.h), the estimators (dapo/advantages.h), the passes (learner.c, ref.h). */
#ifndef DAPO_LEARNER_KLREWARD_H
#define DAPO_LEARNER_KLREWARD_H

#include "core/config.h"
#include "core/err.h"
#include "core/metrics.h"
#include "dapo.pb-c.h"
#include "dapo/advantages.h"
#include "dapo/kl.h"

typedef struct Learner Learner;

typedef struct {
    int          on;           /* the learner computes the step's advantages (use_kl_in_reward, or RF++ gamma != 1) */
    int          use_kl;       /* algorithm.use_kl_in_reward */
    KlPenalty    kl;           /* algorithm.kl_penalty */
    int          adaptive;     /* kl_ctrl.type adaptive */
    double       value;        /* the controller's beta for the next step */
    double       target, horizon;
    AdvEstimator est;
    int          norm_by_std;
    double       gamma;
    float      **adv;          /* [num_mini] the step's advantages per response token (owned) */
    int          n_adv;
    /* the last step's figures (metrics) */
    double       beta, current_kl, rewards_mean, adv_mean, adv_max, adv_min;
} KlReward;

/* From the config (the controller starts at kl_ctrl.kl_coef; klreward_restore sets a checkpoint's value). */
void klreward_init(KlReward *k, const Config *cfg);
void klreward_restore(KlReward *k, double value);   /* value <= 0: none saved (the config's) */

/* The step's advantages into L->klr.adv for the nm epoch-0 mini-batches mb[] (their old log-probs in L->old_lp, the
 * reference's in L->ref_lp when use_kl), and the controller's update. Every rank calls it at the same point (it
 * all-gathers and all-reduces over L->coll). 0, ERR_INVAL (a shard without TrainBatch.scores, an estimator's refusal:
 * the same on every rank), ERR_COLLECTIVE. */
int  klreward_step(Learner *L, Dapo__TrainBatch *const *mb, int nm, char err[ERR_LEN]);
void klreward_metrics(const KlReward *k, Metrics *ms);
void klreward_free_step(KlReward *k);   /* the step's arrays */

#endif
