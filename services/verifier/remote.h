/* services/verifier/remote.h: a remote reward server over HTTP (reward_model.remote.url), speaking OpenRLHF's
 * remote reward schema (openrlhf/utils/remote_rm_utils.py, `--remote_rm_url`):
 *   POST <url>  Content-Type: application/json
 *     {"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [ground_truth, ...]}
 *   200 {"rewards": [float, ...]}  one per query, in order; optional "scores": [float, ...] (OpenRLHF's filter
 *       score: acc = score > 0, else acc = reward > 0) and "extra_logs": {name: [float, ...]} (per-item metrics)
 * One call scores up to reward_model.remote.batch_size items of one request. Each POST has a deadline
 * (reward_model.remote.timeout_s); a timeout, a failed connection, HTTP 429 or 5xx is retried up to
 * reward_model.remote.max_retries times with exponential backoff (retry_backoff_s, doubled each time). When every try
 * fails, every item of the call gets outcome PYR_TIMEOUT (the last try timed out) or PYR_ERROR (anything else: HTTP
 * status, refused connection, a reply that is not the schema) and the caller scores them reward_model.error_score:
 * nothing is lost and the step goes on. HTTP 4xx other than 429 is not retried.
 * One RemoteReward per scoring thread (a libcurl easy handle; curl_global_init must have run once before threads).
 * Not here: the pool (scoring.c). */
#ifndef DAPO_VERIFIER_REMOTE_H
#define DAPO_VERIFIER_REMOTE_H

#include <stddef.h>

#include "core/err.h"
#include "pyreward.h"

typedef struct {
    const char *url;
    double      timeout_s;        /* per POST */
    int         max_retries;      /* tries after the first */
    double      retry_backoff_s;  /* before the first retry; doubled each time */
} RemoteSpec;

typedef struct RemoteReward RemoteReward;

/* spec's strings are copied. NULL with err set when libcurl cannot make a handle. */
RemoteReward *remote_new(const RemoteSpec *spec, char err[ERR_LEN]);

/* One item to score: borrowed bytes. */
typedef struct {
    const char *response;     size_t response_len;
    const char *ground_truth; size_t ground_truth_len;
} RemoteItem;

/* Scores items[n] (n >= 1) of one prompt (prompt[prompt_len], may be empty) with one POST (and its retries); fills
 * out[n] (pyscore_clear each). Invalid UTF-8 is replaced by U+FFFD before it reaches JSON. Returns the number of
 * POSTs made. */
int remote_score(RemoteReward *r, const char *prompt, size_t prompt_len, const RemoteItem *items, int n, PyScore *out);

void remote_free(RemoteReward *r);   /* NULL-safe */

#endif
