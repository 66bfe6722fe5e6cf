/* services/verifier/scoring.h: the verifier's scoring pool — ScoreRequests in, ScoreResults out, scored on a
 * fixed set of threads (DESIGN.md §1: "a thread pool, a deadline per item, never crashes on input").
 * Each item: reward_score() by data_source (common/reward) with a per-item deadline (reward_model.timeout_s; an
 * item over it gets score -1 and error "timeout"), then the soft overlong penalty from the request's
 * max_response_length, overlong buffer and factor (common/dapo/overlong.h), added to the score.
 * The pool owns every request it was given until the result is taken (or the request is cancelled).
 * Not here: the protocol (main.c). */
#ifndef DAPO_VERIFIER_SCORING_H
#define DAPO_VERIFIER_SCORING_H

#include <stdint.h>

#include "core/err.h"
#include "dapo.pb-c.h"

typedef struct ScorePool ScorePool;

/* threads >= 1; timeout_s: per-item deadline. NULL on failure (err says why). */
ScorePool *score_pool_new(int threads, double timeout_s, char err[ERR_LEN]);
/* Takes ownership of req (unpacked; freed by the pool). Items are scored in the background. */
void score_pool_submit(ScorePool *p, Dapo__ScoreRequest *req);
/* Marks the request with this id and attempt as cancelled: its items are skipped and no result is produced.
 * Returns the number of items the cancel released (0 when unknown or already done). */
uint32_t score_pool_cancel(ScorePool *p, uint64_t request_id, uint32_t attempt);
/* Removes one finished request: returns 1 with *out set to its result (caller frees with score_result_free), or
 * with *out NULL when the request was cancelled; *n_items receives the request's size (the credit it frees).
 * Returns 0 when nothing is finished. Results come out in submission order. */
int score_pool_take(ScorePool *p, Dapo__ScoreResult **out, uint32_t *n_items);
void score_result_free(Dapo__ScoreResult *r);
/* Requests held (queued, in progress or finished but not taken) and items scored over the pool's life. */
int score_pool_pending(ScorePool *p);
uint64_t score_pool_timeouts(ScorePool *p);
/* Stops the threads (items in progress finish first) and frees everything. NULL-safe. */
void score_pool_free(ScorePool *p);

#endif
