/* common/dapo/advantages.h: GRPO outcome advantages per prompt group (docs/design.md §1 step 4).
 * Source: verl `compute_grpo_outcome_advantage` (verl/trainer/ppo/core_algos.py, docs/design.md commit):
 *   A_i = (R_i - mean(R)) / (std(R) + epsilon)   std unbiased (n - 1), as torch.std;  epsilon = 1e-6
 *   A_i = R_i - mean(R)                          when norm_adv_by_std_in_grpo is false (Dr. GRPO)
 *   a group of one response: mean 0, std 1       (so A = R / (1 + epsilon), or R unnormalised)
 * Ours, on top: a group whose rewards are all equal gets exactly 0 (fp rounding of the mean cannot turn into
 * a huge A through the 1e-6 denominator), and non-finite rewards are rejected, so no NaN ever leaves here.
 * Every response token of response i gets A_i (the caller broadcasts; verl multiplies by the response mask).
 * The other outcome estimators of verl (AdvEstimator below, estimators.c) give one scalar per response too.
 * Not here: the reward itself (verifier + overlong shaping), GAE (it needs a critic). */
#ifndef DAPO_ADVANTAGES_H
#define DAPO_ADVANTAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"

#define ADV_GRPO_EPS 1e-6   /* verl's default epsilon */

/* reward[n_resp]: one scalar per response (verl: token_level_rewards.sum(-1) = score + overlong penalty),
 * responses of group g contiguous, group g has group_size[g] >= 1 responses, n_groups >= 0,
 * n_resp = sum(group_size). Writes adv[n_resp] (caller-owned; may alias reward). Computed in double,
 * rounded to fp32. Returns 0, or ERR_INVAL (message names the group / response) for a group size < 1,
 * NULL arrays, a non-finite reward, or eps < 0. */
int adv_grpo(const float *reward, const int *group_size, int n_groups, bool norm_by_std, double eps,
             float *adv, char err[ERR_LEN]);

/* verl's algorithm.adv_estimator (core_algos.py, verl 0.9.1), R_i the response's reward, n the group's size:
 *   grpo                          adv_grpo above;
 *   rloo                          A_i = n/(n-1) (R_i - mean(R)), n > 1; R_i for a group of one (RLOO);
 *   opo                           A_i = R_i - sum_j L_j R_j / sum_j L_j over the group (L: response tokens counted);
 *                                 R_i for a group of one, and for a group none of whose tokens counts (verl: NaN);
 *   gpg                           A_i = alpha (R_i - mean(R)), alpha = responses in the batch / responses with R != 0
 *                                 (at least 1); alpha R_i for a group of one (GPG's f_norm 1);
 *   grpo_passk                    the group's best response gets R_max - R_second (divided by std(R) + eps when
 *                                 norm_by_std), the others 0; groups of one are refused (verl raises); ties: the first
 *                                 of the best (torch.topk's choice is unspecified there);
 *   reinforce_plus_plus           with algorithm.gamma 1 every token's return is R_i, whitened over the batch's
 *                                 response tokens (verl_F.masked_whiten: token-weighted mean, unbiased variance,
 *                                 1 / sqrt(var + 1e-8));
 *   reinforce_plus_plus_baseline  R_i - mean(R) of the group (R_i for a group of one), then whitened as above.
 * Whitening needs at least two counted tokens in the batch (verl raises otherwise). */
typedef enum {
    ADV_GRPO = 0, ADV_RLOO, ADV_OPO, ADV_GPG, ADV_GRPO_PASSK, ADV_REINFORCE_PP, ADV_REINFORCE_PP_BASELINE,
} AdvEstimator;

/* verl's name (grpo_vectorized and rloo_vectorized are grpo's and rloo's) -> estimator. ERR_INVAL naming the ones dapo
 * has (verl's gae, remax, gdpo, optimal_token_baseline and tir_optimal_token_baseline are not among them). */
int adv_estimator_parse(const char *name, AdvEstimator *e, char err[ERR_LEN]);
const char *adv_estimator_name(AdvEstimator e);   /* static string; "?" out of range */

/* The estimator's advantage per response: reward[n_resp] and resp_tokens[n_resp] (each response's counted tokens,
 * its response-mask sum: 0 for an overlong-filtered one) in groups as adv_grpo's; norm_by_std and eps as adv_grpo's
 * (grpo, grpo_passk). Writes adv[n_resp] (caller-owned; may alias reward), computed in double, rounded to fp32.
 * 0, or ERR_INVAL naming the group or response (adv_grpo's checks, a group of one for grpo_passk, fewer than two
 * counted tokens to whiten over). */
/* reinforce_plus_plus's returns over one response's n tokens, before whitening (verl 0.9.1
 * compute_reinforce_plus_plus_outcome_advantage): from the last token back, run' = r_t + gamma run, ret_t = run' m_t,
 * and run = run' on a counted token (m_t 1), unchanged on a masked one; fp32 in torch's order. r[n]: the token rewards
 * (the score on the response's last token, minus beta x KL per token under algorithm.use_kl_in_reward); m[n] 0/1;
 * ret[n] caller-owned (may alias r). The whitening over the batch's counted tokens is the caller's (verl_F.masked_whiten:
 * (ret - mean) / sqrt(var + 1e-8), mean and unbiased var over the counted tokens, as adv_compute's). */
void adv_rfpp_returns(const float *r, const uint8_t *m, int n, double gamma, float *ret);

int adv_compute(AdvEstimator e, const float *reward, const int *resp_tokens, const int *group_size, int n_groups,
                bool norm_by_std, double eps, float *adv, char err[ERR_LEN]);

#endif
