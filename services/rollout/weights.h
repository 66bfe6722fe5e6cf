/* services/rollout/weights.h: the rollout side of the weight protocol (issue 6/7): fetch version v of the policy
 * from learner rank 0 over ZeroMQ, stage it beside the live weights, and hand it over when complete.
 *
 * Protocol: common/net/wchunk.h (a DEALER connected to cluster.weights, learner rank 0's ROUTER).
 * A chunk is accepted when its checksum matches and its tensor, shape, dtype and byte range fit the model;
 * anything else is dropped with a warning and asked for again. After WFETCH_RETRY_MS without progress the
 * missing chunk indices are requested again (all of them when the chunk count is not known yet: the learner
 * answers nothing until it has the version). A newer version arriving replaces the one being staged.
 * The version is complete when every chunk arrived and every model tensor is fully covered; then
 * wfetch_ready() reports it and wfetch_swap() copies it into the model (the caller picks the moment: between
 * decode steps with no sequence in progress, so no response mixes two versions).
 * Memory: one staging copy of the parameters (model_bytes_params), allocated at the first fetch.
 * Not here: the learner side (services/learner), deciding when to fetch (main.c: the coordinator's version). */
#ifndef DAPO_ROLLOUT_WEIGHTS_H
#define DAPO_ROLLOUT_WEIGHTS_H

#include <stdint.h>

#include "core/err.h"
#include "model/model.h"
#include "net/net.h"

#define WFETCH_RETRY_MS 1000

typedef struct WeightFetch WeightFetch;

/* Connects a DEALER to endpoint, a CURVE client of the weight server when curve->on (net/curve.h; borrowed: it must
 * outlive f, the socket is made again after repeated failed requests; NULL: plaintext). m is borrowed (its tensor
 * table and size; it must outlive f). NULL with a message on a socket error. */
WeightFetch *wfetch_new(void *zctx, const char *endpoint, const char *worker_id, const Model *m,
                        int64_t max_msg_bytes, const CurveKeys *curve, char err[ERR_LEN]);
void wfetch_free(WeightFetch *f);   /* NULL-safe */

/* Asks for version v when it is newer than both `loaded` and what is being staged; sends the first request. */
void wfetch_want(WeightFetch *f, int64_t v, int64_t loaded);

/* Receives every pending chunk (non-blocking) and sends re-requests when due. Returns the number of chunks
 * accepted. Never fails on bad input (bad frames and chunks are logged and dropped). */
int wfetch_poll(WeightFetch *f);

/* Stages one chunk (also used for WeightUpdates that arrive by another socket). 0 accepted, 1 ignored
 * (stale version or duplicate), or a negative code with err saying why it was refused. */
int wfetch_chunk(WeightFetch *f, const Dapo__WeightUpdate *u, char err[ERR_LEN]);

/* Drops what is staged or being fetched (the run rolled back: the same version number may now mean other weights). */
void wfetch_forget(WeightFetch *f);

/* Version staged completely and not yet swapped in, or -1. */
int64_t wfetch_ready(const WeightFetch *f);
/* True while a version is wanted and not complete (the caller polls often then). */
int wfetch_busy(const WeightFetch *f);

/* Copies the ready version into m's parameters (model_write); returns it (or -1 when none is ready). */
int64_t wfetch_swap(WeightFetch *f, Model *m);

/* The weight probe's log-probs the learner published with the version swapped in last (model/probe.h): their count
 * (0: it sent none) and *lp (borrowed, valid until the next swap). */
int wfetch_probe(const WeightFetch *f, const float **lp);

/* Counters for logs and tests. */
typedef struct { long chunks_ok, chunks_bad, resends, versions; } WfetchStats;
void wfetch_stats(const WeightFetch *f, WfetchStats *s);

#endif
