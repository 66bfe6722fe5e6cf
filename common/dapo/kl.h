/* common/dapo/kl.h: verl's per-token KL estimators between the policy and a reference policy (issue 40), for the KL
 * loss (actor.use_kl_loss, actor.kl_loss_type) and the KL reward penalty (algorithm.kl_penalty). Source: verl 0.9.1
 * core_algos.kl_penalty / kl_penalty_forward (J. Schulman, "Approximating KL divergence", 2020), with x = logp - ref:
 *   kl, k1        x                                            d/dlogp = 1
 *   abs           |x|                                          sign(x) (0 at 0, as torch)
 *   mse, k2       x^2 / 2                                      x
 *   low_var_kl,k3 clamp(e^k - k - 1, -10, 10), k = clamp(-x, -20, 20)   (e^k - 1)(-1) inside both clamps' open
 *                                                              intervals, else 0 (torch.clamp's gradient)
 * A trailing '+' (k1+, k3+, abs+, ...) keeps the value and takes k2's gradient x (verl's straight-through estimator);
 * k2+ and mse+ are k2. fp32 in torch's order. verl's "full" (it needs every vocabulary entry) is refused, as verl
 * raises NotImplementedError for it.
 * Not here: the reference policy's log-probs (the learner), aggregation (loss.h's agg modes). */
#ifndef DAPO_KL_H
#define DAPO_KL_H

#include <stdbool.h>

#include "core/err.h"

typedef enum { KL_K1 = 0, KL_ABS, KL_K2, KL_K3 } KlKind;

typedef struct {
    KlKind kind;
    bool   straight_through;   /* the '+' form: k2's gradient under this kind's value */
} KlPenalty;

/* verl's name (kl, k1, abs, mse, k2, low_var_kl, k3, each with an optional '+') -> *out. ERR_INVAL naming the accepted
 * names (and why "full" is not among them). */
int kl_penalty_parse(const char *name, KlPenalty *out, char err[ERR_LEN]);

/* The estimate at one token; *dlogp (when non-NULL) its derivative with respect to logp (ref is a constant). */
float kl_penalty_eval(KlPenalty k, float logp, float ref, float *dlogp);

#endif
