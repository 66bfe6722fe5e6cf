/* tests/integration/test_coord_replay.c: a run's event log replayed through a fresh engine gives the same actions
 * (issue 35). dapo-coordinator runs 2 steps and a validation over loopback with scripted workers (tests/fake_workers.h:
 * two rollouts, a learner, a verifier) and cluster.event_log set, then is stopped in order (its checkpoint); the test
 * reads the log back (services/coordinator/evlog.h), builds a coordinator state from the logged config and run id,
 * feeds every logged event to engine_on in order and checks, after each, that the outbox holds exactly the actions the
 * live coordinator carried out after it: kind, destination, message type and every byte of the frame. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <zmq.h>

#include "core/clock.h"
#include "net/worker.h"
#include "services/coordinator/engine.h"
#include "services/coordinator/evlog.h"
#include "services/coordinator/persist.h"
#include "tests/fake_workers.h"
#include "tests/testutil.h"

/* 12 prompts whose token lengths differ (fake_group_class: all right, mixed or all wrong by length), truth "7". */
static void write_dataset(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 12; i++) {
        fprintf(f, "{\"data_source\":\"toy\",\"prompt\":[{\"role\":\"user\",\"content\":\"What is 3+4?");
        for (int k = 0; k < i; k++) fprintf(f, " x");
        fprintf(f, "\"}],\"ability\":\"MATH\",\"reward_model\":{\"ground_truth\":\"7\",\"style\":\"rule\"}}\n");
    }
    fclose(f);
}

typedef struct {
    char dir[256], log[320];
    FakeRollout r[2];
    FakeLearner l;
    FakeVerifier v;
} Live;

/* The live run: 2 steps (a multi-round one among them: a third of the groups are all right, a third all wrong), the
 * validation after the last, the stop. Returns once the coordinator exited. */
static void live_run(Live *L) {
    memset(L, 0, sizeof *L);
    snprintf(L->dir, sizeof L->dir, "%s/test-logs/coord-replay", tu_build());
    char cmd[600], data[300], bin[256], clog[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", L->dir, L->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(data, sizeof data, "%s/toy.jsonl", L->dir);
    write_dataset(data);
    snprintf(L->log, sizeof L->log, "%s/events.log", L->dir);
    int hport = tu_free_port();
    char zep[64], a_bind[96], a_http[64], a_train[320], a_val[320], a_tok[320], a_dir[320], a_log[340];
    snprintf(zep, sizeof zep, "tcp://127.0.0.1:%d", tu_free_port());
    snprintf(a_bind, sizeof a_bind, "cluster.bind=%s", zep);
    snprintf(a_http, sizeof a_http, "cluster.http=127.0.0.1:%d", hport);
    snprintf(a_train, sizeof a_train, "data.train_files=%s", data);
    snprintf(a_val, sizeof a_val, "data.val_files=%s", data);
    snprintf(a_tok, sizeof a_tok, "data.tokenizer=%s/data/tokenizers/qwen3", tu_root());
    snprintf(a_dir, sizeof a_dir, "trainer.default_local_dir=%s/ckpt", L->dir);
    snprintf(a_log, sizeof a_log, "cluster.event_log=%s", L->log);
    snprintf(clog, sizeof clog, "%s/coordinator.log", L->dir);
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-coordinator"), TU_DAPO_RECIPE, a_bind, a_http, a_train, a_val, a_tok, a_dir,
                    a_log, "data.train_batch_size=4", "data.gen_batch_size=6", "trainer.total_epochs=5", "actor_rollout_ref.rollout.n=4",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=2", "trainer.total_training_steps=2",
                    "trainer.test_freq=2", "actor_rollout_ref.rollout.val_kwargs.n=2", "data.max_response_length=64",
                    "reward_model.overlong_buffer.enable=true", "reward_model.overlong_buffer.len=16", "trainer.val_before_train=false", "trainer.save_freq=1",
                    "cluster.heartbeat_ms=100", "cluster.lease_timeout_s=5", NULL};
    pid_t coord = tu_spawn(argv, clog);
    snprintf(L->v.endpoint, sizeof L->v.endpoint, "%s", zep);
    snprintf(L->v.id, sizeof L->v.id, "verifier-0");
    L->v.capacity = 8;
    pthread_create(&L->v.th, NULL, verifier_main, &L->v);
    for (int i = 0; i < 2; i++) {
        snprintf(L->r[i].endpoint, sizeof L->r[i].endpoint, "%s", zep);
        snprintf(L->r[i].id, sizeof L->r[i].id, "rollout-%d", i);
        L->r[i].mode = MODE_BY_LENGTH;
        L->r[i].capacity = 8;
        pthread_create(&L->r[i].th, NULL, rollout_main, &L->r[i]);
    }
    snprintf(L->l.endpoint, sizeof L->l.endpoint, "%s", zep);
    pthread_create(&L->l.th, NULL, learner_main, &L->l);
    static char body[1 << 18];
    int done = 0;
    for (int64_t end = clock_ms() + 60000; clock_ms() < end && !done; usleep(100000)) {
        if (tu_http(hport, "GET", "/api/status", NULL, body, sizeof body) != 200) continue;
        json_t *j = json_loads(body, 0, NULL);
        const char *ph = json_string_value(json_object_get(j, "phase"));
        done = ph && !strcmp(ph, "done");
        json_decref(j);
    }
    kill(coord, SIGTERM);                              /* the stop: its checkpoint, then the exit (logged too) */
    int rc = tu_wait(coord, 15000);
    for (int i = 0; i < 2; i++) { L->r[i].stop = 1; pthread_join(L->r[i].th, NULL); }
    L->l.stop = 1;
    pthread_join(L->l.th, NULL);
    L->v.stop = 1;
    pthread_join(L->v.th, NULL);
    if (!done) fail_msg("the live run did not finish; last status: %.400s", body);
    assert_int_equal(rc, 0);
}

/* The coordinator state the logged run started with: its config (YAML) and run id. */
static Coord *replay_coord(const EvRecord *h, const char *dir) {
    char path[400], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/replay-config.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(h->frame, 1, h->frame_len, f);
    fclose(f);
    Coord *c = xcalloc(1, sizeof *c);
    config_defaults(&c->cfg);
    if (config_load_file(&c->cfg, path, err)) fail_msg("%s", err);
    if (config_set(&c->cfg, "cluster.event_log", "", "test", err)) fail_msg("%s", err);
    c->lock_fd = -1;
    snprintf(c->run_id, sizeof c->run_id, "%s", h->run_id);
    c->config_yaml = xstrdup((const char *)h->frame);   /* as coord_start: Welcome carries it, and the run keys' hash */
    c->run_config = config_run_keys(&c->cfg, false, &c->config_hash);
    c->started_ms = clock_ms();
    if (engine_start(c, err)) fail_msg("engine_start: %s", err);
    if (persist_events_open(c, err)) fail_msg("%s", err);   /* as the live start: "run started" queued (the live
                                                              run's events.jsonl, done with, is set aside) */
    return c;
}

/* The live run's actions after one event (records up to the next event) against the replay's outbox. */
static void compare(Coord *c, EvLogReader *rd, EvRecord *r, long nev, int *more) {
    char err[ERR_LEN];
    int k = 0, rc;
    while ((rc = evlog_next(rd, r, err)) == 1 && r->tag == 'A') {
        if (k >= c->nout) fail_msg("event %ld: the live run's action %d (%s) is missing in the replay", nev, k,
                                   net_type_name(r->type));
        const OutAction *a = &c->out[k];
        if ((int)a->kind != r->kind || a->worker != r->worker || (a->kind == OUT_SEND && a->type != r->type) ||
            a->len != r->frame_len || (a->len && memcmp(a->frame, r->frame, a->len)))
            fail_msg("event %ld, action %d: live %s to worker %d (%zu bytes), replay %s to worker %d (%zu bytes)", nev, k,
                     net_type_name(r->type), r->worker, r->frame_len, net_type_name(a->type), a->worker, a->len);
        k++;
    }
    assert_true(rc >= 0);
    if (k != c->nout)
        for (int i = 0; i < c->nout; i++)
            print_message("  replay action %d: %s to worker %d\n", i, net_type_name(c->out[i].type), c->out[i].worker);
    if (k != c->nout) fail_msg("event %ld: the replay queued %d actions, the live run carried out %d", nev, c->nout, k);
    outbox_clear(c);
    *more = rc == 1;
}

static void test_replay_gives_the_same_actions(void **state) {
    (void)state;
    static Live L;
    live_run(&L);
    char err[ERR_LEN];
    EvLogReader *rd = evlog_reader_open(L.log, err);
    if (!rd) fail_msg("%s", err);
    EvRecord r;
    assert_int_equal(evlog_next(rd, &r, err), 1);
    assert_int_equal(r.tag, 'H');
    Coord *c = replay_coord(&r, L.dir);
    int more = 1;
    long nev = 0, msgs = 0, ticks = 0, actions = 0;
    compare(c, rd, &r, -1, &more);                     /* what the start queued ("run started"; no checkpoint) */
    while (more) {
        assert_int_equal(r.tag, 'E');
        NetMsg nm;
        memset(&nm, 0, sizeof nm);
        Event ev = {.kind = (EventKind)r.kind, .worker = r.worker, .type = r.type, .item = r.item, .attempt = r.attempt,
                    .code = r.code};
        if (r.kind == EV_MESSAGE || r.kind == EV_BAD_HELLO) {
            ProtobufCMessage *pm = NULL;
            uint16_t v;
            assert_int_equal(net_decode(r.frame, r.frame_len, 0, &nm.type, &v, &pm, err), 0);
            nm.msg = pm;
            nm.version = r.version;
            nm.bytes = r.frame_len;
            nm.peer_len = r.peer_len;
            memcpy(nm.peer, r.peer, r.peer_len);
            snprintf(nm.peer_key, sizeof nm.peer_key, "%s", r.key);
            snprintf(nm.peer_address, sizeof nm.peer_address, "%s", r.address);
            ev.msg = &nm;
            msgs++;
        }
        ticks += r.kind == EV_TICK;
        engine_on(c, &ev, err);
        net_msg_free(&nm);
        actions += c->nout;
        compare(c, rd, &r, nev++, &more);
    }
    evlog_reader_close(rd);
    print_message("replayed %ld events (%ld messages, %ld ticks), %ld actions, all equal\n", nev, msgs, ticks, actions);
    assert_true(msgs > 50);
    assert_int_equal(c->engine->done_steps, 2);
    assert_int_equal(engine_phase(c), PH_DONE);
    assert_int_equal(c->stopping, 2);                  /* the stop too */
    coord_state_free(c);
    xfree(c);
}

/* A log cut short (a crash mid-write) reads back to the cut, then names the record that does not parse. */
static void test_truncated_log_names_the_cut(void **state) {
    (void)state;
    char path[320], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/test-logs/coord-replay-cut.log", tu_build());
    Config cfg;
    config_defaults(&cfg);
    EvLog *l = evlog_open(path, "run-x", &cfg, err);
    assert_non_null(l);
    Event tick = {.kind = EV_TICK};
    evlog_event(l, &tick);
    evlog_event(l, &tick);
    evlog_close(l);
    config_free(&cfg);
    FILE *f = fopen(path, "r+");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    assert_int_equal(ftruncate(fileno(f), ftell(f) - 3), 0);
    fclose(f);
    EvLogReader *rd = evlog_reader_open(path, err);
    assert_non_null(rd);
    EvRecord r;
    assert_int_equal(evlog_next(rd, &r, err), 1);
    assert_int_equal(r.tag, 'H');
    assert_string_equal(r.run_id, "run-x");
    assert_int_equal(evlog_next(rd, &r, err), 1);
    assert_int_equal(r.kind, EV_TICK);
    assert_int_equal(evlog_next(rd, &r, err), ERR_DECODE);
    assert_non_null(strstr(err, "does not parse"));
    evlog_reader_close(rd);
    snprintf(path, sizeof path, "%s/test-logs/coord-replay-not.log", tu_build());
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("a text file\n", f);
    fclose(f);
    assert_null(evlog_reader_open(path, err));
    assert_non_null(strstr(err, "not a dapo event log"));
}

int main(void) {
    log_init("test", LL_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_log_names_the_cut),
        cmocka_unit_test(test_replay_gives_the_same_actions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
