/* common/net/worker.h: the worker side of the dapo protocol, one state machine shared by rollout, verifier and
 * learner (docs/design.md §1).
 *
 *   CONNECTING --Hello--> (Welcome accepted) --> READY --(coordinator silent > lease timeout, or it says it does
 *        ^                                         |      not know us: it restarted)--> CONNECTING (Hello again)
 *        |            (Welcome refused) --> REFUSED (terminal: e.g. protocol versions differ, both named)
 *   worker_close(): Goodbye --> CLOSED
 *
 * In READY the worker sends a Heartbeat every heartbeat_ms (renewing all its leases on the coordinator) and,
 * right after each Welcome, one Credit for its free capacity (capacity - busy); afterwards the daemon adds credit
 * as items finish. Protocol messages (Welcome, Heartbeat, ErrorReply) are handled inside worker_poll; work
 * messages are handed to the daemon. Single-threaded: call everything from the daemon's loop thread.
 * Not here: what the work is (the services), the coordinator side (services/coordinator). */
#ifndef DAPO_WORKER_H
#define DAPO_WORKER_H

#include "net/net.h"

typedef enum { WORKER_CONNECTING = 0, WORKER_READY, WORKER_REFUSED, WORKER_CLOSED } WorkerState;

typedef struct {
    Dapo__Role  role;
    const char *worker_id;          /* stable name; also the ZeroMQ routing id (copied) */
    const char *coordinator;        /* endpoint to connect to, e.g. "tcp://127.0.0.1:5555" */
    uint32_t    capacity;           /* items held at once (rollout: sequences) */
    uint64_t    capacity_tokens;    /* rollout: KV-cache tokens, else 0 */
    uint32_t    rank, world_size;   /* learner */
    int         heartbeat_ms;       /* until a Welcome says otherwise [1000] */
    double      lease_timeout_s;    /* coordinator silence that triggers a new Hello [10] */
    int64_t     max_msg_bytes;      /* [256 MiB] */
    const char *build_info;         /* free text for the worker table */
    const char *run_config;         /* Hello.run_config: its run keys (config_run_keys; copied), or NULL: not sent */
    int64_t     policy_version;     /* weights version held at start, reported in the first Hello (-1: none) */
    int         fresh;              /* learner: Hello.fresh of the first Hello (worker_set_fresh changes it) */
    uint32_t    restarts;           /* Hello.restarts: times its supervisor restarted it (daemon_restarts) */
    const CurveKeys *curve;         /* CURVE client keys (borrowed; must outlive the worker) [NULL: plaintext] */
    int         send_wait_ms;       /* longest worker_send waits out a full send queue [0: lease_timeout_s] */
    const char *health_file;        /* rewritten at most once a second from worker_poll, whatever the state, with
                                     * "ready" (registered) or "connecting": a liveness probe reads its age, a
                                     * readiness probe its word (Kubernetes, issue 19) [NULL/"": off] */
    int         config_only;        /* a probe (Hello.config_only): READY once the coordinator accepts it, its Welcome
                                     * (worker_welcome) holding the run config; no credit, heartbeat or Goodbye, and
                                     * nothing registered. daemon_init takes the run keys with one [0] */
} WorkerOpts;

typedef struct Worker Worker;

/* Connects a DEALER to o->coordinator and queues the first Hello. Returns NULL with a message on failure.
 * zctx is borrowed and must outlive the worker. */
Worker *worker_open(void *zctx, const WorkerOpts *o, char err[ERR_LEN]);

/* Runs the protocol for up to timeout_ms (0: non-blocking): sends due heartbeats / hellos, receives and handles
 * protocol messages. Returns 1 with a work message in *out (caller frees with net_msg_free), 0 when the time
 * passed with nothing for the caller or, early, as soon as the coordinator announced a newer policy version
 * (worker_coordinator_version; a rollout starts fetching it then, not at the end of its timeout), ERR_VERSION / ERR_INVAL when the coordinator refused us (err says why,
 * naming both versions on a mismatch; the state is REFUSED), or another negative code on a socket error.
 * Malformed frames are logged and dropped. */
int worker_poll(Worker *w, NetMsg *out, int timeout_ms, char err[ERR_LEN]);

/* Sends a message to the coordinator (results, acks, lease renewals). A result must not be lost while this
 * worker's heartbeats keep renewing its lease, so a send that finds the queue full (ZeroMQ's high-water mark: the
 * coordinator is reading slower than results arrive) waits for room, up to o.send_wait_ms (default: the lease
 * timeout), instead of dropping the message; it blocks the caller meanwhile (no heartbeats are due to a
 * coordinator that is not reading). Only a READY worker waits; after a wait that long it registers again (as
 * after coordinator silence), so later sends do not wait too. Returns 0, ERR_AGAIN (not READY and the queue is
 * full, or after waiting that long: logged), or another negative code (net_send). */
int worker_send(Worker *w, Dapo__MsgType type, const ProtobufCMessage *m);

/* Announces n more free slots (after finishing items). Sent at once when READY and the send queue has room;
 * otherwise kept and sent by the next worker_poll / worker_add_credit (or folded into the credit that follows the
 * next Welcome), so no credit is ever lost. 0 or a negative code other than ERR_AGAIN. */
int worker_add_credit(Worker *w, uint32_t n);

/* How many times worker_send found the send queue full and waited (for tests and benchmarks). */
uint64_t worker_full_waits(const Worker *w);

/* What the next heartbeats report: items in progress and the loaded policy version. busy also sets the credit
 * offered after a (re-)Welcome: capacity - busy. */
void worker_set_status(Worker *w, uint32_t busy, int64_t policy_version);

/* What the next heartbeats report of this worker's own servers (issue 38; the coordinator shows it per worker under
 * /api/status): handshakes refused by its ZAP handler, handshakes failed otherwise, messages dropped for their key.
 * Counts since the process started. */
void worker_set_security(Worker *w, uint64_t handshakes_refused, uint64_t handshakes_failed, uint64_t messages_refused);

WorkerState worker_state(const Worker *w);
const char *worker_state_name(WorkerState s);
/* The Welcome of the current session (run_id, heartbeat, weights endpoint, config); NULL before one arrived. */
const Dapo__Welcome *worker_welcome(const Worker *w);
/* The coordinator's current policy version, from its last Welcome or Heartbeat (-1 before any): a rollout
 * that holds an older version fetches the new weights. */
int64_t worker_coordinator_version(const Worker *w);
/* The run's incarnation, from the last Welcome or Heartbeat (0 before any): bumped by the coordinator at every
 * rollback to a checkpoint, so that the same version number never means two sets of weights. A rollout whose weights
 * are of another incarnation loads the coordinator's version again, whatever its number. */
uint32_t worker_coordinator_incarnation(const Worker *w);
/* The incarnation of the weights this worker holds (what Hello and the heartbeats report; 0 at start). */
void     worker_set_incarnation(Worker *w, uint32_t incarnation);
/* Learner: what Hello.fresh says from now on (1 while its weights are as loaded from disk). */
void     worker_set_fresh(Worker *w, int fresh);
/* Number of Welcomes received: >1 means the worker re-registered (e.g. the coordinator restarted). */
int worker_sessions(const Worker *w);
/* The DEALER socket, for zmq_poll alongside the daemon's other sockets. Borrowed. */
void *worker_socket(Worker *w);

/* Sends Goodbye (when connected), closes the socket, frees w. NULL-safe. */
void worker_close(Worker *w, const char *reason);

#endif
