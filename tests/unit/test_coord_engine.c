/* tests/unit/test_coord_engine.c: the coordinator's engine without sockets (issue 35). A Coord is driven through its
 * one entry point, engine_on, with scripted events — Hellos, credit, group and score results, step results, a worker
 * leaving, a failed send, cron ticks — and every assertion reads the outbox (the sends it asked for, decoded) and the
 * state: the phase, the status line, the group accounting (every group in exactly one state). No socket, thread or
 * process: run.c is not linked in.
 *   - a step from registration to the TrainBatch shards of two learner ranks, then its update and version 2's weights
 *   - a failed step decided by its code, never its text: ERR_COLLECTIVE with unrelated text rolls back (Control
 *     RELOAD to both ranks, phase rejoin), ERR_INVAL with text that names a collective fails the run
 *   - a learner rank that leaves during the update: the run waits for the learners (phase rejoin)
 *   - a GenerateGroup whose send failed: the lease goes back to the queue with the rollout's credit, and is sent again
 *   - a coordinator restarted with results in flight: the old run's result is refused (register again), nothing of
 *     it enters the new run's accounting
 *   - results only from the worker they belong to (a rollout's StepResult, another rank's, a checkpoint confirmed by
 *     rank 1, a GroupResult for another rollout's lease: dropped), one worker id per connection, and /metrics
 *     leaving the run's counters out while a resume is undecided (issue 38) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/clock.h"
#include "services/coordinator/engine.h"
#include "tests/testutil.h"

static char g_dir[512];

/* 8 prompts, every ground truth "7". */
static void write_dataset(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 8; i++)
        fprintf(f, "{\"data_source\":\"toy\",\"prompt\":[{\"role\":\"user\",\"content\":\"What is 3+4? (%d)\"}],"
                   "\"ability\":\"MATH\",\"reward_model\":{\"ground_truth\":\"7\",\"style\":\"rule\"}}\n", i);
    fclose(f);
}

static void set(Coord *c, const char *key, const char *value) {
    char err[ERR_LEN];
    if (config_set(&c->cfg, key, value, "test", err)) fail_msg("%s=%s: %s", key, value, err);
}

/* A coordinator state with the engine started: 2 prompts x 2 responses a step, 2 learner ranks, no validation;
 * extra: more key, value pairs (NULL-terminated; may be NULL). */
static Coord *coord_new_with(const char *const *extra) {
    Coord *c = xcalloc(1, sizeof *c);
    config_defaults(&c->cfg);
    tu_dapo_recipe(&c->cfg);
    char path[1200], tok[700], ckdir[700];
    snprintf(g_dir, sizeof g_dir, "%s/test-logs/coord-engine", tu_build());
    snprintf(path, sizeof path, "rm -rf %s && mkdir -p %s", g_dir, g_dir);
    assert_int_equal(system(path), 0);
    snprintf(path, sizeof path, "%s/toy.jsonl", g_dir);
    write_dataset(path);
    snprintf(tok, sizeof tok, "%s/data/tokenizers/qwen3", tu_root());
    snprintf(ckdir, sizeof ckdir, "%s/ckpt", g_dir);
    set(c, "data.train_files", path);
    set(c, "data.tokenizer", tok);
    set(c, "trainer.default_local_dir", ckdir);
    set(c, "data.train_batch_size", "2");
    set(c, "data.gen_batch_size", "2");
    set(c, "actor_rollout_ref.rollout.n", "2");
    set(c, "actor_rollout_ref.actor.ppo_mini_batch_size", "2");
    set(c, "trainer.total_training_steps", "3");
    set(c, "data.max_response_length", "16");
    set(c, "reward_model.overlong_buffer.enable", "true");
    set(c, "reward_model.overlong_buffer.len", "4");
    set(c, "trainer.val_before_train", "false");
    set(c, "cluster.num_learners", "2");
    for (int i = 0; extra && extra[i]; i += 2) set(c, extra[i], extra[i + 1]);
    char err[ERR_LEN];
    if (config_validate(&c->cfg, err)) fail_msg("config: %s", err);
    c->lock_fd = -1;
    snprintf(c->run_id, sizeof c->run_id, "run-engine-test");
    c->started_ms = clock_ms();
    if (engine_start(c, err)) fail_msg("engine_start: %s", err);
    return c;
}

static Coord *coord_new(void) { return coord_new_with(NULL); }

static void coord_free(Coord *c) {
    coord_state_free(c);
    xfree(c);
}

/* One event from worker `peer`: m is packed and unpacked as the socket would deliver it. */
static int deliver(Coord *c, const char *peer, Dapo__MsgType type, const ProtobufCMessage *m) {
    size_t len;
    uint8_t *buf = net_encode(type, m, &len);
    assert_non_null(buf);
    NetMsg nm;
    memset(&nm, 0, sizeof nm);
    char err[ERR_LEN];
    ProtobufCMessage *pm = NULL;
    assert_int_equal(net_decode(buf, len, 0, &nm.type, &nm.version, &pm, err), 0);
    xfree(buf);
    nm.msg = pm;
    nm.bytes = len;
    nm.peer_len = strlen(peer);
    memcpy(nm.peer, peer, nm.peer_len);
    Event ev = {.kind = EV_MESSAGE, .msg = &nm};
    int rc = engine_on(c, &ev, err);
    net_msg_free(&nm);
    return rc;
}

static void tick(Coord *c) {
    Event ev = {.kind = EV_TICK};
    engine_on(c, &ev, NULL);
}

/* A Hello of a new process (nonce: its registration; a restarted worker draws another). */
static void hello_nonce(Coord *c, const char *id, Dapo__Role role, uint32_t rank, uint64_t nonce) {
    Dapo__Hello h = DAPO__HELLO__INIT;
    h.protocol_version = DAPO_PROTOCOL_VERSION;
    h.role = role;
    h.worker_id = (char *)id;
    h.capacity = 8;
    h.policy_version = role == DAPO__ROLE__ROLE_VERIFIER ? -1 : 0;
    h.rank = rank;
    h.world_size = role == DAPO__ROLE__ROLE_LEARNER ? 2 : 1;
    h.fresh = role == DAPO__ROLE__ROLE_LEARNER;
    h.nonce = nonce;
    h.attempt = 1;
    deliver(c, id, DAPO__MSG_TYPE__MSG_HELLO, &h.base);
    if (role != DAPO__ROLE__ROLE_LEARNER) {
        Dapo__Credit cr = DAPO__CREDIT__INIT;
        cr.credits = 8;
        deliver(c, id, DAPO__MSG_TYPE__MSG_CREDIT, &cr.base);
    }
}

static void hello(Coord *c, const char *id, Dapo__Role role, uint32_t rank) {
    hello_nonce(c, id, role, rank, 1000 + rank + (uint64_t)role * 10);
}

/* A rollout, a verifier and learner ranks 0 and 1 register (their Welcomes dropped), then the first cron tick. */
static void register_all(Coord *c) {
    hello(c, "rollout-0", DAPO__ROLE__ROLE_ROLLOUT, 0);
    hello(c, "verifier-0", DAPO__ROLE__ROLE_VERIFIER, 0);
    hello(c, "learner-0", DAPO__ROLE__ROLE_LEARNER, 0);
    hello(c, "learner-1", DAPO__ROLE__ROLE_LEARNER, 1);
    outbox_clear(c);
    tick(c);
}

/* The decoded messages of `type` the outbox holds for worker `id` (NULL: any), at most max; the caller frees each
 * with protobuf_c_message_free_unpacked. */
static int queued(Coord *c, Dapo__MsgType type, const char *id, ProtobufCMessage **out, int max) {
    int n = 0;
    for (int i = 0; i < c->nout && n < max; i++) {
        OutAction *a = &c->out[i];
        if (a->kind != OUT_SEND || a->type != type) continue;
        if (id && (a->worker < 0 || strcmp(c->workers[a->worker].id, id) != 0)) continue;
        Dapo__MsgType t;
        uint16_t v;
        char err[ERR_LEN];
        assert_int_equal(net_decode(a->frame, a->len, 0, &t, &v, &out[n], err), 0);
        assert_int_equal(t, type);
        n++;
    }
    return n;
}

static void free_all(ProtobufCMessage **m, int n) {
    for (int i = 0; i < n; i++) protobuf_c_message_free_unpacked(m[i], NULL);
}

/* Every group the run created is in exactly one state. */
static void assert_accounting(const Coord *c) {
    uint64_t sum = 0;
    for (int s = 0; s < GS_COUNT; s++) sum += c->group_counts[s];
    assert_int_equal(sum, c->engine->next_group_id - 1);
}

/* Drops the outbox's actions of `type` (the test has taken them), keeping the others in order. */
static void drop_type(Coord *c, Dapo__MsgType type) {
    int n = 0;
    for (int i = 0; i < c->nout; i++) {
        if (c->out[i].kind == OUT_SEND && c->out[i].type == type) out_action_free(&c->out[i]);
        else c->out[n++] = c->out[i];
    }
    c->nout = n;
}

/* Answers every GenerateGroup in the outbox (each response "7", right, or "3"; right: how many of a group's n are
 * right) and then every ScoreRequest (scored as generated); returns the groups answered. */
static int answer_round(Coord *c, int right) {
    ProtobufCMessage *gen[16];
    int ng = queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", gen, 16);
    drop_type(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP);
    for (int k = 0; k < ng; k++) {
        Dapo__GenerateGroup *g = (Dapo__GenerateGroup *)gen[k];
        int32_t tok[2][2] = {{22, 151645}, {18, 151645}};
        float lp[2] = {-0.1f, -0.2f};
        Dapo__Response r[8], *rp[8];
        assert_true(g->n <= 8);
        for (uint32_t i = 0; i < g->n; i++) {
            int ok = (int)i < right;
            dapo__response__init(&r[i]);
            r[i].token_ids = tok[!ok];
            r[i].n_token_ids = 2;
            r[i].logprobs = lp;
            r[i].n_logprobs = 2;
            r[i].finish_reason = "stop";
            r[i].policy_version = c->policy_version;   /* the rollout holds the current version */
            r[i].text.data = (uint8_t *)(ok ? "7" : "3");
            r[i].text.len = 1;
            rp[i] = &r[i];
        }
        Dapo__GroupResult gr = DAPO__GROUP_RESULT__INIT;
        gr.run_id = c->run_id;
        gr.step = g->step;
        gr.group_id = g->group_id;
        gr.attempt = g->attempt;
        gr.responses = rp;
        gr.n_responses = g->n;
        gr.policy_version = c->policy_version;
        deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_GROUP_RESULT, &gr.base);
        Dapo__Credit cr = DAPO__CREDIT__INIT;          /* its n slots are free again */
        cr.credits = g->n;
        deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_CREDIT, &cr.base);
    }
    free_all(gen, ng);
    ProtobufCMessage *sq[16];
    int ns = queued(c, DAPO__MSG_TYPE__MSG_SCORE_REQUEST, "verifier-0", sq, 16);
    assert_int_equal(ns, ng);
    drop_type(c, DAPO__MSG_TYPE__MSG_SCORE_REQUEST);
    for (int k = 0; k < ns; k++) {
        Dapo__ScoreRequest *q = (Dapo__ScoreRequest *)sq[k];
        Dapo__Score s[8], *sp[8];
        for (size_t i = 0; i < q->n_items; i++) {
            int ok = q->items[i]->response_text.len == 1 && q->items[i]->response_text.data[0] == '7';
            dapo__score__init(&s[i]);
            s[i].item_id = q->items[i]->item_id;
            s[i].attempt = q->attempt;
            s[i].score = ok ? 1.0f : -1.0f;
            s[i].acc = ok;
            sp[i] = &s[i];
        }
        Dapo__ScoreResult sr = DAPO__SCORE_RESULT__INIT;
        sr.run_id = c->run_id;
        sr.step = q->step;
        sr.request_id = q->request_id;
        sr.attempt = q->attempt;
        sr.scores = sp;
        sr.n_scores = q->n_items;
        deliver(c, "verifier-0", DAPO__MSG_TYPE__MSG_SCORE_RESULT, &sr.base);
        Dapo__Credit cr = DAPO__CREDIT__INIT;
        cr.credits = (uint32_t)q->n_items;
        deliver(c, "verifier-0", DAPO__MSG_TYPE__MSG_CREDIT, &cr.base);
    }
    free_all(sq, ns);
    return ng;
}

/* The step's two groups generated (one response of each right, one wrong: every group kept) and scored. */
static void generate_and_score(Coord *c) {
    assert_int_equal(engine_phase(c), PH_GENERATE);
    assert_int_equal(answer_round(c, 1), 2);                   /* data.gen_batch_size prompts, one group each */
    for (int i = 0; i < c->engine->ngroups; i++) assert_int_equal(c->engine->groups[i].n, 2);   /* rollout.n each */
}

/* Registration of a rollout, a verifier and learner ranks 0 and 1, then step 1 generated (one response of each
 * group right, one wrong: every group kept) and scored, up to its TrainBatch shards to both ranks. */
static void step_to_training(Coord *c) {
    register_all(c);
    assert_int_equal(registry_count(c, DAPO__ROLE__ROLE_LEARNER, WORKER_ALIVE), 2);
    generate_and_score(c);
    assert_int_equal(engine_phase(c), PH_TRAIN);
    ProtobufCMessage *tb[4];
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, "learner-0", tb, 4), 1);
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, "learner-1", tb + 1, 3), 1);
    assert_int_equal(((Dapo__TrainBatch *)tb[0])->rank, 0);
    assert_int_equal(((Dapo__TrainBatch *)tb[1])->rank, 1);
    assert_int_equal(((Dapo__TrainBatch *)tb[0])->step, 1);
    free_all(tb, 2);
    assert_int_equal(c->group_counts[GS_TRAINED], 2);
    assert_accounting(c);
    outbox_clear(c);
}

static void step_result(Coord *c, const char *learner, uint32_t rank, int code, const char *text, int64_t newv) {
    Dapo__StepResult r = DAPO__STEP_RESULT__INIT;
    r.run_id = c->run_id;
    r.step = 1;
    r.rank = rank;
    r.code = code;
    r.error = (char *)text;
    r.new_policy_version = newv;
    deliver(c, learner, DAPO__MSG_TYPE__MSG_STEP_RESULT, &r.base);
}

/* Both ranks' StepResults of step 1, the rollout's WeightAck of version 1: step 1 is finished. */
static void finish_step1(Coord *c) {
    step_result(c, "learner-1", 1, 0, "", 0);
    step_result(c, "learner-0", 0, 0, "", 1);
    assert_int_equal(c->policy_version, 1);
    assert_int_equal(engine_phase(c), PH_WEIGHTS);       /* sync: the rollout must load version 1 first */
    ProtobufCMessage *hb[2];
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_HEARTBEAT, "rollout-0", hb, 2), 1);   /* the version announced */
    assert_int_equal(((Dapo__Heartbeat *)hb[0])->policy_version, 1);
    free_all(hb, 1);
    Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
    ack.version = 1;
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    assert_int_equal(c->engine->done_steps, 1);
}

/* The file actions of `kind` in the outbox; *last: the latest of them. */
static int file_actions(const Coord *c, OutKind kind, const OutAction **last) {
    int n = 0;
    for (int i = 0; i < c->nout; i++)
        if (c->out[i].kind == kind) { n++; *last = &c->out[i]; }
    return n;
}

static void test_step_and_update(void **state) {
    (void)state;
    Coord *c = coord_new();
    step_to_training(c);
    finish_step1(c);
    assert_int_equal(c->nhistory, 1);                    /* step 1's metrics row, in memory ... */
    const OutAction *row = NULL;
    assert_int_equal(file_actions(c, OUT_METRICS_ROW, &row), 1);   /* ... and queued for metrics.jsonl */
    assert_int_equal(row->item, 1);
    assert_true(metrics_get(row->metrics, "critic/score/mean", NAN) == 0.0);   /* scores 1 and -1 */
    assert_int_equal(engine_phase(c), PH_GENERATE);      /* step 2 started at once */
    assert_accounting(c);
    coord_free(c);
}

static void write_failed(Coord *c, long step, CkptWrite why) {
    Event ev = {.kind = EV_WRITE_FAILED, .worker = -1, .item = (uint64_t)step, .attempt = why, .code = ERR_IO};
    engine_on(c, &ev, NULL);
}

/* coordinator.json is the loop's to write: a checkpoint request queues the file with the learner's request behind it
 * (sent only once the file is written); a write that fails drops the pending step (the learner is never asked), a
 * confirmed step whose file failed stays pending; a stop whose checkpoint cannot be written exits without it. */
static void test_checkpoint_file_actions(void **state) {
    (void)state;
    Coord *c = coord_new();
    step_to_training(c);
    finish_step1(c);
    outbox_clear(c);
    assert_int_equal(ckpt_phase(c), CKPT_BEHIND);        /* trainer.save_freq 5: step 1 is not saved */
    char err[ERR_LEN];
    Event ck = {.kind = EV_CHECKPOINT};
    assert_int_equal(engine_on(c, &ck, err), 0);
    assert_int_equal(ckpt_phase(c), CKPT_ASKED);
    const OutAction *f = NULL;
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 1);
    assert_int_equal(f->item, 1);
    assert_int_equal(f->attempt, CKPT_W_ASK);
    assert_non_null(strstr(f->text, "\"pending\""));
    assert_int_equal(f->type, DAPO__MSG_TYPE__MSG_CONTROL);     /* the request to learner rank 0 rides behind it */
    assert_string_equal(c->workers[f->worker].id, "learner-0");
    ProtobufCMessage *m[2];
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_CONTROL, NULL, m, 2), 0);   /* not a send of its own */
    assert_true(c->ckpt.has_pending && c->ckpt.asked);
    outbox_clear(c);
    write_failed(c, 1, CKPT_W_ASK);
    assert_false(c->ckpt.has_pending);
    assert_int_equal(ckpt_phase(c), CKPT_BEHIND);
    assert_int_equal(file_actions(c, OUT_SEND, &f), 0);     /* nothing sent, nothing written ... */
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 0);
    assert_int_equal(file_actions(c, OUT_EVENT_LINE, &f), 1);   /* ... and the dashboard's event list says so */
    assert_non_null(strstr(f->text, "checkpoint of step 1 not taken"));
    outbox_clear(c);
    assert_int_equal(engine_on(c, &ck, err), 0);         /* asked again: queued again */
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 1);
    outbox_clear(c);
    Dapo__Control done = DAPO__CONTROL__INIT;
    done.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT_DONE;
    done.step = 1;
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    assert_true(c->ckpt.has_saved && !c->ckpt.has_pending);
    assert_int_equal(ckpt_phase(c), CKPT_SAVED);
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 1);
    assert_int_equal(f->attempt, CKPT_W_SAVED);
    assert_null(f->frame);
    outbox_clear(c);
    write_failed(c, 1, CKPT_W_SAVED);                    /* the file still says pending: so does the state */
    assert_true(c->ckpt.has_saved && c->ckpt.has_pending);
    assert_int_equal(c->ckpt.pending.step, 1);
    coord_free(c);

    c = coord_new();
    step_to_training(c);
    finish_step1(c);
    outbox_clear(c);
    Event stop = {.kind = EV_STOP};
    engine_on(c, &stop, NULL);
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 1);   /* the stop's checkpoint of step 1 */
    assert_int_equal(file_actions(c, OUT_EXIT, &f), 0);
    outbox_clear(c);
    write_failed(c, 1, CKPT_W_ASK);
    assert_int_equal(file_actions(c, OUT_EXIT, &f), 1);  /* stopping without it ... */
    assert_int_equal(c->stop_failed, 1);                 /* ... with exit status 1 */
    coord_free(c);
}

/* A run whose last step is trained is done only once both sides hold that step's checkpoint. Learner rank 0 lost
 * before it answers (killed while it writes the checkpoint: test_chaos saw it, 1 run in 6 under load) rolls the run
 * back to the last checkpoint instead of leaving a "done" run without its final one. Stopped meanwhile and the
 * learners leave: the stop exits without that checkpoint, with status 1. Answered: done. */
static void test_finished_run_waits_for_its_last_checkpoint(void **state) {
    (void)state;
    const char *const one_step[] = {"trainer.total_training_steps", "1", NULL};
    Dapo__Goodbye bye = DAPO__GOODBYE__INIT;
    bye.reason = "test over";
    Coord *c = coord_new_with(one_step);
    step_to_training(c);
    finish_step1(c);
    engine_tick(c);
    assert_int_equal(engine_phase(c), PH_IDLE);          /* trained, not done */
    assert_int_equal(ckpt_phase(c), CKPT_ASKED);         /* the last step's checkpoint (as verl) */
    assert_non_null(strstr(c->status_line, "waiting for the learner's checkpoint of step 1"));
    Dapo__Control done = DAPO__CONTROL__INIT;
    done.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT_DONE;
    done.step = 1;
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    engine_tick(c);
    assert_int_equal(engine_phase(c), PH_DONE);
    assert_int_equal(ckpt_phase(c), CKPT_SAVED);
    coord_free(c);

    c = coord_new_with(one_step);                        /* rank 0 lost before it answers: a rollback */
    step_to_training(c);
    finish_step1(c);
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    engine_tick(c);
    assert_int_equal(engine_phase(c), PH_REJOIN);
    assert_int_equal(ckpt_phase(c), CKPT_RESUMING);
    coord_free(c);

    c = coord_new_with(one_step);                        /* the learner cannot write it: failed, saying why */
    step_to_training(c);
    finish_step1(c);
    done.code = ERR_IO;
    done.reason = "global_step_1 exists and is not a directory";
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    engine_tick(c);                                      /* asked once more (the failure may have passed) ... */
    assert_int_equal(engine_phase(c), PH_IDLE);
    assert_int_equal(ckpt_phase(c), CKPT_ASKED);
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    engine_tick(c);                                      /* ... then the run fails, saying why */
    assert_int_equal(engine_phase(c), PH_FAILED);
    assert_non_null(strstr(c->status_line, "its checkpoint was not written (I/O error: global_step_1 exists"));
    coord_free(c);

    const char *const two_steps[] = {"trainer.total_training_steps", "2", NULL};
    c = coord_new_with(two_steps);                       /* stopped mid-run, the checkpoint fails: one ask, exit 1 */
    step_to_training(c);
    finish_step1(c);
    const OutAction *f = NULL;
    Event stop = {.kind = EV_STOP};
    engine_on(c, &stop, NULL);
    outbox_clear(c);
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    for (int i = 0; i < 5; i++) engine_tick(c);
    assert_int_equal(file_actions(c, OUT_EXIT, &f), 1);
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 1);   /* coordinator.json back to "saved"; no new ask */
    assert_int_equal(c->stop_failed, 1);
    coord_free(c);
    done.code = 0;
    done.reason = NULL;

    c = coord_new_with(one_step);                        /* stopped, then the learners leave: exit status 1 */
    step_to_training(c);
    finish_step1(c);
    outbox_clear(c);
    engine_on(c, &stop, NULL);
    assert_int_equal(file_actions(c, OUT_EXIT, &f), 0);  /* waits for the learner's answer */
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    deliver(c, "learner-1", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    engine_tick(c);
    assert_int_equal(file_actions(c, OUT_EXIT, &f), 1);
    assert_true(c->stop_failed || engine_phase(c) == PH_FAILED);   /* run.c: exit status 1 */
    coord_free(c);
}

/* The decision on a failed step reads the code only. */
static void test_step_failure_by_code(void **state) {
    (void)state;
    Coord *c = coord_new();
    step_to_training(c);
    step_result(c, "learner-0", 0, ERR_COLLECTIVE, "disk full on /tmp (a text that must not decide)", 0);
    assert_int_equal(engine_phase(c), PH_REJOIN);
    ProtobufCMessage *ctl[4];
    int n = queued(c, DAPO__MSG_TYPE__MSG_CONTROL, NULL, ctl, 4);
    assert_int_equal(n, 2);                              /* RELOAD to both ranks */
    for (int i = 0; i < n; i++) assert_int_equal(((Dapo__Control *)ctl[i])->cmd, DAPO__CONTROL_CMD__CONTROL_RELOAD);
    free_all(ctl, n);
    assert_accounting(c);
    coord_free(c);

    c = coord_new();
    step_to_training(c);
    step_result(c, "learner-1", 1, ERR_INVAL, "collective all-reduce #3: the connection to rank 0 closed", 0);
    assert_int_equal(engine_phase(c), PH_FAILED);
    assert_non_null(strstr(c->status_line, "failed (invalid argument): collective all-reduce #3"));
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_CONTROL, NULL, ctl, 4), 0);   /* nobody asked to reload */
    coord_free(c);

    c = coord_new();                                     /* ERR_STALE: the learner refused other weights: reload */
    step_to_training(c);
    step_result(c, "learner-1", 1, ERR_STALE, "step 1 trains from policy version 0, but this learner holds version 3", 0);
    assert_int_equal(engine_phase(c), PH_REJOIN);
    n = queued(c, DAPO__MSG_TYPE__MSG_CONTROL, NULL, ctl, 4);
    assert_int_equal(n, 2);
    for (int i = 0; i < n; i++) assert_int_equal(((Dapo__Control *)ctl[i])->cmd, DAPO__CONTROL_CMD__CONTROL_RELOAD);
    free_all(ctl, n);
    coord_free(c);

    c = coord_new();                                     /* no code but a text: fails too (a peer of another kind) */
    step_to_training(c);
    step_result(c, "learner-0", 0, 0, "collective", 0);
    assert_int_equal(engine_phase(c), PH_FAILED);
    assert_non_null(strstr(c->status_line, "(no error code)"));
    coord_free(c);
}

/* A learner rank that says goodbye while its shards are being trained: its weights are gone, the run rolls back. */
static void test_learner_lost_mid_update(void **state) {
    (void)state;
    Coord *c = coord_new();
    step_to_training(c);
    Dapo__Goodbye bye = DAPO__GOODBYE__INIT;
    bye.reason = "killed";
    deliver(c, "learner-1", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    assert_int_equal(engine_phase(c), PH_REJOIN);
    assert_non_null(strstr(c->engine->rejoin_why, "learner rank 1 (learner-1) was lost during the update"));
    ProtobufCMessage *ctl[4];
    int n = queued(c, DAPO__MSG_TYPE__MSG_CONTROL, "learner-0", ctl, 4);
    assert_int_equal(n, 1);                              /* the live rank is asked to reload */
    free_all(ctl, n);
    assert_accounting(c);
    coord_free(c);
}

/* A GenerateGroup that could not be sent (the send queue full): the group is queued again with its attempt and the
 * credit comes back; code ERR_CLOSED (no connection for the worker's routing id, which never comes back: issue 38):
 * the worker is lost at once, its leases go back to the queue and nothing more is sent to it (before, every
 * re-dispatch to it failed the same way, in a loop that never let the lease timeout run). */
static void send_failed(int code) {
    Coord *c = coord_new();
    register_all(c);
    WorkerEntry *r = registry_find(c, (const uint8_t *)"rollout-0", 9);
    assert_non_null(r);
    assert_int_equal(r->credit, 4);                      /* two groups of two leased */
    int wi = -1;
    uint64_t id = 0;
    uint32_t attempt = 0;
    for (int i = 0; i < c->nout; i++)
        if (c->out[i].type == DAPO__MSG_TYPE__MSG_GENERATE_GROUP) { wi = c->out[i].worker; id = c->out[i].item;
                                                                    attempt = c->out[i].attempt; break; }
    assert_true(wi >= 0);
    outbox_clear(c);
    Event ev = {.kind = EV_SEND_FAILED, .worker = wi, .type = DAPO__MSG_TYPE__MSG_GENERATE_GROUP, .item = id,
                .attempt = attempt, .code = code};
    engine_on(c, &ev, NULL);
    Group *g = eng__group_by_id(c->engine, id);
    assert_non_null(g);
    ProtobufCMessage *gen[2];
    if (code == ERR_AGAIN) {
        assert_int_equal(g->attempt, attempt);           /* sent again as the same attempt ... */
        assert_int_equal(g->state, GS_LEASED);           /* ... at once (engine_on ticks after the failure) */
        assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", gen, 2), 1);
        assert_int_equal(((Dapo__GenerateGroup *)gen[0])->group_id, id);
        free_all(gen, 1);
        assert_int_equal(r->credit, 4);
    } else {
        assert_int_equal(g->state, GS_QUEUED);           /* back in the queue, and not sent to it again */
        assert_int_equal(r->credit, 0);
        assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", gen, 2), 0);
        assert_int_equal(r->life, WORKER_ALIVE);         /* a Goodbye still queued from it may say it left ... */
        usleep(250000);
        tick(c);                                         /* ... else the next tick past 200 ms: lost */
        assert_int_equal(r->life, WORKER_LOST);
        assert_true(c->faults.leases_requeued >= 1);     /* its other lease */
    }
    assert_accounting(c);
    coord_free(c);
}

static void test_send_failed_requeues(void **state) {
    (void)state;
    send_failed(ERR_AGAIN);
    send_failed(ERR_CLOSED);
}

/* A coordinator restarted while results were in flight: a fresh state receives a GroupResult of the old process's
 * lease from a rollout it has not met. The result is not taken (no group state moves), the rollout is told to
 * register again (ErrorReply ERR_NOTFOUND), and after the workers' Hellos the new run dispatches its own step 1. */
static void test_restart_with_results_in_flight(void **state) {
    (void)state;
    Coord *old = coord_new();
    register_all(old);
    ProtobufCMessage *gen[2];
    assert_int_equal(queued(old, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", gen, 2), 2);
    Dapo__GenerateGroup *g = (Dapo__GenerateGroup *)gen[0];
    char old_run[64];
    snprintf(old_run, sizeof old_run, "%s", old->run_id);
    coord_free(old);                                     /* the coordinator dies with both leases out */

    Coord *c = coord_new();
    snprintf(c->run_id, sizeof c->run_id, "run-engine-test-2");
    int32_t tok[2] = {22, 151645};
    float lp[2] = {-0.1f, -0.2f};
    Dapo__Response r = DAPO__RESPONSE__INIT, *rp[2] = {&r, &r};
    r.token_ids = tok;
    r.n_token_ids = 2;
    r.logprobs = lp;
    r.n_logprobs = 2;
    r.finish_reason = "stop";
    Dapo__GroupResult gr = DAPO__GROUP_RESULT__INIT;
    gr.run_id = old_run;
    gr.step = 1;
    gr.group_id = g->group_id;
    gr.attempt = g->attempt;
    gr.responses = rp;
    gr.n_responses = 2;
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_GROUP_RESULT, &gr.base);
    free_all(gen, 2);
    ProtobufCMessage *er[2];
    assert_int_equal(c->nout, 1);
    assert_int_equal(c->out[0].worker, -1);              /* a reply to a peer it does not know */
    char err[ERR_LEN];
    Dapo__MsgType t;
    uint16_t v;
    assert_int_equal(net_decode(c->out[0].frame, c->out[0].len, 0, &t, &v, &er[0], err), 0);
    assert_int_equal(t, DAPO__MSG_TYPE__MSG_ERROR);
    assert_int_equal(((Dapo__ErrorReply *)er[0])->code, ERR_NOTFOUND);
    assert_int_equal(((Dapo__ErrorReply *)er[0])->in_reply_to, DAPO__MSG_TYPE__MSG_GROUP_RESULT);
    free_all(er, 1);
    outbox_clear(c);
    assert_int_equal(c->engine->next_group_id, 1);       /* nothing of the old run entered the new one */
    for (int s = 0; s < GS_COUNT; s++) assert_int_equal(c->group_counts[s], 0);
    register_all(c);
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", gen, 2), 2);
    assert_string_equal(((Dapo__GenerateGroup *)gen[0])->run_id, "run-engine-test-2");
    free_all(gen, 2);
    assert_accounting(c);
    coord_free(c);
}

/* Two learner ranks; rank 1 is lost mid-update and rank 0, told to reload, rejoins before rank 1 restarts (the
 * two-rank chaos loop's order). Rank 0's Hello decides the rollback (no checkpoint yet: back to the start); the step is
 * generated again but its batch waits for rank 1: no TrainBatch goes to a run of one rank. When rank 1 comes back the
 * step trains on both ranks, and its update is counted once. */
/* Async (trainer.staleness 2) after a rollback to the start: a rollout still holding weights of the abandoned
 * incarnation (version -1 to the coordinator) gets no group — it used to get leases whose results were dropped, and the
 * run hung until cluster.max_lease_s (found by a break test) — and a result it sends anyway puts its group back. */
static void test_async_rollback_leases_only_current_weights(void **state) {
    (void)state;
    const char *const async2[] = {"trainer.staleness", "2", NULL};
    Coord *c = coord_new_with(async2);
    register_all(c);
    generate_and_score(c);                               /* step 1 at the learners (async: step 2 generating) */
    Dapo__Goodbye bye = DAPO__GOODBYE__INIT;
    bye.reason = "killed";
    deliver(c, "learner-1", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    hello_nonce(c, "learner-0", DAPO__ROLE__ROLE_LEARNER, 0, 7001);
    hello_nonce(c, "learner-1", DAPO__ROLE__ROLE_LEARNER, 1, 7002);
    assert_int_equal(c->incarnation, 1);
    outbox_clear(c);
    for (int i = 0; i < 3; i++) tick(c);
    ProtobufCMessage *m[4];
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, NULL, m, 4), 0);   /* old weights: no lease */
    assert_accounting(c);
    coord_free(c);
}

/* Issue 41: a batch queued behind the step in training (trainer.staleness 2) is "held", not "trained", and its tokens
 * not trained, until it is sent; a stop drops it (held -> cancelled) and no run counter goes down. Sent once step 1 is
 * done: trained, and its snapshot (what a checkpoint of step 2 holds) counts it as trained too. */
static void test_held_step_counted_when_sent(void **state) {
    (void)state;
    const char *const async2[] = {"trainer.staleness", "2", NULL};
    for (int stop_it = 0; stop_it < 2; stop_it++) {
        Coord *c = coord_new_with(async2);
        register_all(c);
        generate_and_score(c);                           /* step 1 at the learners, step 2 generating */
        uint64_t tok1 = c->counters.tokens_trained;
        assert_true(tok1 > 0);
        generate_and_score(c);                           /* step 2's batch: queued behind step 1 */
        assert_int_equal(c->engine->nqueue, 1);
        assert_int_equal(c->group_counts[GS_TRAINED], 2);
        assert_int_equal(c->group_counts[GS_HELD], 2);
        assert_int_equal(c->counters.tokens_trained, tok1);
        assert_accounting(c);
        if (stop_it) {
            Event ev = {.kind = EV_STOP};
            engine_on(c, &ev, NULL);
            assert_int_equal(c->group_counts[GS_HELD], 0);
            assert_int_equal(c->group_counts[GS_CANCELLED], 2);
            assert_int_equal(c->group_counts[GS_TRAINED], 2);
            assert_int_equal(c->counters.tokens_trained, tok1);
        } else {
            outbox_clear(c);
            step_result(c, "learner-1", 1, 0, "", 0);
            step_result(c, "learner-0", 0, 0, "", 1);    /* async: done without waiting for the rollout */
            assert_int_equal(c->engine->done_steps, 1);
            assert_int_equal(c->engine->job.step, 2);    /* step 2 sent */
            assert_int_equal(c->group_counts[GS_HELD], 0);
            assert_int_equal(c->group_counts[GS_TRAINED], 4);
            assert_true(c->counters.tokens_trained > tok1);
            assert_int_equal(c->engine->job.snap.group_counts[GS_TRAINED], 4);
            assert_int_equal(c->engine->job.snap.group_counts[GS_HELD], 0);
            assert_int_equal(c->engine->job.snap.counters.tokens_trained, c->counters.tokens_trained);
        }
        assert_accounting(c);
        coord_free(c);
    }
}

/* Issue 42: a rollout whose weight probe of the version it loaded differs from the learner's by more than
 * cluster.weights_probe_tolerance gets no groups (and the run does not count it as holding the version) until a later
 * probe passes; /api/status says why. */
static void test_probe_failed_rollout_gets_no_groups(void **state) {
    (void)state;
    Coord *c = coord_new();
    step_to_training(c);
    step_result(c, "learner-1", 1, 0, "", 0);
    step_result(c, "learner-0", 0, 0, "", 1);
    outbox_clear(c);
    Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
    ack.version = 1;
    ack.probe_values = 31;
    ack.probe_max_abs_diff = 0.25f;                      /* its weights are not the learner's */
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    for (int i = 0; i < 3; i++) tick(c);
    ProtobufCMessage *m[8];
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, NULL, m, 8), 0);
    assert_int_equal(engine_phase(c), PH_WEIGHTS);       /* no rollout counts as holding version 1 */
    assert_non_null(strstr(c->status_line, "no rollout may generate: all 1 alive failed the weight probe"));
    for (int i = 0; i < c->nworkers; i++)               /* /api/status workers[].probe reads these */
        if (!strcmp(c->workers[i].id, "rollout-0"))
            assert_true(c->workers[i].probe_failed && c->workers[i].probe_version == 1 && c->workers[i].probe_diff > 0.2);
    ack.probe_max_abs_diff = 3e-7f;                      /* the next load passes: groups again */
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    for (int i = 0; i < 3; i++) tick(c);
    int n = queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", m, 8);
    assert_int_equal(n, 2);
    free_all(m, n);
    assert_accounting(c);
    coord_free(c);
}

/* ... and its leases: in async mode rollout-0 holds step 2's groups when its probe fails; they are taken back (a
 * Cancel each, queued again with attempt + 1), and its results for them, arriving anyway, are dropped: nothing
 * generated on weights the probe refused is scored or trained (a break test saw them trained). */
static void test_probe_failed_rollout_leases_taken_back(void **state) {
    (void)state;
    const char *const async1[] = {"trainer.staleness", "1", NULL};
    Coord *c = coord_new_with(async1);
    register_all(c);
    generate_and_score(c);                               /* step 1 at the learners, step 2's groups leased */
    assert_int_equal(c->group_counts[GS_LEASED], 2);
    Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
    ack.version = 0;
    ack.probe_values = 31;
    ack.probe_max_abs_diff = 0.25f;
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    ProtobufCMessage *m[8];
    int n = queued(c, DAPO__MSG_TYPE__MSG_CANCEL, "rollout-0", m, 8);
    assert_int_equal(n, 2);
    free_all(m, n);
    assert_int_equal(c->group_counts[GS_LEASED], 0);
    assert_int_equal(c->group_counts[GS_QUEUED], 2);
    n = queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", m, 8);   /* the old leases' messages */
    assert_int_equal(n, 2);
    for (int k = 0; k < n; k++) {                        /* its results for them arrive anyway: dropped */
        Dapo__GenerateGroup *g = (Dapo__GenerateGroup *)m[k];
        int32_t tok[2] = {22, 151645};
        float lp[2] = {-0.1f, -0.2f};
        Dapo__Response r[8], *rp[8];
        for (uint32_t i = 0; i < g->n; i++) {
            dapo__response__init(&r[i]);
            r[i].token_ids = tok; r[i].n_token_ids = 2; r[i].logprobs = lp; r[i].n_logprobs = 2;
            r[i].finish_reason = "stop"; r[i].text.data = (uint8_t *)"7"; r[i].text.len = 1;
            rp[i] = &r[i];
        }
        Dapo__GroupResult gr = DAPO__GROUP_RESULT__INIT;
        gr.run_id = c->run_id; gr.step = g->step; gr.group_id = g->group_id; gr.attempt = g->attempt;
        gr.responses = rp; gr.n_responses = g->n;
        deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_GROUP_RESULT, &gr.base);
    }
    free_all(m, n);
    assert_int_equal(c->group_counts[GS_QUEUED], 2);
    assert_int_equal(c->group_counts[GS_GENERATED] + c->group_counts[GS_SCORING] + c->group_counts[GS_KEPT], 0);
    tick(c);                                             /* the only rollout refused: the status line says so */
    assert_non_null(strstr(c->status_line, "no rollout may generate: all 1 alive failed the weight probe"));
    assert_accounting(c);
    coord_free(c);
}

static void test_rank_rejoins_before_another_restarts(void **state) {
    (void)state;
    Coord *c = coord_new();
    step_to_training(c);
    Dapo__Goodbye bye = DAPO__GOODBYE__INIT;
    bye.reason = "killed";
    deliver(c, "learner-1", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    assert_int_equal(engine_phase(c), PH_REJOIN);
    assert_int_equal(ckpt_phase(c), CKPT_RESUMING);      /* rank 0's next Hello decides where to */
    bye.reason = "asked to reload";                      /* rank 0 exits to reload (status 75) */
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    outbox_clear(c);
    hello_nonce(c, "learner-0", DAPO__ROLE__ROLE_LEARNER, 0, 7001);   /* its new process, no checkpoint to load */
    assert_int_equal(engine_phase(c), PH_IDLE);          /* rolled back to the start of the run ... */
    assert_int_equal((int)c->faults.rollbacks, 1);
    assert_int_equal(c->incarnation, 1);
    assert_int_equal(c->policy_version, 0);
    assert_int_equal(c->group_counts[GS_TRAINED], 0);    /* ... the abandoned step's groups no longer count */
    assert_accounting(c);
    for (int i = 0; i < 3; i++) tick(c);                 /* one rank of two: nothing is generated or trained */
    assert_int_equal(engine_phase(c), PH_IDLE);
    ProtobufCMessage *m[4];
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, NULL, m, 4), 0);
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, NULL, m, 4), 0);
    outbox_clear(c);
    hello_nonce(c, "learner-1", DAPO__ROLE__ROLE_LEARNER, 1, 7002);   /* rank 1's supervisor restarts it */
    tick(c);
    assert_int_equal(engine_phase(c), PH_IDLE);          /* the rollout holds weights of the old incarnation */
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, NULL, m, 4), 0);
    Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
    ack.version = 0;
    ack.incarnation = 1;
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    generate_and_score(c);                               /* step 1 again, both ranks live */
    assert_int_equal(engine_phase(c), PH_TRAIN);
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, "learner-0", m, 4), 1);
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, "learner-1", m + 1, 3), 1);
    assert_int_equal(((Dapo__TrainBatch *)m[0])->step, 1);
    assert_int_equal(((Dapo__TrainBatch *)m[1])->rank, 1);
    free_all(m, 2);
    outbox_clear(c);
    step_result(c, "learner-1", 1, 0, "", 0);
    step_result(c, "learner-0", 0, 0, "", 1);
    assert_int_equal(c->policy_version, 1);
    assert_int_equal(c->group_counts[GS_TRAINED], 2);    /* the retrained step counted once */
    assert_int_equal(c->group_counts[GS_CANCELLED], 0);
    assert_accounting(c);
    coord_free(c);
}


/* A step of two generation rounds (dynamic sampling: round 1's groups all right, filtered; round 2's mixed, kept),
 * trained, then the validation trainer.test_freq asks for after it (4 held-out prompts x val_kwargs.n 2): the
 * accounting adds up after each, the step's row counts both rounds, and the validation's row holds val-core/. */
static void test_validation_after_multi_round_step(void **state) {
    (void)state;
    char val[600];
    snprintf(val, sizeof val, "%s/test-logs/coord-engine-val.jsonl", tu_build());
    write_dataset(val);
    const char *const extra_val[] = {"trainer.test_freq", "1", "actor_rollout_ref.rollout.val_kwargs.n", "2",
                                     "data.val_files", val, NULL};
    Coord *c = coord_new_with(extra_val);
    register_all(c);
    assert_int_equal(answer_round(c, 2), 2);             /* round 1: every response right: both groups filtered */
    assert_int_equal(c->group_counts[GS_FILTERED], 2);
    assert_int_equal(engine_phase(c), PH_GENERATE);
    assert_int_equal(c->engine->round, 2);
    assert_int_equal(answer_round(c, 1), 2);             /* round 2: one of two right: kept, the batch goes out */
    assert_int_equal(engine_phase(c), PH_TRAIN);
    assert_int_equal(c->group_counts[GS_TRAINED], 2);
    assert_accounting(c);
    outbox_clear(c);
    finish_step1(c);
    const Metrics *row = &c->history[0];
    assert_true(metrics_get(row, "train/num_gen_batches", NAN) == 2.0);
    assert_int_equal(engine_phase(c), PH_VALIDATE);      /* test_freq 1: the validation before step 2 */
    int nv = 0, n;
    for (int idle = 0; idle < 2 && engine_phase(c) == PH_VALIDATE; nv += n) {   /* half of each group right, as
                                                                                     credit allows */
        n = answer_round(c, 1);
        idle = n ? 0 : idle + 1;
        if (!n) tick(c);                                 /* the cron dispatches what a credit freed */
    }
    assert_int_equal(nv, 8);                             /* every held-out prompt */
    assert_int_equal(c->group_counts[GS_VALIDATED], 8);
    assert_int_equal(c->nhistory, 2);
    double acc = metrics_get(&c->history[1], "val-core/toy/acc/mean@2", NAN);
    assert_true(fabs(acc - 0.5) < 1e-9);
    assert_int_equal(engine_phase(c), PH_GENERATE);      /* then step 2 */
    assert_accounting(c);
    coord_free(c);
}

/* The dashboard's checkpoint while a step is with the learners is asked as that step finishes (the learner would
 * refuse it mid-step: it is ahead of the last finished step), not at once. */
static void test_checkpoint_during_a_step_waits(void **state) {
    (void)state;
    Coord *c = coord_new();
    step_to_training(c);
    char err[ERR_LEN];
    Event ck = {.kind = EV_CHECKPOINT};
    assert_int_equal(engine_on(c, &ck, err), 0);
    const OutAction *f = NULL;
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 0);   /* not now */
    assert_int_equal(ckpt_phase(c), CKPT_REQUESTED);
    finish_step1(c);
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 1);   /* step 1 finished: asked */
    assert_int_equal(f->item, 1);
    assert_int_equal(f->attempt, CKPT_W_ASK);
    assert_int_equal(ckpt_phase(c), CKPT_ASKED);
    coord_free(c);
}

/* A Hello from connection `peer` as worker `id`, with no credit. */
static void hello_on(Coord *c, const char *peer, const char *id, Dapo__Role role, uint64_t nonce) {
    Dapo__Hello h = DAPO__HELLO__INIT;
    h.protocol_version = DAPO_PROTOCOL_VERSION;
    h.role = role;
    h.worker_id = (char *)id;
    h.capacity = 8;
    h.world_size = 1;
    h.nonce = nonce;
    h.attempt = 1;
    deliver(c, peer, DAPO__MSG_TYPE__MSG_HELLO, &h.base);
}

static int count_id(const Coord *c, const char *id) {
    int n = 0;
    for (int i = 0; i < c->nworkers; i++) n += !strcmp(c->workers[i].id, id);
    return n;
}

/* Issue 38: every result counts only from the worker it belongs to. A registered rollout's StepResult (a failure
 * code, a far version) and CHECKPOINT_DONE, a learner rank's result naming another rank or a version that is not
 * the next one, a checkpoint confirmed by rank 1, another rollout's GroupResult for a lease it does not hold: each
 * dropped (counted as messages_wrong_role where the sender is the wrong one), and the run goes on as if they never
 * came. A connection registered as one worker cannot re-register as another. */
static void test_results_only_from_their_sender(void **state) {
    (void)state;
    Coord *c = coord_new();
    register_all(c);
    hello_on(c, "conn-7", "rollout-7", DAPO__ROLE__ROLE_ROLLOUT, 77);       /* a second rollout, no credit */
    uint64_t refused = c->hellos_refused;
    hello_on(c, "conn-7", "rollout-0", DAPO__ROLE__ROLE_ROLLOUT, 78);       /* the same connection as rollout-0 */
    assert_int_equal(c->hellos_refused, refused + 1);
    assert_int_equal(count_id(c, "rollout-0"), 1);
    assert_int_equal(count_id(c, "rollout-7"), 1);
    ProtobufCMessage *gen[16];                            /* rollout-7 answers a group leased to rollout-0 */
    int ng = queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", gen, 16);
    assert_true(ng > 0);
    Dapo__GenerateGroup *g0 = (Dapo__GenerateGroup *)gen[0];
    Dapo__GroupResult gr = DAPO__GROUP_RESULT__INIT;
    gr.run_id = c->run_id;
    gr.group_id = g0->group_id;
    gr.attempt = g0->attempt;
    gr.error = "made up";                                 /* as the holder's, it would send the group back */
    deliver(c, "conn-7", DAPO__MSG_TYPE__MSG_GROUP_RESULT, &gr.base);
    assert_int_equal(eng__group_by_id(c->engine, g0->group_id)->state, GS_LEASED);
    free_all(gen, ng);
    generate_and_score(c);
    assert_int_equal(engine_phase(c), PH_TRAIN);
    outbox_clear(c);
    Dapo__StepResult r = DAPO__STEP_RESULT__INIT;
    r.run_id = c->run_id;
    r.step = 1;
    r.code = ERR_INVAL;
    r.error = "forged";
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_STEP_RESULT, &r.base);      /* a rollout's failure report */
    r.code = 0;
    r.error = "";
    r.new_policy_version = 999999;
    deliver(c, "conn-7", DAPO__MSG_TYPE__MSG_STEP_RESULT, &r.base);
    assert_int_equal(c->msgs_wrong_role, 2);
    assert_int_equal(engine_phase(c), PH_TRAIN);
    step_result(c, "learner-1", 0, 0, "", 0);             /* rank 1 naming rank 0 */
    step_result(c, "learner-0", 0, 0, "", 999999);        /* not the next version */
    assert_int_equal(c->msgs_wrong_role, 4);
    assert_int_equal(c->engine->job.results, 0);
    assert_int_equal(c->policy_version, 0);
    Dapo__Goodbye bye = DAPO__GOODBYE__INIT;               /* (else the step would wait for its weights too) */
    bye.reason = "done";
    deliver(c, "conn-7", DAPO__MSG_TYPE__MSG_GOODBYE, &bye.base);
    finish_step1(c);                                      /* the real results still finish the step */
    char err[ERR_LEN];
    Event ck = {.kind = EV_CHECKPOINT};
    assert_int_equal(engine_on(c, &ck, err), 0);
    assert_int_equal(ckpt_phase(c), CKPT_ASKED);
    Dapo__Control done = DAPO__CONTROL__INIT;
    done.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT_DONE;
    done.step = 1;
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    deliver(c, "learner-1", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    assert_int_equal(c->msgs_wrong_role, 6);
    assert_int_equal(ckpt_phase(c), CKPT_ASKED);
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    assert_int_equal(ckpt_phase(c), CKPT_SAVED);
    assert_accounting(c);
    size_t len;                                           /* /metrics: the run's counters, and none while resuming */
    char *t = prom_text(c, &len);
    assert_non_null(strstr(t, "\ndapo_groups_kept_total 2\n"));
    assert_non_null(strstr(t, "\ndapo_coordinator_resuming 0\n"));
    xfree(t);
    c->ckpt.undecided = 1;
    t = prom_text(c, &len);
    assert_null(strstr(t, "dapo_groups_kept_total"));
    assert_null(strstr(t, "dapo_groups_finished_total"));
    assert_null(strstr(t, "dapo_coordinator_step"));
    assert_null(strstr(t, "dapo_coordinator_policy_version"));
    assert_non_null(strstr(t, "\ndapo_coordinator_resuming 1\n"));
    xfree(t);
    c->ckpt.undecided = 0;
    coord_free(c);
}

/* Issue 39: with the optimizer sharded over the two learner ranks, a checkpoint asks both (rank 0 behind
 * coordinator.json, rank 1 for its shard) and counts as saved only once both confirmed. */
static void test_sharded_checkpoint_asks_every_rank(void **state) {
    (void)state;
    const char *extra[] = {"actor_rollout_ref.actor.fsdp_config.fsdp_size", "-1", NULL};
    Coord *c = coord_new_with(extra);
    step_to_training(c);
    finish_step1(c);
    outbox_clear(c);
    char err[ERR_LEN];
    Event ck = {.kind = EV_CHECKPOINT};
    assert_int_equal(engine_on(c, &ck, err), 0);
    const OutAction *f = NULL;
    assert_int_equal(file_actions(c, OUT_CKPT_FILE, &f), 1);
    assert_non_null(f->frame);                                   /* rank 0's, once the file is written */
    assert_string_equal(c->workers[f->worker].id, "learner-0");
    ProtobufCMessage *ctl[2];
    assert_int_equal(queued(c, DAPO__MSG_TYPE__MSG_CONTROL, "learner-1", ctl, 2), 1);
    assert_int_equal(((Dapo__Control *)ctl[0])->cmd, DAPO__CONTROL_CMD__CONTROL_CHECKPOINT);
    free_all(ctl, 1);
    Dapo__Control done = DAPO__CONTROL__INIT;
    done.cmd = DAPO__CONTROL_CMD__CONTROL_CHECKPOINT_DONE;
    done.step = 1;
    deliver(c, "learner-1", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    assert_int_equal(ckpt_phase(c), CKPT_ASKED);                 /* rank 0's part still to come */
    assert_int_equal(c->msgs_wrong_role, 0);
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_CONTROL, &done.base);
    assert_int_equal(ckpt_phase(c), CKPT_SAVED);
    coord_free(c);
}

/* Issue 38 (helper-9): a rollout that heartbeats but never loads the new weights holds the run up for
 * cluster.lease_timeout_s at most, then the run goes on with the rollouts that have them and waits for it no more at
 * the next version either; a group whose response
 * carries a NaN log-prob is rejected and generated again, never sent to the learners. */
static void test_lagging_rollout_and_bad_logprobs(void **state) {
    (void)state;
    const char *extra[] = {"cluster.lease_timeout_s", "1", NULL};
    Coord *c = coord_new_with(extra);
    register_all(c);
    hello_on(c, "conn-9", "rollout-9", DAPO__ROLE__ROLE_ROLLOUT, 99);       /* no credit: never given a group */
    ProtobufCMessage *gen[16];
    int ng = queued(c, DAPO__MSG_TYPE__MSG_GENERATE_GROUP, "rollout-0", gen, 16);
    assert_true(ng > 0);
    Dapo__GenerateGroup *g0 = (Dapo__GenerateGroup *)gen[0];
    int32_t tok[2] = {22, 151645};
    float lp[2] = {-0.1f, NAN};
    Dapo__Response r[8], *rp[8];
    for (uint32_t i = 0; i < g0->n; i++) {
        dapo__response__init(&r[i]);
        r[i].token_ids = tok; r[i].n_token_ids = 2; r[i].logprobs = lp; r[i].n_logprobs = 2;
        r[i].finish_reason = "stop";
        rp[i] = &r[i];
    }
    Dapo__GroupResult gr = DAPO__GROUP_RESULT__INIT;
    gr.run_id = c->run_id;
    gr.group_id = g0->group_id;
    gr.attempt = g0->attempt;
    gr.responses = rp;
    gr.n_responses = g0->n;
    uint64_t gid = g0->group_id;
    uint32_t att = g0->attempt;
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_GROUP_RESULT, &gr.base);
    free_all(gen, ng);
    Group *g = eng__group_by_id(c->engine, gid);
    assert_true(g->attempt == att + 1 && (g->state == GS_QUEUED || g->state == GS_LEASED));   /* generated again */
    coord_free(c);
    c = coord_new_with(extra);                                   /* the lagging rollout, on a fresh run */
    register_all(c);
    hello_on(c, "conn-9", "rollout-9", DAPO__ROLE__ROLE_ROLLOUT, 99);
    generate_and_score(c);
    assert_int_equal(engine_phase(c), PH_TRAIN);
    outbox_clear(c);
    step_result(c, "learner-1", 1, 0, "", 0);
    step_result(c, "learner-0", 0, 0, "", 1);
    Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
    ack.version = 1;
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    assert_int_equal(c->engine->done_steps, 0);                  /* rollout-9 holds version 0 */
    Dapo__Heartbeat hb = DAPO__HEARTBEAT__INIT, hb1 = DAPO__HEARTBEAT__INIT;
    hb1.policy_version = 1;                                      /* rollout-0's: it holds version 1 */
    for (int k = 0; k < 12 && c->engine->done_steps == 0; k++) {  /* it heartbeats on, and never loads version 1 */
        usleep(100000);
        deliver(c, "conn-9", DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base);
        deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb1.base);
        deliver(c, "verifier-0", DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base);
        deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base);
        deliver(c, "learner-1", DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base);
        tick(c);
    }
    assert_int_equal(c->engine->done_steps, 1);                  /* after cluster.lease_timeout_s, without it */
    assert_int_equal(registry_count(c, DAPO__ROLE__ROLE_ROLLOUT, WORKER_ALIVE), 2);
    /* step 2: the run waits for it no more (helper-10: it cost every step the timeout) */
    generate_and_score(c);
    assert_int_equal(engine_phase(c), PH_TRAIN);
    Dapo__StepResult s2 = DAPO__STEP_RESULT__INIT;
    s2.run_id = c->run_id;
    s2.step = 2;
    s2.rank = 1;
    deliver(c, "learner-1", DAPO__MSG_TYPE__MSG_STEP_RESULT, &s2.base);
    s2.rank = 0;
    s2.new_policy_version = 2;
    deliver(c, "learner-0", DAPO__MSG_TYPE__MSG_STEP_RESULT, &s2.base);
    ack.version = 2;
    deliver(c, "rollout-0", DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    assert_int_equal(c->engine->done_steps, 2);                  /* at once */
    assert_accounting(c);
    coord_free(c);
}

int main(void) {
    log_init("test", LL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_and_update),
        cmocka_unit_test(test_checkpoint_file_actions),
        cmocka_unit_test(test_checkpoint_during_a_step_waits),
        cmocka_unit_test(test_step_failure_by_code),
        cmocka_unit_test(test_learner_lost_mid_update),
        cmocka_unit_test(test_send_failed_requeues),
        cmocka_unit_test(test_restart_with_results_in_flight),
        cmocka_unit_test(test_rank_rejoins_before_another_restarts),
        cmocka_unit_test(test_async_rollback_leases_only_current_weights),
        cmocka_unit_test(test_held_step_counted_when_sent),
        cmocka_unit_test(test_probe_failed_rollout_gets_no_groups),
        cmocka_unit_test(test_probe_failed_rollout_leases_taken_back),
        cmocka_unit_test(test_validation_after_multi_round_step),
        cmocka_unit_test(test_finished_run_waits_for_its_last_checkpoint),
        cmocka_unit_test(test_results_only_from_their_sender),
        cmocka_unit_test(test_sharded_checkpoint_asks_every_rank),
        cmocka_unit_test(test_lagging_rollout_and_bad_logprobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
