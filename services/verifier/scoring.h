/* services/verifier/scoring.h: the verifier's scoring pool — ScoreRequests in, ScoreResults out, scored on a
 * fixed set of threads (docs/design.md §1: "a thread pool, a deadline per item, never crashes on input").
 * Each item is scored by one of two paths, with a per-item deadline (reward_model.timeout_s):
 *   - built in (the default, the fastest): reward_score() by data_source (common/reward); an item over the deadline
 *     gets score -1, error "timeout", outcome REWARD_TIMEOUT;
 *   - a Python reward function (custom_reward_function.path): each thread owns one worker process (pyreward.h);
 *     a number or a dict's "score" is the score (a dict's "acc" is acc, else score > 0; its other numeric values
 *     go back as extra_keys / extra_values); a timeout, crash, MemoryError or exception gives error_score and the
 *     matching outcome for that item only;
 *   - a remote reward server (reward_model.remote.url, remote.h): each thread owns one HTTP client and takes up to
 *     reward_model.remote.batch_size items of a request at once (one POST); failures as for the Python path.
 * Then the soft overlong penalty from the request's max_response_length, overlong buffer and factor
 * (common/dapo/overlong.h) is added to the score.
 * The pool owns every request it was given until the result is taken (or the request is cancelled).
 * Not here: the protocol (main.c). */
#ifndef DAPO_VERIFIER_SCORING_H
#define DAPO_VERIFIER_SCORING_H

#include <stdint.h>

#include "core/err.h"
#include "dapo.pb-c.h"
#include "pyreward.h"
#include "remote.h"

#define REMOTE_MAX_BATCH 256    /* reward_model.remote.batch_size's bound */

typedef struct ScorePool ScorePool;

typedef struct {
    int                 threads;      /* >= 1 (with py: one worker process each) */
    double              timeout_s;    /* per-item deadline */
    double              error_score;  /* the Python path's score of an item it could not score */
    const PyWorkerSpec *py;           /* a Python reward function (copied), or NULL */
    const RemoteSpec   *remote;       /* else a remote reward server (copied), or NULL: the built-in scorers */
    int                 remote_batch_size;   /* items per POST, 1..REMOTE_MAX_BATCH */
} ScorePoolOpts;

/* Starts the threads (and, with py, every worker process, each of which must say ready). NULL on failure (err says
 * why: e.g. the reward file does not import). */
ScorePool *score_pool_new(const ScorePoolOpts *o, char err[ERR_LEN]);
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
/* Items by outcome over the pool's life: [5] indexed by Dapo__RewardOutcome. */
void score_pool_outcomes(ScorePool *p, uint64_t out[5]);
/* Stops the threads (items in progress finish first) and frees everything. NULL-safe. */
void score_pool_free(ScorePool *p);

#endif
