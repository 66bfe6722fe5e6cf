/* services/learner/shard.h: the learner's sharded optimizer (issue 39; ZeRO stage 1 with reduce-scattered gradients,
 * `actor_rollout_ref.actor.fsdp_config.fsdp_size` -1, or >= W): over the W learner ranks the flat parameter vector
 * (the model's slab order, n floats, padded to W x shard, shard = ceil(n / W)) is cut into W equal ranges; rank r owns
 * [r shard, (r + 1) shard) and keeps the AdamW moments of that range only (8 bytes a parameter / W instead of 8).
 * One optimizer step, after backward left the whole gradient in the model's slab:
 *   1. reduce-scatter the gradient slab (coll_reduce_scatter_sum: rank r gets its range summed over ranks, in the ring's
 *      fixed order);
 *   2. the global L2 norm: each rank's sum of squares of its range (double), exchanged exactly and added in rank order
 *      (so every rank has the same bits), as torch.nn.utils.clip_grad_norm_ over the whole model;
 *   3. clip (scale the range by max_norm / (norm + 1e-6) when norm > max_norm) and AdamW on the range
 *      (adamw_update: torch.optim.AdamW's formulas);
 *   4. all-gather the parameter slab: every rank holds the whole updated model again (for the next forward and the
 *      weights it publishes).
 * Parameters and gradients stay whole on every rank between steps (ZeRO-3's per-layer gather is not built yet).
 * Against replicated data parallelism (fsdp_size 1: all-reduce, every rank steps the whole model) the results differ
 * only by fp32 reassociation of the gradient sum (the all-reduce cuts its chunks at n k / W, the reduce-scatter at
 * shard k) and of the norm.
 * Not here: the collectives (common/collective), the forward and backward (common/model), checkpoints of the shards
 * (learner.c). */
#ifndef DAPO_LEARNER_SHARD_H
#define DAPO_LEARNER_SHARD_H

#include "collective/collective.h"
#include "core/err.h"
#include "model/adamw.h"
#include "model/model.h"

typedef struct {
    int    rank, world;     /* this rank and the ranks the state is sharded over */
    long   n;               /* parameters (floats) */
    long   shard;           /* floats a rank owns: model_slab_floats / world */
    long   lo, hi;          /* this rank's range of the flat parameter vector, hi <= n (the padding is nobody's) */
    float *m, *v;           /* AdamW moments of [lo, hi): hi - lo floats each (xmalloc'd, owned) */
} LearnerShard;

/* Sets up rank's shard of model m (loaded with ModelOptions.shard_world = world; host memory: the CPU backend) with
 * zero moments. 0, or ERR_INVAL (the model's slabs are not padded for world, or its backend's memory is not the
 * host's: sharding on CUDA is the GPU issue's). */
int  shard_init(LearnerShard *s, const Model *m, int rank, int world, char err[ERR_LEN]);
void shard_free(LearnerShard *s);   /* NULL-safe; leaves *s zeroed */

/* Step 1: reduce-scatters m's gradient slab over coll (in place; this rank's range then holds the sum). poison: this
 * rank saw a non-finite gradient, so its whole slab is made NaN first and every rank's range becomes NaN (every rank
 * then skips the step). 0 or ERR_COLLECTIVE (err says why). */
int  shard_reduce_grads(const LearnerShard *s, Model *m, Collective *coll, int poison, char err[ERR_LEN]);

/* Step 2: the global gradient norm into *norm (the same bits on every rank). 0 or ERR_COLLECTIVE. */
int  shard_grad_norm(const LearnerShard *s, const Model *m, Collective *coll, double *norm, char err[ERR_LEN]);

/* Step 3: clip this rank's range by the global norm (max_norm <= 0: none) and step AdamW on it with learning rate lr;
 * the model's optimizer step count goes up by one (model_set_adam_step). 0 or ERR_INVAL (lr not finite or < 0). */
int  shard_adamw(LearnerShard *s, Model *m, const AdamWConfig *cfg, float lr, double norm, double max_norm,
                 char err[ERR_LEN]);

/* Step 4: all-gathers m's parameter slab (in place) and marks the parameters changed. 0 or ERR_COLLECTIVE. */
int  shard_gather_params(const LearnerShard *s, Model *m, Collective *coll, char err[ERR_LEN]);

#endif
