/* common/dapo/advantages.h: GRPO outcome advantages per prompt group (docs/design.md §1 step 4).
 * Source: verl `compute_grpo_outcome_advantage` (verl/trainer/ppo/core_algos.py, docs/design.md commit):
 *   A_i = (R_i - mean(R)) / (std(R) + epsilon)   std unbiased (n - 1), as torch.std;  epsilon = 1e-6
 *   A_i = R_i - mean(R)                          when norm_adv_by_std_in_grpo is false (Dr. GRPO)
 *   a group of one response: mean 0, std 1       (so A = R / (1 + epsilon), or R unnormalised)
 * Ours, on top: a group whose rewards are all equal gets exactly 0 (fp rounding of the mean cannot turn into
 * a huge A through the 1e-6 denominator), and non-finite rewards are rejected, so no NaN ever leaves here.
 * Every response token of response i gets A_i (the caller broadcasts; verl multiplies by the response mask).
 * Not here: the reward itself (verifier + overlong shaping), other estimators (GAE, RLOO, ...). */
#ifndef DAPO_ADVANTAGES_H
#define DAPO_ADVANTAGES_H

#include <stdbool.h>

#include "core/err.h"

#define ADV_GRPO_EPS 1e-6   /* verl's default epsilon */

/* reward[n_resp]: one scalar per response (verl: token_level_rewards.sum(-1) = score + overlong penalty),
 * responses of group g contiguous, group g has group_size[g] >= 1 responses, n_groups >= 0,
 * n_resp = sum(group_size). Writes adv[n_resp] (caller-owned; may alias reward). Computed in double,
 * rounded to fp32. Returns 0, or ERR_INVAL (message names the group / response) for a group size < 1,
 * NULL arrays, a non-finite reward, or eps < 0. */
int adv_grpo(const float *reward, const int *group_size, int n_groups, bool norm_by_std, double eps,
             float *adv, char err[ERR_LEN]);

#endif
