/* services/learner/weights.h: learner rank 0's weight server (docs/design.md §1, issue 7): the server side of the
 * weight-chunk protocol (common/net/wchunk.h: chunks, messages, checksums). It keeps the latest published version's
 * weights (F32) and sends the chunks a rollout's WeightResend asks for, of the version it holds; a request for a
 * version it does not have yet gets no answer (the rollout asks again after the coordinator announces it). The snapshot is a copy, so training may change the model right after publishing.
 * Not here: pushing unrequested updates, bf16 transfer, NCCL broadcast of weights to GPU rollouts. */
#ifndef DAPO_LEARNER_WEIGHTS_H
#define DAPO_LEARNER_WEIGHTS_H

#include <stdint.h>

#include "core/err.h"
#include "model/model.h"
#include "net/curve.h"
#include "net/wchunk.h"


typedef struct WeightServer WeightServer;

/* Binds a ROUTER at endpoint (e.g. "tcp://127.0.0.1:5556"; port 0 picks one, see wsrv_endpoint). zctx borrowed.
 * A CURVE server when curve->on (net/curve.h; the context must run a ZAP handler, net/zap.h; NULL: plaintext); then
 * only keys named for a rollout or a learner (zap_key_role) get weights, the others' requests are dropped, counted
 * and logged (rate-limited).
 * run_id is copied into every update. NULL with a message on error. */
WeightServer *wsrv_open(void *zctx, const char *endpoint, const char *run_id, int64_t max_msg_bytes,
                        const CurveKeys *curve, char err[ERR_LEN]);

/* Snapshots the parameters as `version` (replacing the previous one) and precomputes the chunk checksums: params
 * (n_params floats, m's flat layout: a sharded learner's gathered copy, learner_params), or NULL for m's own slab;
 * probe[n_probe] (n_probe 0: none) the weight probe's log-probs under them (model/probe.h), sent as one more tensor,
 * PROBE_TENSOR, after the model's. 0 or ERR_INVAL (version older than the one held). */
int wsrv_publish(WeightServer *ws, const Model *m, const float *params, const float *probe, int n_probe,
                 int64_t version, char err[ERR_LEN]);

/* Answers every WeightResend waiting on the socket (waits up to timeout_ms for the first). Returns the number of
 * chunks sent (>= 0) or a negative code on a socket error. Malformed requests are logged and dropped. */
int wsrv_serve(WeightServer *ws, int timeout_ms, char err[ERR_LEN]);

/* What the server refused since open (issue 38): requests from keys that get no weights, and handshakes that failed
 * (a plaintext client, a protocol error; those ZAP refused are the ZAP handler's count). NULL-safe (zeros). */
void        wsrv_security(const WeightServer *ws, unsigned long long *requests_refused,
                          unsigned long long *handshakes_failed);
int64_t     wsrv_version(const WeightServer *ws);      /* -1 before the first publish */
int         wsrv_chunk_count(const WeightServer *ws);
const char *wsrv_endpoint(const WeightServer *ws);     /* resolved bind address */
void       *wsrv_socket(WeightServer *ws);            /* for zmq_poll; borrowed */
void        wsrv_close(WeightServer *ws);             /* NULL-safe */

#endif
