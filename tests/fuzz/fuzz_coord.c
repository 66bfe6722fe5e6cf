/* tests/fuzz/fuzz_coord.c: libFuzzer target for the coordinator's handling of arbitrary sequences of messages and
 * events (services/coordinator: the engine, the registry, dispatch, results, steps, checkpoints, recovery), without
 * sockets — the sans-IO state of tests/unit/test_coord_engine.c, driven through its one entry point, engine_on.
 * Byte 0 picks the run (learner ranks 1 or 2, dynamic sampling on or off, async staleness 0 or 1); then each op is a
 * byte and its arguments: a worker's Hello (rollouts r0 r1, verifier v0, learners l0 l1), credit, an answer to a
 * GenerateGroup / ScoreRequest / TrainBatch the outbox holds (responses right, wrong, truncated, of another version;
 * scores of any outcome; steps that succeed or fail with any code), a WeightAck, a Goodbye, a cron tick, a failed
 * send, a lost worker, or a frame of any type decoded from the input. After every event: each group the run created
 * is in exactly one state, no lease is held by a worker that is not alive, and the phase is one the engine has.
 * Besides crashes, UB and leaks (ASan+UBSan), it aborts when one of those fails. */
// fuzz-sources: services/coordinator/[a-l]*.c services/coordinator/[o-q]*.c services/coordinator/re*.c services/coordinator/[s-z]*.c common/core/*.c common/dapo/*.c common/io/*.c common/net/*.c common/settings/*.c common/tokenizer/*.c common/model/model_config.c common/reward/*.c build/gen/dapo.pb-c.c build/gen/tensorboard.pb-c.c build/gen/static_coordinator.c -lhttp_parser
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "backend/backend.h"
#include "services/coordinator/engine.h"

#define check(cond) do { if (!(cond)) { fprintf(stderr, "fuzz_coord: %s failed (line %d)\n", #cond, __LINE__); \
                                          abort(); } } while (0)

static char g_data[256], g_tok[4096], g_ckpt[300];
static const char *const WID[5] = {"r0", "r1", "v0", "l0", "l1"};
static const Dapo__Role WROLE[5] = {DAPO__ROLE__ROLE_ROLLOUT, DAPO__ROLE__ROLE_ROLLOUT, DAPO__ROLE__ROLE_VERIFIER,
                                    DAPO__ROLE__ROLE_LEARNER, DAPO__ROLE__ROLE_LEARNER};

/* The coordinator never selects a model backend (settings_backend is the workers'); the CPU backend's kernels stay out
 * of this target. */
const Backend *backend_select(const char *device, char err[ERR_LEN]) {
    (void)device;
    err_set(err, ERR_UNSUPPORTED, "no backend in fuzz_coord");
    return NULL;
}

typedef struct { const uint8_t *p; size_t n; } In;

static unsigned take(In *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    log_init("fuzz", LL_ERROR);
    snprintf(g_data, sizeof g_data, "/tmp/fuzz-coord-%d.jsonl", (int)getpid());
    FILE *f = fopen(g_data, "w");
    check(f != NULL);
    for (int i = 0; i < 8; i++)
        fprintf(f, "{\"data_source\":\"toy\",\"prompt\":[{\"role\":\"user\",\"content\":\"What is 3+4? (%d)\"}],"
                   "\"reward_model\":{\"ground_truth\":\"7\",\"style\":\"rule\"}}\n", i);
    fclose(f);
    const char *root = getenv("DAPO_ROOT");
    snprintf(g_tok, sizeof g_tok, "%s/data/tokenizers/tiny", root && *root ? root : ".");
    snprintf(g_ckpt, sizeof g_ckpt, "/tmp/fuzz-coord-%d-ckpt", (int)getpid());   /* never written: no run.c */
    return 0;
}

static void set(Coord *c, const char *key, const char *value) {
    char err[ERR_LEN];
    if (config_set(&c->cfg, key, value, "fuzz", err)) { fprintf(stderr, "%s\n", err); abort(); }
}

static Coord *coord_new(unsigned mode) {
    Coord *c = xcalloc(1, sizeof *c);
    config_defaults(&c->cfg);
    set(c, "data.train_files", g_data);
    set(c, "data.tokenizer", g_tok);
    set(c, "data.chat_template", "none");
    set(c, "trainer.default_local_dir", g_ckpt);
    set(c, "data.train_batch_size", "2");
    set(c, "data.gen_batch_size", mode & 2 ? "2" : "3");
    set(c, "algorithm.filter_groups.enable", mode & 2 ? "false" : "true");
    set(c, "algorithm.filter_groups.max_num_gen_batches", "3");
    set(c, "actor_rollout_ref.rollout.n", "2");
    set(c, "actor_rollout_ref.actor.ppo_mini_batch_size", "2");
    set(c, "trainer.total_training_steps", "3");
    set(c, "trainer.save_freq", "1");
    set(c, "trainer.test_freq", "-1");
    set(c, "data.max_response_length", "16");
    set(c, "trainer.val_before_train", "false");
    set(c, "trainer.staleness", mode & 4 ? "1" : "0");
    set(c, "cluster.num_learners", mode & 1 ? "2" : "1");
    char err[ERR_LEN];
    check(config_validate(&c->cfg, err) == 0);
    c->lock_fd = -1;
    snprintf(c->run_id, sizeof c->run_id, "run-fuzz");
    c->started_ms = clock_ms();
    check(engine_start(c, err) == 0);
    return c;
}

static void deliver(Coord *c, int w, Dapo__MsgType type, const ProtobufCMessage *m) {
    size_t len;
    uint8_t *buf = net_encode(type, m, &len);
    NetMsg nm;
    memset(&nm, 0, sizeof nm);
    char err[ERR_LEN];
    ProtobufCMessage *pm = NULL;
    int rc = net_decode(buf, len, 0, &nm.type, &nm.version, &pm, err);
    xfree(buf);
    if (rc) { if (pm) protobuf_c_message_free_unpacked(pm, NULL); return; }
    nm.msg = pm;
    nm.bytes = len;
    nm.peer_len = strlen(WID[w]);
    memcpy(nm.peer, WID[w], nm.peer_len);
    Event ev = {.kind = EV_MESSAGE, .msg = &nm};
    engine_on(c, &ev, err);
    net_msg_free(&nm);
}

/* The k-th (mod how many) queued send of type: its index in the outbox, or -1. */
static int nth_send(const Coord *c, Dapo__MsgType type, unsigned k) {
    int n = 0;
    for (int i = 0; i < c->nout; i++) n += c->out[i].kind == OUT_SEND && c->out[i].type == type;
    if (!n) return -1;
    k %= (unsigned)n;
    for (int i = 0; i < c->nout; i++)
        if (c->out[i].kind == OUT_SEND && c->out[i].type == type && k-- == 0) return i;
    return -1;
}

static ProtobufCMessage *decoded(const OutAction *a) {
    Dapo__MsgType t;
    uint16_t v;
    ProtobufCMessage *m = NULL;
    char err[ERR_LEN];
    check(net_decode(a->frame, a->len, 0, &t, &v, &m, err) == 0);
    return m;
}

/* Removes outbox action i (answered). */
static void drop(Coord *c, int i) {
    out_action_free(&c->out[i]);
    memmove(&c->out[i], &c->out[i + 1], (size_t)(c->nout - i - 1) * sizeof c->out[0]);
    c->nout--;
}

static void answer_generate(Coord *c, In *in) {
    int i = nth_send(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, take(in));
    if (i < 0) return;
    int w = c->out[i].worker;
    Dapo__GenerateGroup *g = (Dapo__GenerateGroup *)decoded(&c->out[i]);
    drop(c, i);
    Dapo__Response r[8], *rp[8];
    int32_t tok[8][4];
    float lp[4] = {-0.1f, -0.2f, -0.3f, -0.4f};
    uint32_t n = g->n < 8 ? g->n : 8;
    unsigned bits = take(in), vbits = take(in);
    for (uint32_t k = 0; k < n; k++) {
        dapo__response__init(&r[k]);
        int ok = bits >> k & 1;
        uint32_t len = 1 + (take(in) & 3);
        for (uint32_t t = 0; t < len; t++) tok[k][t] = (int32_t)(take(in) % 64);
        r[k].token_ids = tok[k];
        r[k].n_token_ids = len;
        r[k].logprobs = lp;
        r[k].n_logprobs = vbits & 0x80 ? len - 1 : len;        /* sometimes a count that does not match */
        r[k].finish_reason = vbits & 1 ? "length" : "stop";
        r[k].policy_version = c->policy_version - (int64_t)(vbits >> 1 & 1);
        r[k].text.data = (uint8_t *)(ok ? "7" : "3");
        r[k].text.len = 1;
        rp[k] = &r[k];
    }
    Dapo__GroupResult gr = DAPO__GROUP_RESULT__INIT;
    gr.run_id = vbits & 0x40 ? "run-other" : c->run_id;
    gr.step = g->step;
    gr.group_id = g->group_id + (vbits & 0x20 ? 1 : 0);
    gr.attempt = g->attempt;
    gr.responses = rp;
    gr.n_responses = vbits & 0x10 ? n / 2 : n;
    gr.policy_version = c->policy_version;
    if (w >= 0 && w < c->nworkers) {
        for (int k = 0; k < 5; k++)
            if (!strcmp(c->workers[w].id, WID[k])) { deliver(c, k, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &gr.base); break; }
    }
    protobuf_c_message_free_unpacked(&g->base, NULL);
}

static void answer_score(Coord *c, In *in) {
    int i = nth_send(c, DAPO__MSG_TYPE__MSG_SCORE_REQUEST, take(in));
    if (i < 0) return;
    Dapo__ScoreRequest *q = (Dapo__ScoreRequest *)decoded(&c->out[i]);
    drop(c, i);
    Dapo__Score s[16], *sp[16];
    size_t n = q->n_items < 16 ? q->n_items : 16;
    for (size_t k = 0; k < n; k++) {
        unsigned b = take(in);
        dapo__score__init(&s[k]);
        s[k].item_id = q->items[k]->item_id + (b & 0x80 ? 7 : 0);
        s[k].attempt = q->attempt;
        s[k].score = b & 1 ? 1.0f : -1.0f;
        s[k].acc = b & 1;
        s[k].outcome = (Dapo__RewardOutcome)(b >> 1 & 7);
        sp[k] = &s[k];
    }
    Dapo__ScoreResult sr = DAPO__SCORE_RESULT__INIT;
    sr.run_id = c->run_id;
    sr.step = q->step;
    sr.request_id = q->request_id;
    sr.attempt = q->attempt;
    sr.scores = sp;
    sr.n_scores = n;
    deliver(c, 2, DAPO__MSG_TYPE__MSG_SCORE_RESULT, &sr.base);
    protobuf_c_message_free_unpacked(&q->base, NULL);
}

static void answer_train(Coord *c, In *in) {
    int i = nth_send(c, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, take(in));
    if (i < 0) return;
    Dapo__TrainBatch *tb = (Dapo__TrainBatch *)decoded(&c->out[i]);
    drop(c, i);
    unsigned b = take(in);
    static const int codes[4] = {0, ERR_COLLECTIVE, ERR_INVAL, ERR_TIMEOUT};
    Dapo__StepResult r = DAPO__STEP_RESULT__INIT;
    r.run_id = c->run_id;
    r.step = tb->step;
    r.rank = tb->rank;
    r.code = codes[b & 3];
    r.error = "fuzz";
    r.new_policy_version = tb->rank == 0 && !(b & 3) ? c->policy_version + 1 : 0;
    deliver(c, tb->rank ? 4 : 3, DAPO__MSG_TYPE__MSG_STEP_RESULT, &r.base);
    protobuf_c_message_free_unpacked(&tb->base, NULL);
}

/* Each group in exactly one state, leases only with alive workers, a known phase. */
static void invariants(const Coord *c) {
    const Engine *e = c->engine;
    uint64_t sum = 0;
    for (int s = 0; s < GS_COUNT; s++) sum += c->group_counts[s];
    check(sum == e->next_group_id - 1);
    for (int i = 0; i < e->ngroups; i++) {
        const Group *g = &e->groups[i];
        if (g->state == GS_LEASED || g->state == GS_SCORING) {
            check(g->worker >= 0 && g->worker < c->nworkers);
            check(c->workers[g->worker].life == WORKER_ALIVE);
        }
    }
    check((int)e->phase >= 0 && (int)e->phase <= PH_FAILED);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    In in = {data + 1, size - 1};
    Coord *c = coord_new(data[0]);
    char err[ERR_LEN];
    for (int ops = 0; in.n && ops < 400; ops++) {
        unsigned op = take(&in) % 12, w = take(&in) % 5;
        Event ev = {.kind = EV_TICK};
        switch (op) {
        case 0: {
            Dapo__Hello h = DAPO__HELLO__INIT;
            h.protocol_version = DAPO_PROTOCOL_VERSION;
            h.role = WROLE[w];
            h.worker_id = (char *)WID[w];
            h.capacity = 1 + take(&in) % 8;
            h.policy_version = WROLE[w] == DAPO__ROLE__ROLE_VERIFIER ? -1 : c->policy_version;
            h.rank = w == 4;
            h.world_size = (uint32_t)c->cfg.num_learners;
            h.fresh = take(&in) & 1;
            h.nonce = 1 + take(&in);
            h.attempt = 1 + take(&in) % 3;
            deliver(c, (int)w, DAPO__MSG_TYPE__MSG_HELLO, &h.base);
            break;
        }
        case 1: {
            Dapo__Credit cr = DAPO__CREDIT__INIT;
            cr.credits = take(&in) % 16;
            deliver(c, (int)w, DAPO__MSG_TYPE__MSG_CREDIT, &cr.base);
            break;
        }
        case 2: answer_generate(c, &in); break;
        case 3: answer_score(c, &in); break;
        case 4: answer_train(c, &in); break;
        case 5: {
            Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
            ack.version = c->policy_version - (int64_t)(take(&in) & 1);
            deliver(c, (int)w, DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
            break;
        }
        case 6: {
            Dapo__Goodbye g = DAPO__GOODBYE__INIT;
            g.reason = "fuzz";
            deliver(c, (int)w, DAPO__MSG_TYPE__MSG_GOODBYE, &g.base);
            break;
        }
        case 7: case 8: engine_on(c, &ev, err); break;
        case 9: {
            if (!c->nout) break;
            const OutAction *a = &c->out[take(&in) % (unsigned)c->nout];
            if (a->kind != OUT_SEND) break;
            ev = (Event){.kind = EV_SEND_FAILED, .worker = a->worker, .type = a->type, .item = a->item,
                         .attempt = a->attempt, .code = ERR_IO};
            engine_on(c, &ev, err);
            break;
        }
        case 10:
            for (int i = 0; i < c->nworkers; i++)
                if (!strcmp(c->workers[i].id, WID[w])) {
                    ev = (Event){.kind = EV_WORKER_LOST, .worker = i};
                    engine_on(c, &ev, err);
                }
            break;
        case 11: {                                   /* a frame of any type, its payload from the input */
            uint8_t f[NET_HEADER_BYTES + 64];
            f[6] = (uint8_t)(take(&in) % 19);
            size_t plen = take(&in) % 64;
            if (plen > in.n) plen = in.n;
            memcpy(f, "DAPO", 4);
            f[4] = DAPO_PROTOCOL_VERSION & 0xff;
            f[5] = DAPO_PROTOCOL_VERSION >> 8;
            f[7] = 0;
            for (int k = 0; k < 4; k++) f[8 + k] = (uint8_t)(plen >> (8 * k));
            memcpy(f + NET_HEADER_BYTES, in.p, plen);
            in.p += plen;
            in.n -= plen;
            NetMsg nm;
            memset(&nm, 0, sizeof nm);
            ProtobufCMessage *pm = NULL;
            if (net_decode(f, NET_HEADER_BYTES + plen, 0, &nm.type, &nm.version, &pm, err) == 0) {
                nm.msg = pm;
                nm.peer_len = strlen(WID[w]);
                memcpy(nm.peer, WID[w], nm.peer_len);
                ev = (Event){.kind = EV_MESSAGE, .msg = &nm};
                engine_on(c, &ev, err);
                net_msg_free(&nm);
            } else if (pm) {
                protobuf_c_message_free_unpacked(pm, NULL);
            }
            break;
        }
        }
        invariants(c);
        if (c->nout > 512) outbox_clear(c);
    }
    coord_state_free(c);
    xfree(c);
    return 0;
}
