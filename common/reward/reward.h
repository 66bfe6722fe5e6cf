/* common/reward/reward.h: the table of rule-based scorers keyed by a dataset's `data_source`, and the one
 * entry point the verifier daemon (and dapo-verify) calls per response. Mirrors verl's
 * `default_compute_score(data_source, ...)` dispatch, except that every math source here uses the DAPO
 * math_dapo rules (docs/design.md §2; issue 3): "math_dapo", "math500", "openai/gsm8k", "aime*", ... A new
 * scorer is one row in reward.c's table. Unknown sources fall back to math_dapo (the default), reported
 * through RewardScorer.is_default so a caller can count them.
 * Not here: the overlong penalty (dapo/overlong.h), threading, deadlines policy (the caller picks one). */
#ifndef DAPO_REWARD_H
#define DAPO_REWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "reward/math_dapo.h"

/* Per-thread scratch for every scorer (currently math_dapo's). xmalloc'd; free with reward_ws_free. */
typedef struct RewardWs RewardWs;
RewardWs *reward_ws_new(void);
void      reward_ws_free(RewardWs *ws);   /* NULL-safe; invalidates preds borrowed from ws */

typedef struct {
    double      score;     /* +1.0 / -1.0 (no overlong penalty here); -1.0 on error */
    bool        acc;
    bool        has_pred;  /* false where the reference returns None (strict mode, no complete box) */
    const char *pred;      /* UTF-8, pred_len bytes (may hold NULs), NUL-terminated; BORROWED from the
                            * RewardWs passed in: valid until the next reward_score() on that ws */
    size_t      pred_len;
    int         error;     /* 0, or ERR_TIMEOUT / ERR_TOO_BIG / ERR_INVAL (then score -1, has_pred false) */
    char        err[ERR_LEN]; /* "timeout" for ERR_TIMEOUT; empty when error == 0 */
} RewardResult;

/* One scorer: scores resp (resp_len bytes) against gt (gt_len bytes); deadline_ns absolute on
 * CLOCK_MONOTONIC (math_dapo_now_ns()), 0 = none. Fills every field of *out; returns out->error. */
typedef int (*RewardScoreFn)(RewardWs *ws, const char *resp, size_t resp_len, const char *gt, size_t gt_len,
                             bool strict_box, int64_t deadline_ns, RewardResult *out);

typedef struct {
    const char   *data_source; /* exact key, or a prefix when prefix is set */
    bool          prefix;
    const char   *name;        /* scorer name for logs/metrics ("math_dapo") */
    RewardScoreFn fn;
    bool          is_default;  /* true only for the fallback row returned for unknown sources */
} RewardScorer;

/* The scorer for data_source (NULL or "" -> the default). Never NULL; static storage. */
const RewardScorer *reward_scorer_find(const char *data_source);

/* Scores one response with the scorer of data_source (see reward_scorer_find). resp / gt: any bytes
 * (invalid UTF-8 handled as Python's errors="replace"), NULL allowed with length 0. Returns out->error
 * (0 on success); never crashes on input. Cost: O(gt_len + 1200) per call, bounded by the deadline. */
int reward_score(RewardWs *ws, const char *data_source, const char *resp, size_t resp_len, const char *gt,
                 size_t gt_len, bool strict_box, int64_t deadline_ns, RewardResult *out);

/* The whole table, for listing (--list, metrics); *n gets its length (the default row is the last). */
const RewardScorer *reward_scorers(size_t *n);

#endif
