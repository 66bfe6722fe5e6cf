/* services/coordinator/coord.h: the coordinator's state, shared by its modules (DESIGN.md §1).
 * One libuv loop owns everything: the ZeroMQ ROUTER (joined through uv_poll on ZMQ_FD), a cron timer, the
 * dashboard's HTTP server and the signal handlers. Single-threaded: no locks.
 * Modules: registry.c (workers: hello, heartbeats, credit, leases of workers), dashboard.c (HTTP routes),
 * main.c (loop, ZeroMQ hub, signals). */
#ifndef DAPO_COORD_H
#define DAPO_COORD_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "core/config.h"
#include "core/metrics.h"
#include "net/net.h"
#include "http.h"

typedef enum { WORKER_ALIVE = 0, WORKER_LOST, WORKER_GONE } WorkerLife;

typedef struct {
    uint8_t     rid[NET_PEER_MAX];     /* ZeroMQ routing id */
    size_t      rid_len;
    char        address[64];           /* the connection's peer address at its last Hello ("Peer-Address": the IP
                                        * for TCP); "" where ZeroMQ gives none (ipc): the dashboard shows the rid */
    char        id[128];               /* worker_id from Hello */
    char        build_info[128];
    Dapo__Role  role;
    WorkerLife  life;
    uint32_t    capacity;              /* items */
    uint64_t    capacity_tokens;
    uint32_t    credit;                /* items we may still send it */
    uint32_t    busy;                  /* from its heartbeat */
    double      load;
    int64_t     policy_version;
    uint32_t    rank, world_size;
    int64_t     registered_ms, last_seen_ms;   /* monotonic */
    uint64_t    heartbeats;
} WorkerEntry;

/* The latest sampled responses shown on the dashboard (a ring of COORD_SAMPLES). Strings owned (xmalloc). */
#define COORD_SAMPLES 16
typedef struct {
    long   step;
    char  *data_source, *prompt, *response, *ground_truth, *pred;   /* response text as bytes, NUL-terminated */
    float  score;
    int    acc;
    int    response_tokens;
    char   finish_reason[8];
} SampleView;

/* Every prompt group is in exactly one of these states (DESIGN.md §7); c->group_counts counts them over the
 * run and always adds up to the groups created. */
typedef enum {
    GS_QUEUED = 0, GS_LEASED, GS_GENERATED, GS_SCORING, GS_KEPT, GS_FILTERED, GS_SURPLUS, GS_CANCELLED,
    GS_TRAINED, GS_VALIDATED, GS_COUNT
} GroupState;

typedef struct {
    uint64_t   id;
    uint32_t   attempt;           /* generation attempt (+1 on every re-dispatch) */
    uint32_t   score_attempt;     /* scoring attempt */
    GroupState state;
    int        item;              /* dataset index (train or validation set) */
    long       order;             /* position in the epoch order: batch alignment key */
    int        round;             /* generation round of the step, 1-based */
    int        validation;
    int        n;                 /* responses */
    int        worker;            /* index into c->workers holding its lease, -1 none */
    Dapo__GroupResult *result;    /* owned once generated, with result_arena (net_unpacked_free) */
    NetArena  *result_arena;
    float     *score, *acc, *penalty;   /* [n] from the verifier (score includes the penalty) */
    char     **pred;              /* [n] predictions (validation maj@k), xmalloc'd */
    int64_t    lease_ms;
} Group;

typedef enum { PH_IDLE = 0, PH_VALIDATE, PH_GENERATE, PH_BATCH_READY, PH_TRAIN, PH_WEIGHTS, PH_DONE, PH_FAILED } Phase;

typedef struct Engine Engine;     /* steps.c */

/* A send buffer handed to ZeroMQ without a copy (zmq_msg_init_data) and reused once ZeroMQ lets go of it: the
 * multi-MB TrainBatch shards of every step go out without a fresh allocation (page faults) and a copy each. busy is
 * cleared by ZeroMQ's I/O thread (the free callback), hence atomic. */
#define COORD_ZC_BUFS 16
typedef struct {
    uint8_t    *p;                     /* xmalloc'd, cap bytes */
    size_t      cap;
    atomic_int  busy;                  /* 1 while ZeroMQ holds it */
} ZcBuf;

/* The engine's resumable state as of the last finished step (what a coordinator checkpoint holds). */
typedef struct {
    long     step;                     /* finished steps */
    int64_t  policy_version;
    int      epoch;
    long     cursor, consumed;
    uint64_t next_group_id;
    int      data_seed;
    long     n_train;                  /* prompts in the training set: a resume with other data is refused */
    uint64_t group_counts[GS_COUNT];
} EngineSnapshot;

/* ckpt.c's state: the last checkpoint both sides hold and the one asked of the learner (see ckpt.c). */
typedef struct {
    EngineSnapshot saved, pending;
    int            has_saved, has_pending;
    int            asked;              /* the pending one was sent to learner rank 0 */
    int            undecided;          /* resuming: learner rank 0's Hello picks saved or pending */
    char           resume_path[1024];
} CkptState;

typedef struct Coord {
    Config       cfg;
    uv_loop_t   *loop;
    void        *zctx, *router;
    char         endpoint[128];        /* resolved ROUTER endpoint */
    uv_poll_t    zpoll;
    uv_timer_t   cron;
    uv_signal_t  sigterm, sigint;
    HttpServer  *http;
    WorkerEntry *workers;              /* xrealloc'd array; entries are never removed (the table shows them) */
    int          nworkers, cap_workers;
    char         run_id[64];
    int64_t      step, policy_version;
    int64_t      started_ms;
    int          stopping, sigints;    /* stopping: 1 finishing the step in training and its checkpoint, 2 exiting */
    int          stop_failed;          /* the stop ran out of cluster.stop_timeout_s: exit status 1 */
    int          lock_fd;              /* coordinator.lock in trainer.default_local_dir (ckpt_lock), or -1 */
    int64_t      stop_deadline_ms;     /* monotonic; cluster.stop_timeout_s after the stop request */
    uint64_t     msgs_in, msgs_bad;
    int          need_drain;           /* a send happened: ZMQ_EVENTS must be re-read (ZMQ_FD is edge-triggered) */
    ZcBuf        zc[COORD_ZC_BUFS];    /* coord_send_zc's buffers, freed after zmq_ctx_term */

    /* What the dashboard shows (history.c). */
    Metrics     *history;              /* one metric set per finished step (or validation), in order */
    int          nhistory, cap_history;
    SampleView   samples[COORD_SAMPLES];
    int          nsamples, sample_next;
    char        *config_yaml;          /* the resolved config as YAML (xmalloc'd) */
    char        *token;                /* bearer token for /api/control/..., from cluster.token_file; NULL: none set */
    FILE        *metrics_file;         /* metrics JSONL (trainer.default_local_dir/metrics.jsonl), or NULL */
    int          paused;
    char         status_line[256];     /* what the coordinator is doing now, in words (shown on the page) */

    /* The training loop (steps.c). */
    Engine      *engine;               /* NULL when no data.train_files: registry and dashboard only */
    uint64_t     group_counts[GS_COUNT];
    CkptState    ckpt;
} Coord;

/* registry.c */
void registry_on_message(Coord *c, NetMsg *m);         /* every message from a worker */
void registry_on_bad_version_hello(Coord *c, NetMsg *m); /* refuses it, naming both versions */
void registry_cron(Coord *c);                          /* marks workers lost after the lease timeout */
WorkerEntry *registry_find(Coord *c, const uint8_t *rid, size_t rid_len);
const char *role_name(Dapo__Role r);
const char *life_name(WorkerLife l);
int  registry_count(const Coord *c, Dapo__Role role, WorkerLife life);

/* main.c */
void coord_drain(Coord *c);                            /* reads every pending ZeroMQ message */
int  coord_send(Coord *c, const WorkerEntry *w, Dapo__MsgType type, const ProtobufCMessage *m);
/* Zero-copy sends of large frames (the TrainBatch shards). coord_zc_frame returns a buffer of len bytes to write
 * the whole frame into (header + payload, net_encode_into): one of c->zc's reused buffers (*zb set), or, while
 * all COORD_ZC_BUFS are in flight, a one-off xmalloc'd one (*zb NULL). coord_zc_send hands it to ZeroMQ, which
 * owns it from then on, sent or not (a pool buffer is free again once ZeroMQ lets go of it). Returns as
 * coord_send: 0, ERR_AGAIN, ERR_CLOSED (peer gone) or -errno. */
uint8_t *coord_zc_frame(Coord *c, size_t len, ZcBuf **zb);
int  coord_zc_send(Coord *c, const WorkerEntry *w, Dapo__MsgType type, uint8_t *frame, size_t len, ZcBuf *zb);
void coord_send_error(Coord *c, const uint8_t *rid, size_t rid_len, int code, Dapo__MsgType in_reply_to,
                      const char *msg);

/* steps.c: dataset, dispatch, dynamic sampling, batches, validation (DESIGN.md §1 steps 1-5). */
int  engine_start(Coord *c, char err[ERR_LEN]);        /* loads the data; NULL engine when none configured */
void engine_tick(Coord *c);                            /* advances the state machine; called from cron and after messages */
void engine_on_message(Coord *c, WorkerEntry *w, NetMsg *m);   /* GroupResult, ScoreResult, StepResult, WeightAck */
void engine_on_worker_lost(Coord *c, int worker);      /* its leases go back to the queue */
/* Takes back leases held longer than cluster.max_lease_s (generation) / cluster.max_score_lease_s (scoring) even
 * from a worker that still heartbeats: the group goes back to the queue with attempt + 1, the worker gets a Cancel,
 * a warning names worker and group, /api/status "leases" counts it. Called from the cron (every 100 ms). */
void engine_reclaim_leases(Coord *c);
void engine_free(Coord *c);
Phase engine_phase(const Coord *c);                    /* PH_IDLE when there is no engine */
struct json_t;
void engine_status_fill(Coord *c, struct json_t *status);   /* adds "phase", "groups" {state: count, created} */
const char *group_state_name(GroupState s);
const char *phase_name(Phase p);

int  engine_snapshot(const Coord *c, EngineSnapshot *out);          /* ERR_NOTFOUND without an engine */
/* ERR_INVAL when s was taken with other training data (prompt count, data.seed) than the engine has now. */
int  engine_check_snapshot(const Coord *c, const EngineSnapshot *s, char err[ERR_LEN]);
int  engine_restore(Coord *c, const EngineSnapshot *s, char err[ERR_LEN]);
void engine_hold_resume(Coord *c);     /* a resume is coming: no validation-before-training, whichever step it is */
void engine_validate_next(Coord *c);   /* validation before the next step (when there are validation files) */
/* Stops the training loop with a message shown on the dashboard's status line and logged (phase "failed"). */
void engine_fail(Coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ckpt.c: the two-sided checkpoint (coordinator.json in trainer.default_local_dir + the learner's weights), asked for
 * at every trainer.save_freq step, the last step, on request and on stop; resumed by trainer.resume_mode auto /
 * resume_path once learner rank 0 says which checkpoint it loaded. */
/* Asks for the checkpoint of the last finished step: writes the coordinator's side as pending and asks learner rank
 * 0 for the weights. 0 also when that step is saved or already asked; ERR_AGAIN while resuming or without learner
 * rank 0; ERR_UNSUPPORTED without a training run; ERR_IO when the file cannot be written. */
int  ckpt_request(Coord *c, char err[ERR_LEN]);
int  ckpt_done(const Coord *c);        /* 1: the last finished step is saved on both sides (or there is none to save) */
int  ckpt_waiting(const Coord *c);     /* 1: its checkpoint was asked of the learner, no answer yet */
void ckpt_on_control(Coord *c, WorkerEntry *w, const Dapo__Control *m);   /* the learner's CHECKPOINT_DONE */
void ckpt_on_learner_hello(Coord *c, const WorkerEntry *w);   /* resume decision / version check (rank 0) */
int  ckpt_resume(Coord *c, char err[ERR_LEN]);                /* reads coordinator.json; 0 also when there is none */
/* Locks trainer.default_local_dir (coordinator.lock, flock, our pid in it) for this process: ERR_INVAL naming the
 * other coordinator's pid when a live one holds it, ERR_IO when the file cannot be made. */
int  ckpt_lock(Coord *c, char err[ERR_LEN]);
void ckpt_set_aside_metrics(Coord *c);   /* a run that resumes nothing: an earlier run's metrics.jsonl is renamed */

/* history.c: the metric history (each entry has a "step" metric), samples, and the control actions the dashboard
 * triggers. coord_record_step copies m and appends a line to the metrics JSONL. */
void coord_record_step(Coord *c, long step, const Metrics *m);
void coord_history_append(Coord *c, long step, const Metrics *m);   /* history only, no JSONL line */
void coord_record_sample(Coord *c, const SampleView *s);      /* copies the strings */
void coord_history_free(Coord *c);
void coord_pause(Coord *c);                                   /* stop dispatching new groups */
void coord_resume(Coord *c);
int  coord_checkpoint_now(Coord *c, char err[ERR_LEN]);       /* ckpt_request */
/* As SIGTERM: stop generating, let the step in training finish, checkpoint it on both sides, then exit 0 — bounded by
 * cluster.stop_timeout_s. A second call exits at once. */
void coord_stop(Coord *c);
void coord_exit(Coord *c);                                    /* tells the workers, closes the dashboard, ends the loop */

/* dashboard.c: the HTTP routes (the handler given to http_listen; coord is the Coord) and, from dashboard_init
 * (called once after http_listen), the cluster.dashboard_demo_steps test hook's timer. 0 or ERR_IO. */
void dashboard_handle(void *coord, const HttpRequest *req, HttpResponse *resp);
int  dashboard_init(Coord *c, char err[ERR_LEN]);

#endif
