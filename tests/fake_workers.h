/* tests/fake_workers.h: scripted fake workers that speak the real protocol (common/net/worker.h), one thread each,
 * for the coordinator's tests and its benchmark: a rollout that answers every GenerateGroup at once by a script, a
 * learner that checks every TrainBatch shard and answers with a StepResult, a verifier that scores at once.
 * Header-only (static) because each test or bench is its own program.
 * Bench-only options (off in the tests): FakeRollout.fast sends each GroupResult from a per-worker template (the
 * responses' bytes encoded once per answer class, only the per-group head — run id, step, policy version, group
 * id, attempt — packed per group; byte-identical to protobuf-c's packing, test_fake_workers checks it), and every
 * worker can count what it sends and receives per message type (FakeTraffic) for the benchmark's message table. */
#ifndef DAPO_FAKE_WORKERS_H
#define DAPO_FAKE_WORKERS_H

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "net/worker.h"

enum { MODE_BY_LENGTH = 0, MODE_ALL_WRONG = 1 };

/* Messages and frame bytes (header included) per MsgType, sent (tx) and received (rx) by one scripted worker; only
 * what the script sends and the work messages it receives (not the protocol's own Hello/Welcome/Heartbeats). */
#define FAKE_NTYPES 32
typedef struct {
    uint64_t tx_n[FAKE_NTYPES], tx_bytes[FAKE_NTYPES], rx_n[FAKE_NTYPES], rx_bytes[FAKE_NTYPES];
    uint64_t full;                       /* sends that found the socket's queue full (ZeroMQ's HWM) and waited */
} FakeTraffic;

/* Waits until the worker's socket can take a message again (its send queue was at ZeroMQ's high-water mark),
 * counting the wait; 0 when it can, -1 when the worker is told to stop. A result must not be dropped: the peer's
 * heartbeats renew its leases, so the coordinator would wait for it for ever. (The scripted verifier takes up to
 * 65536 items at once, so a burst of results can fill its 1000-message queue while the coordinator is busy.) */
static inline int fake_wait_writable(Worker *w, FakeTraffic *tr, volatile int *stop) {
    tr->full++;
    while (!*stop) {
        zmq_pollitem_t it = {.socket = worker_socket(w), .events = ZMQ_POLLOUT};
        if (zmq_poll(&it, 1, 10) > 0) return 0;
    }
    return -1;
}

/* worker_send (non-blocking), waiting out a full queue instead of dropping the message. */
static inline int fake_send(Worker *w, FakeTraffic *tr, volatile int *stop, Dapo__MsgType type, const ProtobufCMessage *m) {
    for (;;) {
        uint64_t waits = worker_full_waits(w);
        int rc = worker_send(w, type, m);           /* waits out a full queue itself, up to the lease timeout */
        tr->full += worker_full_waits(w) > waits;
        if (rc != ERR_AGAIN || fake_wait_writable(w, tr, stop)) return rc;
    }
}

static inline void fake_count(uint64_t *n, uint64_t *bytes, int type, size_t frame_bytes) {
    if (type < 0 || type >= FAKE_NTYPES) return;
    n[type]++;
    bytes[type] += frame_bytes;
}

/* A Credit of n sent by worker_add_credit: its frame size (header + packed protobuf). */
static inline size_t fake_credit_bytes(uint32_t n) {
    Dapo__Credit c = DAPO__CREDIT__INIT;
    c.credits = n;
    return NET_HEADER_BYTES + protobuf_c_message_get_packed_size(&c.base);
}

/* One answer class's encoded responses (GroupResult field 6, every response), for FakeRollout.fast. */
typedef struct { uint8_t *body; size_t len; int n; } FakeTemplate;

typedef struct {
    char          endpoint[64], id[32];
    const CurveKeys *curve;            /* CURVE client keys (bench: CURVE on); NULL: plaintext */
    int           mode, duplicate, die_after, capacity;
    int           mute_after;            /* > 0: after this many groups, take GenerateGroups but never answer them
                                          * (nor return their credit) while heartbeating on: a lost result */
    int           muted;                 /* GenerateGroups so ignored */
    int           resp_tokens;           /* tokens per response; 0: 3 to 5 */
    int           text_bytes;            /* bytes of text per response; 0: just the answer line */
    volatile int  stop;
    int           groups_done;
    uint64_t      bytes_sent;            /* GroupResult bytes (packed protobuf) */
    volatile long *gen_step_seen;        /* optional: the highest training step it was asked to generate for */
    int           load_lag_ms;           /* loads a newer policy version this long after it first hears of it */
    int64_t       loaded;                /* the version it holds: stamped on its results, and encoded in every
                                          * response's first token id as 1000 + version (FakeLearner checks it) */
    int           fast;                  /* bench: GroupResults from templates (see the top comment) */
    FakeTemplate  tmpl[3];               /* fast: per answer class (all right, mixed, all wrong); freed at exit */
    FakeTraffic   traffic;
    pthread_t     th;
} FakeRollout;

typedef struct {
    char          endpoint[64];
    const CurveKeys *curve;            /* CURVE client keys; NULL: plaintext */
    volatile int  stop;
    int           batches, bad, seqs;
    long long     last_global_tokens;
    long long     total_steps_seen;      /* TrainBatch.total_training_steps of the last shard */
    int           delay_ms;              /* "trains" this long before answering the last shard of a step */
    volatile long *gen_step_seen;        /* with the rollouts' counter: counts steps whose successor was being */
    int           overlapped;            /* generated while this one trained (async mode) */
    int64_t       version;               /* policy version it holds (Hello, heartbeats); a restart sets it to */
    int64_t       saved_version;         /* the version of its last checkpoint (Control CHECKPOINT, answered) */
    int           checkpoints;           /* CHECKPOINT requests answered */
    int           staleness;             /* rows may lag this many versions behind the shard's policy_version */
    int           rows, stale_rows;      /* rows seen; rows with behaviour version < policy_version */
    int           too_stale;             /* rows outside [policy_version - staleness, policy_version] */
    int           max_lag;               /* the largest lag of a row seen */
    int64_t       last_from;             /* the policy_version of the last step's shards: versions only move forward */
    int           backwards;             /* shards of a new step that trains from an older version than the last */
    int           version_mismatch;      /* rows whose behaviour version is not the one their rollout encoded */
    long          fail_step;             /* > 0: the shards of this step fail with fail_code and fail_text */
    int           fail_code;
    const char   *fail_text;
    FakeTraffic   traffic;
    pthread_t     th;
} FakeLearner;

/* Answers "Answer: 7" (right: every prompt's ground truth is 7) or "Answer: 8" by a script keyed by the prompt
 * length: length % 3 == 0 all right, 1 mixed, 2 all wrong. */
static inline int fake_group_class(const FakeRollout *f, const Dapo__GenerateGroup *g) {
    return f->mode == MODE_ALL_WRONG ? 2 : (int)(g->n_prompt_token_ids % 3);
}

/* Fills the GroupResult the script answers g with (its responses in resp/rp, static token data). */
static inline void fake_group_result(FakeRollout *f, const Dapo__GenerateGroup *g, Dapo__Response resp[64],
                                     Dapo__Response *rp[64], Dapo__GroupResult *r) {
    int n = (int)g->n, cls = fake_group_class(f, g);
    static int32_t ids[1 << 14];
    static _Thread_local int32_t vids[1 << 14];      /* ids with the first one = 1000 + the version it holds */
    static float lps[1 << 14];
    static char text[2][1 << 16];
    if (!ids[0]) {
        for (int i = 0; i < (1 << 14); i++) { ids[i] = 16 + i % 64; lps[i] = -0.5f - (float)(i % 7) / 8; }
        for (int k = 0; k < 2; k++) {
            memset(text[k], 'x', sizeof text[k]);
            memcpy(text[k], k ? "Answer: 8\n" : "Answer: 7\n", 10);
        }
    }
    memcpy(vids, ids, sizeof vids);
    vids[0] = 1000 + (int32_t)f->loaded;
    for (int i = 0; i < n && i < 64; i++) {
        dapo__response__init(&resp[i]);
        int right = cls == 0 || (cls == 1 && i % 2 == 0);
        resp[i].token_ids = f->fast ? ids : vids;        /* fast: one template for every version */
        resp[i].policy_version = f->fast ? 0 : f->loaded;   /* fast: templates, the group's version serves */
        resp[i].n_token_ids = f->resp_tokens ? (size_t)f->resp_tokens : 3 + (size_t)(i % 3);
        resp[i].logprobs = lps;
        resp[i].n_logprobs = resp[i].n_token_ids;
        resp[i].finish_reason = "stop";
        resp[i].text.data = (uint8_t *)text[!right];
        resp[i].text.len = f->text_bytes > 9 ? (size_t)f->text_bytes : 9;
        rp[i] = &resp[i];
    }
    dapo__group_result__init(r);
    r->run_id = g->run_id;
    r->step = g->step;
    r->policy_version = f->loaded;
    r->group_id = g->group_id;
    r->attempt = g->attempt;
    r->n_responses = (size_t)(n < 64 ? n : 64);
    r->responses = rp;
    r->error = "";
}

/* The GroupResult frame for g from the worker's template: protobuf-c packs fields in number order, so the frame is
 * the header, the head fields 1-5 (packed per group), then the responses (field 6, encoded once per answer class);
 * gen_seconds and error are 0 / "" and not on the wire. Writes into a new ZeroMQ message; returns its size, 0 on
 * failure. */
static inline size_t fake_group_frame(FakeRollout *f, const Dapo__GenerateGroup *g, zmq_msg_t *out) {
    int cls = fake_group_class(f, g);
    FakeTemplate *t = &f->tmpl[cls];
    if (!t->body || t->n != (int)g->n) {            /* encode this class's responses once */
        Dapo__Response resp[64], *rp[64];
        Dapo__GroupResult r;
        fake_group_result(f, g, resp, rp, &r);
        r.run_id = "";                              /* proto3: empty / zero fields are not packed */
        r.step = r.policy_version = 0;
        for (size_t i = 0; i < r.n_responses; i++) resp[i].policy_version = 0;   /* the group's version serves */
        r.group_id = 0;
        r.attempt = 0;
        xfree(t->body);
        t->len = protobuf_c_message_get_packed_size(&r.base);
        t->body = xmalloc(t->len ? t->len : 1);
        protobuf_c_message_pack(&r.base, t->body);
        t->n = (int)g->n;
    }
    Dapo__GroupResult h = DAPO__GROUP_RESULT__INIT;
    h.run_id = g->run_id;
    h.step = g->step;
    h.policy_version = f->loaded;
    h.group_id = g->group_id;
    h.attempt = g->attempt;
    h.error = "";
    size_t hn = protobuf_c_message_get_packed_size(&h.base), len = NET_HEADER_BYTES + hn + t->len;
    if (zmq_msg_init_size(out, len)) return 0;
    uint8_t *p = zmq_msg_data(out);
    net_encode_into(DAPO__MSG_TYPE__MSG_GROUP_RESULT, &h.base, hn + t->len, p);   /* header + head fields */
    memcpy(p + NET_HEADER_BYTES + hn, t->body, t->len);
    return len;
}

static inline void reply_group(FakeRollout *f, Worker *w, const Dapo__GenerateGroup *g, int times) {
    if (f->fast) {
        for (int k = 0; k < times; k++) {
            zmq_msg_t m;
            size_t len = fake_group_frame(f, g, &m);
            if (!len) return;
            while (zmq_msg_send(&m, worker_socket(w), ZMQ_DONTWAIT) < 0)
                if (zmq_errno() != EAGAIN || fake_wait_writable(w, &f->traffic, &f->stop)) { zmq_msg_close(&m); break; }
            fake_count(f->traffic.tx_n, f->traffic.tx_bytes, DAPO__MSG_TYPE__MSG_GROUP_RESULT, len);
            if (k == 0) f->bytes_sent += len - NET_HEADER_BYTES;
        }
        return;
    }
    Dapo__Response resp[64], *rp[64];
    Dapo__GroupResult r;
    fake_group_result(f, g, resp, rp, &r);
    size_t packed = protobuf_c_message_get_packed_size(&r.base);
    for (int t = 0; t < times; t++) {
        fake_send(w, &f->traffic, &f->stop, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &r.base);
        fake_count(f->traffic.tx_n, f->traffic.tx_bytes, DAPO__MSG_TYPE__MSG_GROUP_RESULT, NET_HEADER_BYTES + packed);
    }
    f->bytes_sent += packed;
}

static inline void *rollout_main(void *arg) {
    FakeRollout *f = arg;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    WorkerOpts o = {.role = DAPO__ROLE__ROLE_ROLLOUT, .worker_id = f->id, .coordinator = f->endpoint,
                    .capacity = (uint32_t)f->capacity, .heartbeat_ms = 100, .lease_timeout_s = 5, .curve = f->curve};
    Worker *w = worker_open(ctx, &o, err);
    int dead = 0;
    int64_t loaded = -1, behind_since = 0;             /* when it first heard of a version newer than its own */
    uint32_t loaded_inc = 0;                           /* the run incarnation of what it holds */
    f->loaded = 0;
    while (w && !f->stop) {
        if (dead) { usleep(20000); continue; }          /* hung: no heartbeats, no answers */
        NetMsg m;
        int rc = worker_poll(w, &m, 20, err);
        int64_t want = worker_coordinator_version(w);
        uint32_t inc = worker_coordinator_incarnation(w);
        if (inc != loaded_inc) loaded = -1;              /* the run rolled back: load its version again (recover.c) */
        if (want > loaded && !behind_since) behind_since = clock_ms();
        if (want > loaded && (loaded < 0 || clock_ms() - behind_since >= f->load_lag_ms)) {   /* "loads" it, acks it */
            behind_since = 0;
            loaded = want;
            loaded_inc = inc;
            f->loaded = loaded;
            worker_set_status(w, 0, loaded);
            worker_set_incarnation(w, inc);
            Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
            ack.version = loaded;
            ack.incarnation = inc;
            ack.worker_id = f->id;
            fake_send(w, &f->traffic, &f->stop, DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
            fake_count(f->traffic.tx_n, f->traffic.tx_bytes, DAPO__MSG_TYPE__MSG_WEIGHT_ACK,
                       NET_HEADER_BYTES + protobuf_c_message_get_packed_size(&ack.base));
        }
        if (rc != 1) continue;
        fake_count(f->traffic.rx_n, f->traffic.rx_bytes, m.type, m.bytes);
        if (m.type == DAPO__MSG_TYPE__MSG_GENERATE_GROUP) {
            Dapo__GenerateGroup *g = (Dapo__GenerateGroup *)m.msg;
            if (f->die_after && f->groups_done >= f->die_after) { dead = 1; net_msg_free(&m); continue; }
            if (f->mute_after && f->groups_done >= f->mute_after) { f->muted++; net_msg_free(&m); continue; }
            if (f->gen_step_seen && !g->validation && g->step > *f->gen_step_seen) *f->gen_step_seen = g->step;
            reply_group(f, w, g, f->duplicate ? 2 : 1);
            worker_add_credit(w, g->n);
            fake_count(f->traffic.tx_n, f->traffic.tx_bytes, DAPO__MSG_TYPE__MSG_CREDIT, fake_credit_bytes(g->n));
            f->groups_done++;
        }
        net_msg_free(&m);
    }
    if (w && dead) { int z = 0; zmq_setsockopt(worker_socket(w), ZMQ_LINGER, &z, sizeof z); }
    worker_close(w, dead ? NULL : "test over");
    zmq_ctx_term(ctx);
    for (int k = 0; k < 3; k++) { xfree(f->tmpl[k].body); f->tmpl[k].body = NULL; }
    return NULL;
}

static inline void *learner_main(void *arg) {
    FakeLearner *f = arg;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    WorkerOpts o = {.role = DAPO__ROLE__ROLE_LEARNER, .worker_id = "learner-0", .coordinator = f->endpoint,
                    .capacity = 1, .world_size = 1, .heartbeat_ms = 100, .lease_timeout_s = 5,
                    .policy_version = f->version, .fresh = 1, .curve = f->curve};   /* as loaded: it never trains */
    Worker *w = worker_open(ctx, &o, err);
    while (w && !f->stop) {
        NetMsg m;
        if (worker_poll(w, &m, 20, err) != 1) continue;
        fake_count(f->traffic.rx_n, f->traffic.rx_bytes, m.type, m.bytes);
        if (m.type == DAPO__MSG_TYPE__MSG_CONTROL &&
            ((Dapo__Control *)m.msg)->cmd == DAPO__CONTROL_CMD__CONTROL_CHECKPOINT) {   /* "saves", answers */
            Dapo__Control done = DAPO__CONTROL__INIT;
            done.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT_DONE;
            done.step = ((Dapo__Control *)m.msg)->step;
            done.reason = "";
            done.code = 0;
            f->saved_version = f->version;
            f->checkpoints++;
            fake_send(w, &f->traffic, &f->stop, DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
        }
        if (m.type == DAPO__MSG_TYPE__MSG_TRAIN_BATCH) {
            Dapo__TrainBatch *tb = (Dapo__TrainBatch *)m.msg;
            size_t nseq = tb->n_offsets - 1, resp = 0;
            for (size_t i = 0; i < nseq; i++) resp += tb->offsets[i + 1] - tb->offsets[i] - tb->prompt_lengths[i];
            if (resp != tb->n_response_mask || resp != tb->n_advantages || resp != tb->n_rollout_logprobs ||
                tb->n_input_ids != tb->offsets[nseq] || tb->global_response_tokens < resp || nseq != tb->n_group_ids)
                f->bad++;
            f->batches++;
            f->seqs += (int)nseq;
            for (size_t i = 0; i < nseq && tb->n_behaviour_versions == nseq; i++) {
                int64_t v = tb->behaviour_versions[i], lag = tb->policy_version - v;
                int32_t first = tb->prompt_lengths[i] < tb->offsets[i + 1] - tb->offsets[i]
                                    ? tb->input_ids[tb->offsets[i] + tb->prompt_lengths[i]] : -1;
                f->rows++;
                f->stale_rows += lag > 0;
                f->too_stale += lag < 0 || lag > f->staleness;
                if (lag > f->max_lag) f->max_lag = (int)lag;
                f->version_mismatch += first != 1000 + (int32_t)v;
            }
            if (tb->n_behaviour_versions != nseq) f->bad++;
            f->backwards += tb->policy_version < f->last_from;
            f->last_from = tb->policy_version;
            f->last_global_tokens = (long long)tb->global_response_tokens;
            f->total_steps_seen = (long long)tb->total_training_steps;
            Dapo__StepResult__MetricsEntry me = DAPO__STEP_RESULT__METRICS_ENTRY__INIT, *mes[1] = {&me};
            me.key = "actor/pg_loss";
            me.value = 0.25;
            Dapo__StepResult sr = DAPO__STEP_RESULT__INIT;
            sr.run_id = tb->run_id;
            sr.step = tb->step;
            sr.mini_batch_index = tb->mini_batch_index;
            sr.n_metrics = 1;
            sr.metrics = mes;
            sr.error = "";
            sr.new_policy_version = tb->last_of_step ? tb->policy_version + 1 : 0;
            if (f->fail_step > 0 && tb->step == f->fail_step) {
                sr.code = f->fail_code;
                sr.error = (char *)(f->fail_text ? f->fail_text : "");
                sr.n_metrics = 0;
                sr.new_policy_version = 0;
            }
            if (tb->last_of_step && f->delay_ms) {
                for (int t = 0; t < f->delay_ms; t += 10) {           /* keep heartbeating while "training" */
                    NetMsg x;
                    if (worker_poll(w, &x, 10, err) == 1) net_msg_free(&x);
                }
                if (f->gen_step_seen && *f->gen_step_seen > tb->step) f->overlapped++;
            }
            if (tb->last_of_step) {
                f->version = tb->policy_version + 1;
                worker_set_status(w, 0, f->version);
            }
            fake_send(w, &f->traffic, &f->stop, DAPO__MSG_TYPE__MSG_STEP_RESULT, &sr.base);
            fake_count(f->traffic.tx_n, f->traffic.tx_bytes, DAPO__MSG_TYPE__MSG_STEP_RESULT,
                       NET_HEADER_BYTES + protobuf_c_message_get_packed_size(&sr.base));
        }
        net_msg_free(&m);
    }
    worker_close(w, "test over");
    zmq_ctx_term(ctx);
    return NULL;
}

/* A verifier that scores every response at once: acc 1 when its text starts with "Answer: 7". */
typedef struct {
    char          endpoint[64];
    const CurveKeys *curve;            /* CURVE client keys; NULL: plaintext */
    char          id[32];                /* "" : "verifier-fake" */
    int           capacity;              /* responses held at once; 0: 65536 */
    int           mute;                  /* takes ScoreRequests but never answers them (nor returns their credit)
                                          * while heartbeating on: a lost result */
    int           muted;                 /* ScoreRequests so ignored */
    volatile int  stop;
    FakeTraffic   traffic;
    pthread_t     th;
} FakeVerifier;

static inline void *verifier_main(void *arg) {
    FakeVerifier *f = arg;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    WorkerOpts o = {.role = DAPO__ROLE__ROLE_VERIFIER, .worker_id = f->id[0] ? f->id : "verifier-fake",
                    .coordinator = f->endpoint, .capacity = f->capacity > 0 ? (uint32_t)f->capacity : 1 << 16,
                    .heartbeat_ms = 100, .lease_timeout_s = 5, .curve = f->curve};
    Worker *w = worker_open(ctx, &o, err);
    while (w && !f->stop) {
        NetMsg m;
        if (worker_poll(w, &m, 20, err) != 1) continue;
        fake_count(f->traffic.rx_n, f->traffic.rx_bytes, m.type, m.bytes);
        if (m.type == DAPO__MSG_TYPE__MSG_SCORE_REQUEST && f->mute) {
            f->muted++;
        } else if (m.type == DAPO__MSG_TYPE__MSG_SCORE_REQUEST) {
            Dapo__ScoreRequest *rq = (Dapo__ScoreRequest *)m.msg;
            Dapo__Score sc[64], *scp[64];
            size_t n = rq->n_items < 64 ? rq->n_items : 64;
            for (size_t i = 0; i < n; i++) {
                dapo__score__init(&sc[i]);
                Dapo__ScoreItem *it = rq->items[i];
                sc[i].item_id = it->item_id;
                sc[i].attempt = it->attempt;
                sc[i].acc = it->response_text.len >= 9 && !memcmp(it->response_text.data, "Answer: 7", 9);
                sc[i].score = sc[i].acc ? 1.0f : -1.0f;
                sc[i].has_pred = 1;
                sc[i].error = "";
                scp[i] = &sc[i];
            }
            Dapo__ScoreResult r = DAPO__SCORE_RESULT__INIT;
            r.run_id = rq->run_id;
            r.step = rq->step;
            r.request_id = rq->request_id;
            r.attempt = rq->attempt;
            r.n_scores = n;
            r.scores = scp;
            fake_send(w, &f->traffic, &f->stop, DAPO__MSG_TYPE__MSG_SCORE_RESULT, &r.base);
            worker_add_credit(w, (uint32_t)rq->n_items);
            fake_count(f->traffic.tx_n, f->traffic.tx_bytes, DAPO__MSG_TYPE__MSG_SCORE_RESULT,
                       NET_HEADER_BYTES + protobuf_c_message_get_packed_size(&r.base));
            fake_count(f->traffic.tx_n, f->traffic.tx_bytes, DAPO__MSG_TYPE__MSG_CREDIT,
                       fake_credit_bytes((uint32_t)rq->n_items));
        }
        net_msg_free(&m);
    }
    worker_close(w, "done");
    zmq_ctx_term(ctx);
    return NULL;
}

#endif
