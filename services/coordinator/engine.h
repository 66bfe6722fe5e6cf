/* services/coordinator/engine.h: the training engine's state and the helpers its four files share (internal to the
 * coordinator; coord.h is the engine's interface to the rest of it):
 *   steps.c     groups, epochs, the step state machine (rounds, batch assembly and send), the tick
 *   dispatch.c  leases: stale drops, choosing workers, GenerateGroup / ScoreGroup sends, dispatch
 *   results.c   GroupResult / ScoreResult / StepResult handlers, lost workers, lease reclaim
 *   setup.c     engine_start (data, tokenizer, total steps), snapshots and restore, /api/status, free
 * Not here: checkpoints (ckpt.c), the registry (registry.c), the batch plan (batch.h). */
#ifndef DAPO_COORD_ENGINE_H
#define DAPO_COORD_ENGINE_H

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/rng.h"
#include "batch.h"
#include "coord.h"
#include "dapo/filter.h"
#include "dapo/rollout_corr.h"
#include "dapo/val_metrics.h"
#include "io/dataset.h"
#include "tokenizer/tokenizer.h"
#include "tbwire.h"

#define MAX_ATTEMPTS 5           /* a group whose generation failed this often is cancelled */
#define JOB_QUEUE_MAX 64         /* steps queued at the learners behind the one in training (trainer.staleness <= 64) */

/* The step whose batch is with the learners. In sync mode it is the step just generated; in async mode
 * (trainer.staleness 1) the next step's generation runs meanwhile, with rollouts at most one version behind. */
typedef struct {
    int            active;
    long           step;
    int            expected, results;        /* StepResults: ppo_epochs x mini-batches x ranks */
    int64_t        new_version;
    Metrics        m, learner;               /* coordinator metrics of the step; learner metric sums */
    double         t_step, t_gen, t_reward, t_sent, t_trained;   /* t_trained: its version published (clock_s) */
    double         t_reward_wait;            /* from the step's last generated group to its batch being ready */
    long long      batch_tokens;             /* prompt + response tokens trained */
    uint64_t       gen_tokens, resp_tokens;  /* response tokens generated over the step's rounds; of them trained */
    EngineSnapshot snap;                     /* cursor etc. as of the end of the step's generation */
    int            ngroups;                  /* groups trained (GS_TRAINED from its send on; a dropped queued step
                                                gives them back: eng__queue_clear) */
    double         t_queued;                 /* clock_s() its batch was queued behind another step (0: sent at once) */
    /* a queued step (Engine.queue): its TrainBatch frames, encoded when its batch was ready and held here until the
     * step before it is done (then sent in this order; the learner sees one step at a time) */
    struct HeldShard { uint32_t rank; uint8_t *frame; size_t len; } *held;
    int            nheld, capheld;
} TrainJob;

struct Engine {
    Tokenizer     *tok;
    Dataset        train, val;
    int32_t        stop_ids[4];
    int            n_stop;
    FilterMetric   fmetric;
    int            vocab;        /* the model's vocab_size (actor_rollout_ref.model.path's config.json), 0: unknown;
                                    a response's token ids must lie in [0, vocab) */

    int           *order;        /* [train.n] the epoch's shuffled order */
    int            epoch;        /* 0-based */
    long           cursor;       /* next position in order */
    long           consumed;     /* prompts drawn over the run */

    Phase          phase;
    long           step;         /* global step being worked on, 1-based (verl's global_steps) */
    long           done_steps;
    uint64_t       next_group_id;
    Group         *groups;       /* the current step's (or validation's) groups, ids consecutive */
    int            ngroups, capgroups;
    int            round, round_first;       /* current round and its first group index */
    int            first_open;   /* no group before it is queued or generated (dispatch starts here) */
    int            kept;         /* kept groups in this step */
    int            val_after;    /* after this validation: 0 start a step, 1 finish (val_only / end) */
    int            val_started;  /* the validation before training has run */

    /* the step being generated: timing and metrics */
    double         t_step, t_gen, t_reward_busy;
    double         t_last_generated;          /* clock_s() of the step's latest accepted GroupResult */
    uint64_t       wasted_tokens, generated_tokens;
    int            solve_none, solve_all, n_scored_groups, n_filtered;
    int            n_stale;      /* groups of the step dropped as too stale and regenerated */
    int            n_drawn;      /* prompts drawn for the step (rounds and refills) */
    int            n_refilled;   /* of them drawn at once into a filtered or cancelled group's slot (refill) */
    int            n_waited;     /* groups that waited for a rollout fresh enough (trainer.staleness_strategy wait) */
    int            n_continued;  /* responses whose tokens span two or more policy versions (partial rollouts) */
    uint64_t       continued_tokens;         /* of their tokens, those sampled after the swap (a later version) */
    uint64_t       reward_outcomes[5];        /* the step's scored responses by Dapo__RewardOutcome (not validation) */
    int            n_reward_extra;            /* a Python reward's extra values this step: name, sum, count */
    char          *reward_extra_name[16];
    double         reward_extra_sum[16];
    long           reward_extra_n[16];
    long           total_steps;  /* trainer.total_training_steps, or verl's derivation from the data (engine_start) */
    Metrics        m;            /* coordinator-side metrics of the step being generated */
    int            val_pending;  /* a validation is due (test_freq) before the next step's generation */
    long           last_val_step;   /* done_steps of the latest validation (-1: none yet) */
    int            data_done;    /* the last epoch is used up: nothing more to generate */
    double         t_last_finish;            /* clock_s() the latest step finished (0: none this process) */
    long           final_ckpt_step;          /* done_steps whose final checkpoint finish_run asked for (-1: none) */
    TrainJob       job;          /* the step the learners train now */
    TrainJob       queue[JOB_QUEUE_MAX];     /* async, staleness k: steps sent to the learners behind it, oldest first (at
                                                most k - 1; each trains from the version the one before it makes) */
    int            nqueue;
    char           fail[ERR_LEN];
    EngineSnapshot snap;         /* as of the last finished step */
    double         rejoin_t0;                /* PH_REJOIN: when the learner was lost (recover.c) */
    char           rejoin_why[ERR_LEN];
    long           rejoin_fail_step;         /* the step whose collective broke last, and how often in a row */
    int            rejoin_step_tries;
    EngineSnapshot initial;                  /* as the first step started (engine_initial_snapshot) */
    int            have_initial;
    char           last_reclaim[256];        /* the latest of them, in words (/api/status) */
};

/* stepstats.c: the step metrics behind the dashboard's panels (issue 20). */
void eng__length_metrics(Coord *c, Group **batch, int nb);       /* response_length/p50|p90|p99 + the histogram */
void eng__funnel_metrics(Engine *e, int trained);                 /* batch/groups_* counts of dynamic sampling */
void eng__split_metrics(const TrainJob *t, double now, double step_s, Metrics *out);   /* timing_s/..., perf/...;
                                                                   now: clock_s(); step_s: timing_s/step */

void eng__set_state(Coord *c, Group *g, GroupState s);
void eng__status(Coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void eng__groups_reset(Engine *e);
Group *eng__group_new(Coord *c, int item, long order, int validation);
Group *eng__group_by_id(Engine *e, uint64_t id);
const DatasetItem *eng__group_item(Engine *e, const Group *g);
void eng__shuffle_epoch(Coord *c);
uint64_t eng__response_tokens(const Group *g);
void eng__after_round(Coord *c);
void eng__send_cancel(Coord *c, const Group *g, const char *reason);
/* g's generation failed (its lease taken back, its result refused): generated again with attempt + 1, or cancelled
 * past MAX_ATTEMPTS; the lease is given up (worker -1). */
void eng__generate_again(Coord *c, Group *g);
/* Alive rollouts, and in *refused those of them whose weight probe failed (issue 42). */
int eng__rollouts_alive(const Coord *c, int *refused);
/* Every alive rollout failed the weight probe: the status line says so for `step` and 1 is returned; else 0. */
int eng__status_all_refused(Coord *c, long step);
void eng__cancel_in_flight(Coord *c);
void eng__finish_step(Coord *c);
void eng__announce_version(Coord *c);
int eng__version_ok(Coord *c, int64_t v);
/* Steps at the learners: the one in training and those queued behind it (0 .. k). */
int eng__inflight(const Engine *e);
/* The policy version the next batch sent trains from: the current one plus the steps at the learners before it. */
int64_t eng__train_from(const Coord *c);
/* Drops the queued steps (their held frames freed; their groups counted cancelled and their tokens no longer trained):
 * a stop, a rollback (whose snapshot then restores the counts). */
void eng__queue_clear(Coord *c);
/* A worker's policy version as the run counts it: -1 (none) when its weights are of an earlier incarnation. */
int64_t eng__worker_version(const Coord *c, const WorkerEntry *w);
void eng__drop_stale(Coord *c, Group *g);
int eng__drop_stale_groups(Coord *c);
/* The same, exactly against the version the ready batch will train from (eng__train_from): before it is queued behind
 * steps in flight. Returns the groups dropped. */
int eng__drop_stale_queued(Coord *c);
void eng__dispatch(Coord *c);

#endif
