/* services/coordinator/batch.h: a step's training batch built before anything is sent (docs/design.md §1 steps 4-5), as a
 * pure function of the assembled groups and the config: no sockets, no engine state, so it is tested on its own
 * (tests/unit/test_coord_batch.c). steps.c then only walks the plan's shards and sends them.
 *   1. per sequence: reward = the verifier's score, response tokens counted by the loss (0 when overlong filtering
 *      masks a truncated response), cost = prompt + response tokens;
 *   2. advantages: GRPO over each group (common/dapo/advantages.h, verl's compute_grpo_outcome_advantage);
 *   3. layout: mini-batches x learner ranks, balanced by cost (common/dapo/layout.h);
 *   4. the TrainBatch row of every sequence (tbwire.h's TbwSeq: prompt, response, rollout log-probs, response_mask,
 *      advantage, group id, behaviour policy version) and each shard's token count;
 *   5. critic/advantages/{mean,max,min} over the unmasked response tokens (verl's compute_data_metrics), summed in
 *      shard order.
 * Not here: the TrainBatch header, encoding and sending (steps.c send_batch, tbwire.h), batch statistics of scores
 * and lengths (steps.c batch_metrics). */
#ifndef DAPO_COORD_BATCH_H
#define DAPO_COORD_BATCH_H

#include "coord.h"
#include "dapo/layout.h"
#include "io/dataset.h"
#include "tbwire.h"

typedef struct {
    int        nseq;           /* groups x rollout.n */
    int        world;          /* learner ranks */
    float     *adv;            /* [nseq] advantage of each sequence (groups in batch order, responses in order) */
    TbwSeq    *row;            /* [nseq] each sequence's TrainBatch row (pointers borrowed from the groups/items) */
    Layout     lay;            /* shard k = (mini k / world, rank k % world) holds rows lay.shard[k].seq[...] */
    long long *shard_tokens;   /* [n_mini * world] prompt + response tokens of each shard */
    long long  batch_tokens;   /* of one epoch (all shards) */
    double     adv_mean, adv_min, adv_max;   /* 0 when no response token is unmasked */
} BatchPlan;

/* Builds the plan of nb groups (each with cfg->rollout_n scored responses) whose prompts are items[b]. Every array
 * is owned by p (batch_plan_free); the rows borrow the groups' responses and the items' ids, which must outlive it.
 * Errors: ERR_INVAL from the advantage or layout functions, with the reason in err (p is then empty). */
int  batch_plan_build(const Config *cfg, Group *const *batch, const DatasetItem *const *items, int nb, BatchPlan *p,
                      char err[ERR_LEN]);
void batch_plan_free(BatchPlan *p);   /* NULL-safe; leaves p zeroed */
/* The rows of shard k in order, copied into out[lay.shard[k].n_seq]. */
void batch_plan_shard_rows(const BatchPlan *p, int k, TbwSeq *out);

#endif
