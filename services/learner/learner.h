/* services/learner/learner.h: the learner's training engine (docs/design.md §1 step 5, §2; issue 7), independent of the
 * sockets so tests drive it directly:
 *   - old log-probs recomputed with the current weights for EVERY mini-batch of a step before its first update
 *     (verl's compute_log_prob over the whole batch), or the rollout's log-probs (actor.use_rollout_log_probs =
 *     rollout_correction.bypass_mode); then the step's off-policy correction (offpolicy.h: behaviour versions
 *     checked against trainer.staleness, IS weights pi_prox / pi_rollout and rejection — verl's decoupled mode);
 *   - per mini-batch shard: micro-batches (ppo_micro_batch_size_per_gpu sequences, or use_dynamic_bsz packs of at
 *     most ppo_max_token_len_per_gpu tokens; dapo/layout.h) forward + DAPO loss (dapo/loss.h, global denominators
 *     from the shard) + backward, accumulated; gradients SUMMED over ranks (common/collective) — the loss already
 *     divides by the mini-batch-global counts, so dp_size is 1 — then a NaN/Inf check (skip, counted), grad-norm
 *     clip (actor.grad_clip), lr from the schedule (one scheduler step per global step, as verl's update_actor), AdamW;
 *   - split invariance: model_forward / model_backward compute each sequence with products of its own and add its
 *     weight-gradient terms into the one fp32 gradient slab sequence by sequence (model.h), and chunks run in shard
 *     order, so 1, 2 or 5 fixed-size micro-batches give bitwise the same gradient (and the same log-probs, old and
 *     new). use_dynamic_bsz visits the sequences in another order and W ranks sum per-rank partial sums: both equal
 *     the one-batch gradient up to fp32 rounding of the sum (tests/unit/test_learner.c checks |a-b| <= 1e-8 + 1e-5|b|
 *     per element);
 *   - the step bookkeeping: shards of a step are buffered, run in arrival order ((ppo_epoch, mini-batch) order, as
 *     the coordinator sends them), a failed shard fails the rest of its step;
 *   - with fsdp_config.fsdp_size -1 (W > 1) the model, gradients and optimizer state are fully sharded (shard.h): the
 *     same steps, with each layer gathered when used, its gradients reduce-scattered in backward, a vote before every
 *     chunk so that every rank makes the same collective calls, AdamW on the rank's pieces and the whole model
 *     gathered once per step for rank 0 to publish (learner_gather_params);
 *   - checkpoints (model/checkpoint.h) and resume (a sharded checkpoint resumes at any W).
 * Positions: a shard's sequence i spans input_ids[offsets[i] .. offsets[i+1]), its first prompt_lengths[i] tokens
 * are prompt; response token j (0-based) is predicted at packed position offsets[i] + prompt_lengths[i] + j - 1.
 * Not here: the sockets, StepResult and weight publishing (main.c, weights.h), the CUDA path. */
#ifndef DAPO_LEARNER_H
#define DAPO_LEARNER_H

#include <stdint.h>

#include "collective/collective.h"
#include "core/config.h"
#include "core/metrics.h"
#include "dapo/loss.h"
#include "dapo/rollout_corr.h"
#include "dapo.pb-c.h"
#include "model/adamw.h"
#include "shard.h"
#include "model/model.h"
#include "model/probe.h"
#include "model/seqpack.h"
#include "offpolicy.h"
#include "ref.h"
#include "klreward.h"

/* Called between micro-batches and while collectives wait (heartbeats); return < 0 to abort the shard. */
typedef int (*LearnerKeepaliveFn)(void *ud);

/* What one mini-batch update did (all values identical on every rank: they are all-reduced). */
typedef struct {
    double pg_loss;          /* the mini-batch loss (verl's actor/pg_loss) */
    double loss;             /* pg_loss - entropy_coeff * entropy term */
    double entropy;          /* token mean of the entropy over the mini-batch (nats) */
    double pg_clipfrac, pg_clipfrac_lower, ppo_kl;   /* token means over the mini-batch */
    double kl_loss;          /* actor.use_kl_loss: the KL term's aggregate (verl's actor/kl_loss), else 0 */
    double n_tokens;         /* response tokens counted (mask sum) over all ranks */
    double grad_norm;        /* global L2 norm before clipping (NaN/Inf when skipped for that reason) */
    double lr;               /* learning rate used (0 when skipped) */
    int    skipped;          /* 1: NaN/Inf loss or grad norm, no update */
    int    n_micro;          /* micro-batches this rank ran (after splitting to fit the activation slab) */
    double t_fwd, t_bwd, t_opt, t_comm;   /* seconds on this rank: forward+loss, backward, clip+AdamW, all-reduce */
} LearnerMiniStats;

typedef struct Learner Learner;
struct Learner {
    Model       *m;                /* owned */
    Collective  *coll;             /* borrowed; NULL: a single rank */
    int          rank, world;
    int          sharded;          /* fsdp_config.fsdp_size -1 or >= W (W > 1): parameters, gradients and optimizer
                                      state fully sharded (shard.h) */
    LearnerShard shard;            /* this rank's (shard.h); zeroed unless sharded */
    float       *full;             /* sharded, rank 0: the whole parameter vector as last gathered (shard_gather_full:
                                      at open and after each step), what it publishes and exports; owned */
    LossParams   lp;
    AdamWConfig  opt;
    LrSchedule   sched;
    double       lr, min_lr_ratio, grad_clip;
    long         warmup, total_steps;   /* warmup < 0: warmup_ratio x total_steps (verl's lr_warmup_steps_ratio) */
    double       warmup_ratio;
    float        temperature;
    int          micro_bsz, dynamic_bsz, max_tok_micro, ppo_epochs;
    RolloutCorrConfig rc;          /* algorithm.rollout_correction, resolved (rc.bypass: actor.use_rollout_log_probs) */
    int          staleness;        /* trainer.staleness: the most versions a row may lag behind L->version */
    long         steps_done;       /* global steps completed (verl global_steps) */
    int64_t      version;          /* policy version of the current weights */
    long         skipped_updates;  /* NaN/Inf updates skipped so far */
    uint64_t     rng_seed, rng_counter;   /* counter-based RNG state (core/rng.h); nothing in DAPO's update draws */
    LearnerKeepaliveFn keepalive;
    void        *keepalive_ud;
    char        *ckpt_root;        /* trainer.default_local_dir (owned) */
    int          max_keep;
    /* scratch sized to the activation slab (model max_tokens), allocated once */
    SeqPack     *pack;             /* chunking and packing of the shard (model/seqpack.h); owned */
    float       *r_old, *r_adv, *r_isw;   /* [T] per response token of a chunk: old log-prob, advantage, IS weight */
    float       *r_ref;            /* [T] reference log-probs of a chunk (use_kl) */
    uint8_t     *r_mask;
    float        stats[9];
    float       *ref_params;       /* lp.use_kl or klr.use_kl: the reference policy's weights, or this rank's pieces
                                      (ref.h); owned */
    KlReward     klr;              /* algorithm.use_kl_in_reward and the advantages computed here (klreward.h) */
    /* the step being trained */
    long         cur_step, failed_step;
    Dapo__TrainBatch **pending;    /* owned, arrival order */
    int          n_pending, cap_pending;
    float      **old_lp;           /* [num_mini] per response token, once computed */
    float      **ref_lp;           /* [num_mini] reference log-probs per response token (lp.use_kl), else NULL */
    long        *old_n;            /* [num_mini] response tokens of each */
    OffpolicyMini *corr;           /* [num_mini] off-policy correction of the step (offpolicy.h) */
    OffpolicyStep  corr_step;      /* its step totals over all ranks */
    double       corr_acc[8];      /* this rank's counts before the all-reduce (offpolicy.c) */
    double       bypass_rej, bypass_cnt;   /* bypass-mode rejection of the shard being trained: tokens rejected, counted */
    int          n_mini, old_done;
    int          n_trained;        /* shards of the step trained so far: the next is epoch n/n_mini, mini n%n_mini */
    double       t_old;            /* seconds of the step's old-log-prob pass on this rank */
    double       t_ref;            /* seconds of its reference-log-prob part (lp.use_kl) */
    float        probe_lp[PROBE_TOKENS];   /* the weight probe's log-probs under the current weights (learner_probe) */
    int          n_probe;          /* of them; 0: none (a failed probe pass) */
};

/* Builds the engine from the config: the model from the newest checkpoint under trainer.default_local_dir
 * (trainer.resume_mode auto; none there: actor_rollout_ref.model.path), from trainer.resume_from_path (resume_path),
 * or from model.path (disable); optimizer and loss knobs from actor_rollout_ref.actor.*; rank/world as given; coll
 * borrowed (NULL for world 1). NULL with a message on error (bad knobs, model/checkpoint load errors). */
Learner *learner_open(const Config *cfg, int rank, int world, Collective *coll, char err[ERR_LEN]);
void     learner_close(Learner *L);   /* NULL-safe; frees pending shards */

/* The weights to publish and export (rank 0): the model's slab, or the gathered copy of a sharded run; NULL on a
 * sharded rank > 0 and on a device backend (weights.h reads the model then). Borrowed. */
const float *learner_params(const Learner *L);
/* Sharded: every rank gathers the whole model once (collective; learner_next does it after a step's last update) and
 * rank 0 keeps it for learner_params. 0 (unsharded: nothing to do) or ERR_COLLECTIVE. */
int learner_gather_params(Learner *L, char err[ERR_LEN]);

/* Checks a shard against the model and itself (offsets, lengths, token range, per-response-token arrays, rank/world).
 * 0 or ERR_INVAL naming the field. */
int learner_check_batch(const Learner *L, const Dapo__TrainBatch *tb, char err[ERR_LEN]);

/* The weight probe (model/probe.h) under the current weights into L->probe_lp (n_probe values): a one-sequence
 * learner_logprobs pass, so every rank of a sharded learner must call it at the same point (learner_open does, and
 * learner_next after each step's last update). 0, or learner_logprobs' error (n_probe is then 0). */
int learner_probe(Learner *L, char err[ERR_LEN]);

/* Log-probs of every response token of the shard under the current weights: out[n_response_tokens]. */
int learner_logprobs(Learner *L, const Dapo__TrainBatch *tb, float *out, char err[ERR_LEN]);

/* Gradient of the shard's mini-batch loss summed over ranks into the model's gradients (zeroed first), and the
 * all-reduced loss statistics into *st (apply not yet done). old_lp[n_response_tokens]; ref_lp[n_response_tokens]: the
 * reference policy's log-probs, needed with actor.use_kl_loss (else ignored; NULL then: ERR_INVAL); corr: the
 * mini-batch's IS weights / rejection mask / rejected-token count (offpolicy.h), NULL for none. 0, ERR_COLLECTIVE when
 * a sum over the ranks failed (err: the collective's reason), or the model's error. */
int learner_grads(Learner *L, const Dapo__TrainBatch *tb, const float *old_lp, const float *ref_lp,
                  const OffpolicyMini *corr, LearnerMiniStats *st, char err[ERR_LEN]);

/* The optimizer part: skip on NaN/Inf (st->skipped, counted), else clip, lr of the current step, AdamW. */
int learner_apply(Learner *L, LearnerMiniStats *st, char err[ERR_LEN]);

/* learner_grads + learner_apply. */
int learner_update(Learner *L, const Dapo__TrainBatch *tb, const float *old_lp, const float *ref_lp,
                   const OffpolicyMini *corr, LearnerMiniStats *st, char err[ERR_LEN]);

/* One shard's outcome, for the StepResult. */
typedef struct {
    Dapo__TrainBatch *tb;        /* the shard (owned by the result; learner_result_free frees it) */
    Metrics           metrics;   /* verl names; the coordinator averages them over every StepResult of the step */
    LearnerMiniStats  st;
    int               failed;    /* 1: code and error say why; the rest of the step's shards are dropped */
    int               code;      /* failed: its ERR_* code (ERR_COLLECTIVE: the ranks must re-form), else 0 */
    char              error[ERR_LEN];
} LearnerResult;

/* Takes ownership of a decoded TrainBatch. Shards of an older step than the current one, or the remaining shards of a
 * failed step, are dropped (freed, logged); a shard (epoch 0, mini-batch 0) of a failed step starts a new attempt.
 * Returns 0. */
int learner_submit(Learner *L, Dapo__TrainBatch *tb);

/* Runs the next shard when it can run (first: the old log-prob pass once every mini-batch of ppo_epoch 0 is here,
 * with the step's off-policy correction, offpolicy.h).
 * Shards run in verl's order — epoch 0 mini-batches 0..M-1, then epoch 1, ... — whatever order they were submitted in.
 * Returns 1 with *r filled (free with learner_result_free), 0 when nothing can run yet. On the step's last shard
 * (last_of_step, no error) steps_done and version advance (version = tb->policy_version + 1). */
int learner_next(Learner *L, LearnerResult *r);
void learner_result_free(LearnerResult *r);

/* Writes a checkpoint of the current state to trainer.default_local_dir: rank 0 the model, the optimizer state and
 * state.json; with a sharded optimizer (L->sharded) every rank is asked and writes its shard (checkpoint.h), rank 0
 * the rest. 0 or ERR_IO (previous checkpoints kept; err says why). */
int learner_checkpoint(Learner *L, char err[ERR_LEN]);

#endif
