/* tests/fake_workers.h: scripted fake workers that speak the real protocol (common/net/worker.h), one thread each,
 * for the coordinator's tests and its benchmark: a rollout that answers every GenerateGroup at once by a script, a
 * learner that checks every TrainBatch shard and answers with a StepResult, a verifier that scores at once.
 * Header-only (static) because each test or bench is its own program. */
#ifndef DAPO_FAKE_WORKERS_H
#define DAPO_FAKE_WORKERS_H

#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "net/worker.h"

enum { MODE_BY_LENGTH = 0, MODE_ALL_WRONG = 1 };

typedef struct {
    char          endpoint[64], id[32];
    int           mode, duplicate, die_after, capacity;
    int           resp_tokens;           /* tokens per response; 0: 3 to 5 */
    int           text_bytes;            /* bytes of text per response; 0: just the answer line */
    volatile int  stop;
    int           groups_done;
    uint64_t      bytes_sent;            /* GroupResult bytes (packed protobuf) */
    volatile long *gen_step_seen;        /* optional: the highest training step it was asked to generate for */
    pthread_t     th;
} FakeRollout;

typedef struct {
    char          endpoint[64];
    volatile int  stop;
    int           batches, bad, seqs;
    long long     last_global_tokens;
    int           delay_ms;              /* "trains" this long before answering the last shard of a step */
    volatile long *gen_step_seen;        /* with the rollouts' counter: counts steps whose successor was being */
    int           overlapped;            /* generated while this one trained (async mode) */
    pthread_t     th;
} FakeLearner;

/* Answers "Answer: 7" (right: every prompt's ground truth is 7) or "Answer: 8" by a script keyed by the prompt
 * length: length % 3 == 0 all right, 1 mixed, 2 all wrong. */
static inline void reply_group(FakeRollout *f, Worker *w, const Dapo__GenerateGroup *g, int times) {
    int n = (int)g->n, cls = f->mode == MODE_ALL_WRONG ? 2 : (int)(g->n_prompt_token_ids % 3);
    Dapo__Response resp[64], *rp[64];
    static int32_t ids[1 << 14];
    static float lps[1 << 14];
    static char text[2][1 << 16];
    if (!ids[0]) {
        for (int i = 0; i < (1 << 14); i++) { ids[i] = 16 + i % 64; lps[i] = -0.5f - (float)(i % 7) / 8; }
        for (int k = 0; k < 2; k++) {
            memset(text[k], 'x', sizeof text[k]);
            memcpy(text[k], k ? "Answer: 8\n" : "Answer: 7\n", 10);
        }
    }
    for (int i = 0; i < n && i < 64; i++) {
        dapo__response__init(&resp[i]);
        int right = cls == 0 || (cls == 1 && i % 2 == 0);
        resp[i].token_ids = ids;
        resp[i].n_token_ids = f->resp_tokens ? (size_t)f->resp_tokens : 3 + (size_t)(i % 3);
        resp[i].logprobs = lps;
        resp[i].n_logprobs = resp[i].n_token_ids;
        resp[i].finish_reason = "stop";
        resp[i].text.data = (uint8_t *)text[!right];
        resp[i].text.len = f->text_bytes > 9 ? (size_t)f->text_bytes : 9;
        rp[i] = &resp[i];
    }
    Dapo__GroupResult r = DAPO__GROUP_RESULT__INIT;
    r.run_id = g->run_id;
    r.step = g->step;
    r.policy_version = g->policy_version;
    r.group_id = g->group_id;
    r.attempt = g->attempt;
    r.n_responses = (size_t)n;
    r.responses = rp;
    r.error = "";
    for (int t = 0; t < times; t++) worker_send(w, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &r.base);
    f->bytes_sent += protobuf_c_message_get_packed_size(&r.base);
}

static inline void *rollout_main(void *arg) {
    FakeRollout *f = arg;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    WorkerOpts o = {.role = DAPO__ROLE__ROLE_ROLLOUT, .worker_id = f->id, .coordinator = f->endpoint,
                    .capacity = (uint32_t)f->capacity, .heartbeat_ms = 100, .lease_timeout_s = 5};
    Worker *w = worker_open(ctx, &o, err);
    int dead = 0;
    int64_t loaded = -1;
    while (w && !f->stop) {
        if (dead) { usleep(20000); continue; }          /* hung: no heartbeats, no answers */
        NetMsg m;
        int rc = worker_poll(w, &m, 20, err);
        int64_t want = worker_coordinator_version(w);
        if (want > loaded) {                           /* "loads" every new version at once and acks it */
            loaded = want;
            worker_set_status(w, 0, loaded);
            Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
            ack.version = loaded;
            ack.worker_id = f->id;
            worker_send(w, DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
        }
        if (rc != 1) continue;
        if (m.type == DAPO__MSG_TYPE__MSG_GENERATE_GROUP) {
            Dapo__GenerateGroup *g = (Dapo__GenerateGroup *)m.msg;
            if (f->die_after && f->groups_done >= f->die_after) { dead = 1; net_msg_free(&m); continue; }
            if (f->gen_step_seen && !g->validation && g->step > *f->gen_step_seen) *f->gen_step_seen = g->step;
            reply_group(f, w, g, f->duplicate ? 2 : 1);
            worker_add_credit(w, g->n);
            f->groups_done++;
        }
        net_msg_free(&m);
    }
    if (w && dead) { int z = 0; zmq_setsockopt(worker_socket(w), ZMQ_LINGER, &z, sizeof z); }
    worker_close(w, dead ? NULL : "test over");
    zmq_ctx_term(ctx);
    return NULL;
}

static inline void *learner_main(void *arg) {
    FakeLearner *f = arg;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    WorkerOpts o = {.role = DAPO__ROLE__ROLE_LEARNER, .worker_id = "learner-0", .coordinator = f->endpoint,
                    .capacity = 1, .world_size = 1, .heartbeat_ms = 100, .lease_timeout_s = 5};
    Worker *w = worker_open(ctx, &o, err);
    while (w && !f->stop) {
        NetMsg m;
        if (worker_poll(w, &m, 20, err) != 1) continue;
        if (m.type == DAPO__MSG_TYPE__MSG_TRAIN_BATCH) {
            Dapo__TrainBatch *tb = (Dapo__TrainBatch *)m.msg;
            size_t nseq = tb->n_offsets - 1, resp = 0;
            for (size_t i = 0; i < nseq; i++) resp += tb->offsets[i + 1] - tb->offsets[i] - tb->prompt_lengths[i];
            if (resp != tb->n_response_mask || resp != tb->n_advantages || resp != tb->n_rollout_logprobs ||
                tb->n_input_ids != tb->offsets[nseq] || tb->global_response_tokens < resp || nseq != tb->n_group_ids)
                f->bad++;
            f->batches++;
            f->seqs += (int)nseq;
            f->last_global_tokens = (long long)tb->global_response_tokens;
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
            if (tb->last_of_step && f->delay_ms) {
                for (int t = 0; t < f->delay_ms; t += 10) {           /* keep heartbeating while "training" */
                    NetMsg x;
                    if (worker_poll(w, &x, 10, err) == 1) net_msg_free(&x);
                }
                if (f->gen_step_seen && *f->gen_step_seen > tb->step) f->overlapped++;
            }
            worker_send(w, DAPO__MSG_TYPE__MSG_STEP_RESULT, &sr.base);
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
    volatile int  stop;
    pthread_t     th;
} FakeVerifier;

static inline void *verifier_main(void *arg) {
    FakeVerifier *f = arg;
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    WorkerOpts o = {.role = DAPO__ROLE__ROLE_VERIFIER, .worker_id = "verifier-fake", .coordinator = f->endpoint,
                    .capacity = 1 << 16, .heartbeat_ms = 100, .lease_timeout_s = 5};
    Worker *w = worker_open(ctx, &o, err);
    while (w && !f->stop) {
        NetMsg m;
        if (worker_poll(w, &m, 20, err) != 1) continue;
        if (m.type == DAPO__MSG_TYPE__MSG_SCORE_REQUEST) {
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
            worker_send(w, DAPO__MSG_TYPE__MSG_SCORE_RESULT, &r.base);
            worker_add_credit(w, (uint32_t)rq->n_items);
        }
        net_msg_free(&m);
    }
    worker_close(w, "done");
    zmq_ctx_term(ctx);
    return NULL;
}

#endif
