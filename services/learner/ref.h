/* services/learner/ref.h: the reference policy (issue 40; verl's ref worker, built when actor.use_kl_loss): a frozen
 * copy of actor_rollout_ref.model.path's weights — the initial policy, also after a resume, as verl's — held by the
 * learner in fp32. Unsharded, every rank keeps all n_params floats; sharded (shard.h), each rank keeps its pieces only
 * (the actor's layout: 1/W of each unit). The learner computes the reference log-probs once per step, right after the
 * old log-probs (learner.c old_pass), by swapping the reference weights in (ref_swap), running the same forward and
 * micro-batching as the actor's recompute (verl's ref.log_prob_* keys only re-cut the same values), and swapping them
 * back: the swap exchanges the floats in place, so the actor's weights come back bit for bit and the reference costs
 * no second model or activation slab. At the first update of a run the reference and the actor are the same weights
 * and the same forward, so the KL term is exactly 0 there.
 * Not here: the KL estimators and the loss term (dapo/kl.h, dapo/loss.h), when the pass runs (learner.c). */
#ifndef DAPO_LEARNER_REF_H
#define DAPO_LEARNER_REF_H

#include "core/config.h"
#include "core/err.h"

typedef struct Learner Learner;

/* Loads the reference weights from cfg->model_path into L->ref_params (L->m open, and L->shard set up when sharded);
 * logs the memory it takes. 0, or ERR_IO / ERR_NOTFOUND / ERR_INVAL naming the file or tensor. */
int  ref_open(Learner *L, const Config *cfg, char err[ERR_LEN]);
/* Exchanges the actor's and the reference's weights (the second call swaps them back). Sharded: every rank must
 * call it at the same point (the windows are gathered again). 0, or the model's error on a device backend. */
int  ref_swap(Learner *L, char err[ERR_LEN]);
void ref_free(Learner *L);   /* NULL-safe */

#endif
