/* services/learner/shard.h: the learner's fully sharded state (issue 39; torch FSDP's full shard, verl's
 * `actor_rollout_ref.actor.fsdp_config.fsdp_size` -1 or >= W). The flat parameter vector is cut into the model's FSDP
 * units (model.h: the embedding, each decoder layer, the final norm and LM head); rank r of W owns its piece of every
 * unit (model_unit_piece: the r-th ceil(n_u / W) floats of unit u) and keeps, for those pieces only, the fp32 master
 * parameters, the gradient accumulator and the AdamW moments: 16 bytes a parameter / W. The model (loaded with
 * ModelOptions.shard_world = W) holds only windows and calls this module's hooks:
 *   use(u):         unit u's parameters into its window — this rank's piece copied in, then coll_allgather — unless the
 *                   window still holds them (a layer slot is shared by every layer unless keep_params, verl's
 *                   reshard_after_forward false; an optimizer step makes every window stale);
 *   grads_ready(u): a layer's gradients are reduce-scattered at once (coll_reduce_scatter_sum, the ring's fixed order)
 *                   and this rank's part added to its accumulator, the window zeroed; the embedding and final units
 *                   keep accumulating in their windows until shard_finish_grads (they are used at both ends of a pass).
 * Every rank must make the same calls in the same order: a rank with fewer chunks runs idle passes (shard_vote, then
 * model_forward_idle / model_backward_idle), as verl keeps the micro-batch count equal across FSDP ranks.
 * One optimizer step: shard_finish_grads, shard_grad_norm (the exact global norm), shard_adamw (clip + AdamW on the
 * pieces); the published weights are gathered once per version (shard_gather_full).
 * Against replicated data parallelism (fsdp_size 1: one all-reduce of the whole gradient after the mini-batch) the
 * results differ by fp32 reassociation only: each chunk's layer gradients are summed over ranks before they are added
 * over chunks, the ring cuts its sums elsewhere, and the norm's double sums run in another order.
 * Not here: the collectives (common/collective), the forward and backward (common/model), when to checkpoint
 * (learner.c). */
#ifndef DAPO_LEARNER_SHARD_H
#define DAPO_LEARNER_SHARD_H

#include "collective/collective.h"
#include "core/err.h"
#include "model/adamw.h"
#include "model/model.h"

typedef struct {
    int         rank, world, n_units;
    long        n;              /* parameters (floats) */
    long       *lo, *hi;        /* [n_units] this rank's piece of each unit (flat offsets) */
    long       *pos;            /* [n_units + 1] where each piece starts in the arrays below; pos[n_units] = local */
    long        local;          /* floats this rank keeps of each kind */
    float      *p, *g, *m, *v;  /* master parameters, gradient accumulator, AdamW moments: local floats each (owned) */
    char       *fresh;          /* [n_units] the unit's window holds its current parameters */
    Model      *model;          /* borrowed: the hooks' model */
    Collective *coll;           /* borrowed */
    double      t_comm;         /* seconds in collectives since the caller last zeroed it */
    ModelUnitHooks hooks;
} LearnerShard;

/* Sets up rank's pieces of model m (loaded with ModelOptions.shard_world = world, CPU backend): its pieces of the
 * parameters read from the Hugging Face directory dir (any float dtype; model_read_params_range), zero gradients and
 * moments; registers the hooks on m (over coll). 0, or ERR_INVAL (m is not sharded over world), ERR_IO / ERR_NOTFOUND
 * naming the file or tensor. On error call shard_free. */
int  shard_init(LearnerShard *s, Model *m, Collective *coll, int rank, int world, const char *dir, char err[ERR_LEN]);
void shard_free(LearnerShard *s);   /* NULL-safe; leaves *s zeroed (m's hooks are not reset: free m too) */

/* Zeroes the gradient accumulator and the model's gradient windows (a mini-batch starts). */
void shard_grads_zero(LearnerShard *s);

/* One round of "does any rank have another chunk?": mine = 1 when this rank has, *any = 1 when some rank has (every
 * rank gets the same answer). 0 or ERR_COLLECTIVE. */
int  shard_vote(LearnerShard *s, int mine, int *any, char err[ERR_LEN]);

/* The embedding and final units' gradients (accumulated in their windows over the mini-batch's passes):
 * reduce-scattered into the accumulator. Call once all ranks' passes of the mini-batch are done. 0 or ERR_COLLECTIVE. */
int  shard_finish_grads(LearnerShard *s, char err[ERR_LEN]);

/* The global gradient L2 norm into *norm (the same bits on every rank), as torch.nn.utils.clip_grad_norm_ over the whole
 * model: each rank's sum of squares (double), exchanged exactly and added in rank order. 0 or ERR_COLLECTIVE. */
int  shard_grad_norm(LearnerShard *s, double *norm, char err[ERR_LEN]);

/* Clips the accumulator by the global norm (max_norm <= 0: none; torch's max_norm / (norm + 1e-6)) and steps AdamW on
 * the pieces (adamw_update: torch.optim.AdamW); the model's optimizer step count goes up by one and every window becomes
 * stale. 0 or ERR_INVAL (lr not finite or < 0). */
int  shard_adamw(LearnerShard *s, const AdamWConfig *cfg, float lr, double norm, double max_norm, char err[ERR_LEN]);

/* This rank's pieces of the parameters in the Hugging Face directory dir (any float dtype) into dst[s->local], in the
 * layout of s->p (e.g. the reference policy's, ref.h). 0, ERR_IO / ERR_NOTFOUND naming the file or tensor. */
int  shard_read_pieces(const LearnerShard *s, const char *dir, float *dst, char err[ERR_LEN]);

/* Swaps the master parameters s->p with *other (s->local floats; e.g. the reference policy's pieces): the next
 * forward gathers the other weights (every window becomes stale). Swapping back restores them bit for bit. */
void shard_swap_params(LearnerShard *s, float **other);

/* Every unit gathered in turn (every rank must call it); with full != NULL the whole parameter vector (n floats, the
 * flat layout) is copied there — rank 0's copy for the weights it publishes and exports. 0 or ERR_COLLECTIVE. */
int  shard_gather_full(LearnerShard *s, float *full, char err[ERR_LEN]);

#endif
