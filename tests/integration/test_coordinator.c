/* tests/integration/test_coordinator.c: the coordinator's step engine with scripted fake workers speaking the real
 * protocol (rollouts and learners as threads on common/net/worker.h) and the real dapo-verifier: dynamic-sampling
 * rounds, batch alignment and shards, policy versions, validation metrics, the max_num_gen_batches error, a rollout
 * that dies mid-step, duplicate results, group accounting that always adds up, resume, and a learner whose checkpoint
 * the coordinator does not have. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/exitcode.h"
#include "net/worker.h"
#include "tests/fake_workers.h"
#include "tests/group_status.h"
#include "tests/testutil.h"

typedef struct {
    pid_t coord, verifier;
    int hport;
    char zep[64], dir[256];
    FakeRollout r[2];
    FakeLearner l;
    FakeVerifier v[2];           /* with g_fake_verifiers: scripted verifiers instead of dapo-verifier */
    int nv;
} Run;

static int g_fake_verifiers;     /* start_run: v[0] (muted: never answers) and v[1] instead of dapo-verifier */
static int64_t g_learner_version;   /* start_run: the policy version the fake learner says it loaded */

/* 24 prompts whose token lengths differ, every ground truth "7". */
static void write_dataset(const char *path) {
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 24; i++) {
        fprintf(f, "{\"data_source\":\"toy\",\"prompt\":[{\"role\":\"user\",\"content\":\"What is 3+4?");
        for (int k = 0; k < i; k++) fprintf(f, " x");
        fprintf(f, "\"}],\"ability\":\"MATH\",\"reward_model\":{\"ground_truth\":\"7\",\"style\":\"rule\"},"
                   "\"extra_info\":{\"index\":%d}}\n", i);
    }
    fclose(f);
}

static Run *g_run;               /* the run a test started, for the teardown */
static const char *g_extra3;     /* one more coordinator override for the next start_run (reset by it) */
static const char *g_extra4;     /* and another, after g_extra3 */
static const char *g_extra5;     /* and another, after g_extra4 */

static void start_run(Run *r, int mode, const char *extra1, const char *extra2) {
    memset(r, 0, sizeof *r);
    g_run = r;
    snprintf(r->dir, sizeof r->dir, "%s/test-logs/coordinator-%d", tu_build(), mode);
    char cmd[600], data[300], bin[256], log[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", r->dir, r->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(data, sizeof data, "%s/toy.jsonl", r->dir);
    write_dataset(data);
    int zport = tu_free_port();
    r->hport = tu_free_port();
    snprintf(r->zep, sizeof r->zep, "tcp://127.0.0.1:%d", zport);
    char a_bind[96], a_http[64], a_train[320], a_val[320], a_tok[320], a_dir[320];
    snprintf(a_bind, sizeof a_bind, "cluster.bind=%s", r->zep);
    snprintf(a_http, sizeof a_http, "cluster.http=127.0.0.1:%d", r->hport);
    snprintf(a_train, sizeof a_train, "data.train_files=%s", data);
    snprintf(a_val, sizeof a_val, "data.val_files=%s", data);
    snprintf(a_tok, sizeof a_tok, "data.tokenizer=%s/data/tokenizers/qwen3", tu_root());
    snprintf(a_dir, sizeof a_dir, "trainer.default_local_dir=%s/ckpt", r->dir);
    snprintf(log, sizeof log, "%s/coordinator.log", r->dir);
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-coordinator"), TU_DAPO_RECIPE, a_bind, a_http, a_train, a_val, a_tok, a_dir,
                    "data.train_batch_size=4", "data.gen_batch_size=6", "trainer.total_epochs=5", "actor_rollout_ref.rollout.n=4",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=2", "trainer.total_training_steps=2",
                    "trainer.test_freq=2", "actor_rollout_ref.rollout.val_kwargs.n=2", "data.max_response_length=64",
                    "reward_model.overlong_buffer.enable=true", "reward_model.overlong_buffer.len=16", "cluster.heartbeat_ms=100", "cluster.lease_timeout_s=1.5",
                    (char *)extra1, (char *)(extra1 ? extra2 : NULL), (char *)(extra1 && extra2 ? g_extra3 : NULL),
                    (char *)(extra1 && extra2 && g_extra3 ? g_extra4 : NULL),
                    (char *)(extra1 && extra2 && g_extra3 && g_extra4 ? g_extra5 : NULL), NULL};
    g_extra3 = g_extra4 = g_extra5 = NULL;
    r->coord = tu_spawn(argv, log);
    char coord[96];
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", r->zep);
    snprintf(log, sizeof log, "%s/verifier.log", r->dir);
    char *vargv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-verifier"), coord, "cluster.heartbeat_ms=100",
                     "cluster.verifier_threads=1", "--id", "verifier-0", NULL};
    if (!g_fake_verifiers) r->verifier = tu_spawn(vargv, log);
    for (int i = 0; g_fake_verifiers && i < 2; i++) {
        FakeVerifier *v = &r->v[r->nv++];
        snprintf(v->endpoint, sizeof v->endpoint, "%s", r->zep);
        snprintf(v->id, sizeof v->id, "verifier-%s", i ? "ok" : "muted");
        v->capacity = 8;
        v->mute = i == 0;
        pthread_create(&v->th, NULL, verifier_main, v);
    }
    for (int i = 0; i < 2; i++) {
        snprintf(r->r[i].endpoint, sizeof r->r[i].endpoint, "%s", r->zep);
        snprintf(r->r[i].id, sizeof r->r[i].id, "rollout-%d", i);
        r->r[i].mode = mode;
        r->r[i].capacity = 8;
        pthread_create(&r->r[i].th, NULL, rollout_main, &r->r[i]);
    }
    snprintf(r->l.endpoint, sizeof r->l.endpoint, "%s", r->zep);
    r->l.version = g_learner_version;
    pthread_create(&r->l.th, NULL, learner_main, &r->l);
}

static int g_want_exit;          /* stop_run: the coordinator's exit status (1 after a failed run) */

static void stop_run(Run *r) {
    for (int i = 0; i < 2; i++) { r->r[i].stop = 1; pthread_join(r->r[i].th, NULL); }
    r->l.stop = 1;
    pthread_join(r->l.th, NULL);
    for (int i = 0; i < r->nv; i++) { r->v[i].stop = 1; pthread_join(r->v[i].th, NULL); }
    r->nv = 0;
    if (r->verifier > 0) kill(r->verifier, SIGTERM);
    kill(r->coord, SIGTERM);
    int v = r->verifier > 0 ? tu_wait(r->verifier, 5000) : 0, c = tu_wait(r->coord, 5000);
    r->verifier = r->coord = 0;
    if (g_run == r) g_run = NULL;
    assert_int_equal(v, 0);
    assert_int_equal(c, g_want_exit);
    g_want_exit = 0;
}

/* Runs even when an assertion failed: stops the threads and processes of the test's run. */
static int teardown(void **state) {
    (void)state;
    Run *r = g_run;
    if (!r) return 0;
    g_run = NULL;
    g_want_exit = 0;
    for (int i = 0; i < 2; i++) { r->r[i].stop = 1; pthread_join(r->r[i].th, NULL); }
    r->l.stop = 1;
    pthread_join(r->l.th, NULL);
    for (int i = 0; i < r->nv; i++) { r->v[i].stop = 1; pthread_join(r->v[i].th, NULL); }
    r->nv = 0;
    g_fake_verifiers = 0;
    pid_t p[] = {r->verifier, r->coord};
    for (int i = 0; i < 2; i++) if (p[i] > 0) { kill(p[i], SIGKILL); tu_wait(p[i], 2000); }
    return 0;
}

/* Waits until /api/status shows phase `want`; returns the parsed status (caller json_decref's). */
static json_t *wait_phase(Run *r, const char *want, int ms) {
    static char body[1 << 18];
    int64_t end = clock_ms() + ms;
    while (clock_ms() < end) {
        if (tu_http(r->hport, "GET", "/api/status", NULL, body, sizeof body) == 200) {
            json_t *j = json_loads(body, 0, NULL);
            const char *ph = json_string_value(json_object_get(j, "phase"));
            if (ph && strcmp(ph, want) == 0) return j;
            json_decref(j);
        }
        usleep(100000);
    }
    fail_msg("phase %s not reached; last status: %s", want, body);
    return NULL;
}

/* A finished run has nothing left in flight (a validation once ended with 4 groups still being scored). */
static void assert_accounting(json_t *st) {
    const char *phase = json_string_value(json_object_get(st, "phase"));
    tu_assert_groups_add_up(st, phase && !strcmp(phase, "done"));
}

static void test_two_steps_with_validation(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "trainer.val_before_train=true", "cluster.verifier_capacity=64");
    r.r[0].duplicate = 1;                     /* every result of rollout-0 arrives twice */
    json_t *st = wait_phase(&r, "done", 60000);
    assert_int_equal(json_integer_value(json_object_get(st, "step")), 2);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 2);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 8);                 /* 2 steps x train_batch_size 4 */
    assert_int_equal(tu_group_count(st, "validated"), 48);              /* 24 prompts before training and at step 2 */
    assert_int_equal(tu_group_count(st, "queued") + tu_group_count(st, "leased") + tu_group_count(st, "scoring"), 0);
    json_decref(st);
    /* 2 steps x 2 mini-batches x 1 rank; every shard consistent; 4 groups x 4 responses per step. */
    assert_int_equal(r.l.batches, 4);
    assert_int_equal(r.l.bad, 0);
    assert_int_equal(r.l.seqs, 32);
    /* Metrics: verl names, one line per step plus the validations. */
    static char body[1 << 18];
    char path[400];
    snprintf(path, sizeof path, "%s/ckpt/metrics.jsonl", r.dir);
    size_t len;
    char err[ERR_LEN];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    len = fread(body, 1, sizeof body - 1, f);
    body[len] = 0;
    fclose(f);
    assert_non_null(strstr(body, "\"critic/score/mean\":"));
    assert_non_null(strstr(body, "\"train/num_gen_batches\":"));
    assert_non_null(strstr(body, "\"actor/pg_loss\":0.25"));
    assert_non_null(strstr(body, "\"val-core/toy/acc/mean@2\":"));
    assert_non_null(strstr(body, "\"batch/filtered_ratio\":"));
    (void)err;
    /* Kept groups are the mixed ones: every trained group has score mean 0 (half right, half wrong). */
    assert_non_null(strstr(body, "\"critic/score/mean\":0.0,"));
    stop_run(&r);
}

static void test_max_num_gen_batches_error(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_ALL_WRONG, "algorithm.filter_groups.max_num_gen_batches=2", "trainer.val_before_train=false");
    json_t *st = wait_phase(&r, "failed", 30000);
    const char *s = json_string_value(json_object_get(st, "status_line"));
    assert_non_null(strstr(s, "after 12 prompts (2 generation rounds, 0 refilled) only 0 of the 4 groups the batch "
                              "needs had mixed acc"));
    assert_non_null(strstr(s, "12 generated, 12 filtered, 12 solved by none"));
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "filtered"), 12);
    json_decref(st);
    g_want_exit = DAPO_EXIT_STOPPED;      /* a failed run, stopped: 76 (the supervisor ends it) */
    stop_run(&r);
    /* issue 41: refill at once (async's default): each filtered group's slot gets the next prompt as soon as it is
     * filtered, within the same 2 x 6 prompts — one round, 6 refills */
    g_extra3 = "trainer.staleness=1";
    start_run(&r, MODE_ALL_WRONG, "algorithm.filter_groups.max_num_gen_batches=2", "trainer.val_before_train=false");
    st = wait_phase(&r, "failed", 30000);
    s = json_string_value(json_object_get(st, "status_line"));
    assert_non_null(strstr(s, "after 12 prompts (1 generation rounds, 6 refilled) only 0 of the 4 groups"));
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "filtered"), 12);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "counters"), "groups_refilled")), 6);
    json_decref(st);
    static char body[256];                /* the liveness probe now fails: a kubelet restarts (and resumes) the run */
    assert_int_equal(tu_http(r.hport, "GET", "/healthz", NULL, body, sizeof body), 503);
    assert_int_equal(tu_http(r.hport, "GET", "/readyz", NULL, body, sizeof body), 503);
    g_want_exit = DAPO_EXIT_STOPPED;      /* a failed run, stopped: 76 (the supervisor ends it) */
    stop_run(&r);
}

static void test_rollout_dies_mid_step(void **state) {
    (void)state;
    static Run r;
    /* rollout-1 hangs after its first group: its lease expires (1.5 s) and the group goes to rollout-0. */
    start_run(&r, MODE_BY_LENGTH, "trainer.val_before_train=false", "trainer.test_freq=0");
    r.r[1].die_after = 1;
    json_t *st = wait_phase(&r, "done", 60000);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 2);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 8);
    json_t *ws = json_object_get(st, "workers");
    int lost = 0;
    for (size_t i = 0; i < json_array_size(ws); i++) {
        json_t *w = json_array_get(ws, i);
        if (!strcmp(json_string_value(json_object_get(w, "id")), "rollout-1"))
            lost = !strcmp(json_string_value(json_object_get(w, "state")), "lost");
    }
    assert_true(lost);
    json_decref(st);
    stop_run(&r);
}

/* A rollout that takes groups and never answers them while it keeps heartbeating (a lost result) would hold its
 * leases for ever: the step stalled silently. Past cluster.max_lease_s the coordinator takes them back (attempt + 1),
 * the groups go to the other rollout, the worker stays alive, /api/status counts it and the log names worker and
 * group. */
static void test_silent_rollout_lease_reclaimed(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "trainer.val_before_train=false", "cluster.max_lease_s=1.5");
    r.r[1].mute_after = 1;
    json_t *st = wait_phase(&r, "done", 60000);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 2);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 8);
    assert_true(r.r[1].muted >= 1);
    json_t *leases = json_object_get(st, "leases");
    assert_true(json_integer_value(json_object_get(leases, "reclaimed")) >= r.r[1].muted);
    assert_int_equal(json_integer_value(json_object_get(leases, "held")), 0);
    assert_true(json_real_value(json_object_get(leases, "max_lease_s")) == 1.5);
    const char *last = json_string_value(json_object_get(leases, "last_reclaimed"));
    assert_non_null(last);
    assert_non_null(strstr(last, "held by rollout-1"));
    assert_non_null(strstr(last, "over cluster.max_lease_s 1.5 s"));
    json_t *ws = json_object_get(st, "workers");
    int alive = 0;
    for (size_t i = 0; i < json_array_size(ws); i++) {
        json_t *w = json_array_get(ws, i);
        if (!strcmp(json_string_value(json_object_get(w, "id")), "rollout-1"))
            alive = !strcmp(json_string_value(json_object_get(w, "state")), "alive");
    }
    assert_true(alive);                       /* it heartbeats: never declared lost */
    json_decref(st);
    char cmd[400], out[8192];
    snprintf(cmd, sizeof cmd, "grep -c 'held by rollout-1 for' %s/coordinator.log", r.dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_true(atoi(out) >= r.r[1].muted);
    stop_run(&r);
}

/* The same for scoring: a verifier that takes ScoreRequests and never answers them while it heartbeats. Past
 * cluster.max_score_lease_s the groups go back to "generated" (score attempt + 1) and the other verifier scores
 * them; a late answer to the old attempt would be dropped as stale. */
static void test_silent_verifier_lease_reclaimed(void **state) {
    (void)state;
    static Run r;
    g_fake_verifiers = 1;
    start_run(&r, MODE_BY_LENGTH, "trainer.val_before_train=false", "cluster.max_score_lease_s=1");
    json_t *st = wait_phase(&r, "done", 60000);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 2);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 8);
    assert_true(r.v[0].muted >= 1);
    json_t *leases = json_object_get(st, "leases");
    assert_true(json_integer_value(json_object_get(leases, "reclaimed")) >= r.v[0].muted);
    assert_non_null(strstr(json_string_value(json_object_get(leases, "last_reclaimed")), "held by verifier-muted"));
    assert_non_null(strstr(json_string_value(json_object_get(leases, "last_reclaimed")), "(scoring attempt 1)"));
    json_decref(st);
    stop_run(&r);
    g_fake_verifiers = 0;
}

/* Removes the validation row of `step` from DIR/ckpt/metrics.jsonl; returns how many rows it removed. */
static int drop_validation_row(const char *dir, long step) {
    char path[400], tmp[420];
    snprintf(path, sizeof path, "%s/ckpt/metrics.jsonl", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *in = fopen(path, "r"), *out = fopen(tmp, "w");
    assert_non_null(in);
    assert_non_null(out);
    char *line = NULL;
    size_t cap = 0;
    int dropped = 0;
    while (getline(&line, &cap, in) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        int val = 0;
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) val |= strncmp(k, "val-core/", 9) == 0;
        if (val && json_integer_value(json_object_get(j, "step")) == step) dropped++;
        else fputs(line, out);
        json_decref(j);
    }
    free(line);
    fclose(in);
    fclose(out);
    assert_int_equal(rename(tmp, path), 0);
    return dropped;
}

/* SIGTERM writes the checkpoint; a restart with resume_mode auto continues from it, here from a checkpoint taken
 * exactly at an epoch boundary (24 prompts, one round of 6 per step without filtering: 4 steps per epoch). */
static void test_resume_at_epoch_boundary(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "algorithm.filter_groups.enable=false", "trainer.total_training_steps=4");
    json_t *st = wait_phase(&r, "done", 60000);
    assert_int_equal(json_integer_value(json_object_get(st, "epoch")), 0);
    assert_int_equal(json_integer_value(json_object_get(st, "prompts_consumed")), 24);
    json_decref(st);
    stop_run(&r);                         /* SIGTERM: checkpoint at step 4, cursor at the end of epoch 0 */
    char path[400], cmd[500], out[4096];
    snprintf(path, sizeof path, "%s/ckpt/coordinator.json", r.dir);
    snprintf(cmd, sizeof cmd, "cat %s", path);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"step\": 4"));
    assert_non_null(strstr(out, "\"cursor\": 24"));
    /* as if the stop had come during step 4's validation: its row is not in metrics.jsonl; the resume runs it */
    assert_int_equal(drop_validation_row(r.dir, 4), 1);
    /* Restart over the same directory (start_run would wipe it: start the processes by hand). */
    static Run r2;
    r2 = r;
    g_run = &r2;
    char bin[256], log[300], a_bind[96], a_http[64], a_train[320], a_tok[320], a_dir[320], coord[96];
    r2.hport = tu_free_port();
    snprintf(a_bind, sizeof a_bind, "cluster.bind=%s", r2.zep);
    snprintf(a_http, sizeof a_http, "cluster.http=127.0.0.1:%d", r2.hport);
    snprintf(a_train, sizeof a_train, "data.train_files=%s/toy.jsonl", r2.dir);
    snprintf(a_tok, sizeof a_tok, "data.tokenizer=%s/data/tokenizers/qwen3", tu_root());
    snprintf(a_dir, sizeof a_dir, "trainer.default_local_dir=%s/ckpt", r2.dir);
    snprintf(log, sizeof log, "%s/coordinator-resumed.log", r2.dir);
    char a_val[320];
    snprintf(a_val, sizeof a_val, "data.val_files=%s/toy.jsonl", r2.dir);
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-coordinator"), TU_DAPO_RECIPE, a_bind, a_http, a_train, a_tok, a_dir, a_val,
                    "trainer.test_freq=2", "actor_rollout_ref.rollout.val_kwargs.n=2",
                    "data.train_batch_size=4", "data.gen_batch_size=6", "trainer.total_epochs=5",
                    "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
                    "trainer.total_training_steps=6", "algorithm.filter_groups.enable=false",
                    "data.max_response_length=64", "reward_model.overlong_buffer.enable=true", "reward_model.overlong_buffer.len=16", "cluster.heartbeat_ms=100",
                    "cluster.lease_timeout_s=1.5", NULL};
    r2.coord = tu_spawn(argv, log);
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", r2.zep);
    snprintf(log, sizeof log, "%s/verifier-resumed.log", r2.dir);
    char *vargv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-verifier"), coord, "cluster.heartbeat_ms=100", NULL};
    r2.verifier = tu_spawn(vargv, log);
    for (int i = 0; i < 2; i++) { r2.r[i].stop = 0; r2.r[i].groups_done = 0; pthread_create(&r2.r[i].th, NULL, rollout_main, &r2.r[i]); }
    r2.l.stop = 0;
    assert_int_equal(r.l.saved_version, 4);          /* the coordinator asked for the last step's checkpoint */
    r2.l.version = r.l.saved_version;                /* the learner restarts from it */
    pthread_create(&r2.l.th, NULL, learner_main, &r2.l);
    st = wait_phase(&r2, "done", 60000);
    assert_int_equal(json_integer_value(json_object_get(st, "step")), 6);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 6);
    assert_int_equal(json_integer_value(json_object_get(st, "epoch")), 1);
    assert_int_equal(json_integer_value(json_object_get(st, "prompts_consumed")), 36);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 24);             /* 6 steps x 4, counted across the restart */
    /* history: steps 1-4 and the validations at steps 0 and 2 read back from metrics.jsonl, the validation of step 4
     * run again, steps 5-6, the validation of step 6 */
    assert_int_equal(json_integer_value(json_object_get(st, "history")), 10);
    json_decref(st);
    stop_run(&r2);
}

/* Async mode (trainer.staleness 1): the next step is generated while the learner trains, rollouts one version
 * behind are accepted, and the accounting still adds up. */
static void test_async_overlaps_generation_and_training(void **state) {
    (void)state;
    static Run r;
    static volatile long seen;
    seen = 0;
    start_run(&r, MODE_BY_LENGTH, "trainer.staleness=1", "trainer.val_before_train=false");
    r.l.delay_ms = 600;
    r.l.gen_step_seen = &seen;
    for (int i = 0; i < 2; i++) r.r[i].gen_step_seen = &seen;
    json_t *st = wait_phase(&r, "done", 60000);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 2);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 8);
    json_decref(st);
    assert_true(r.l.overlapped >= 1);         /* step 2 was generating while step 1 trained */
    stop_run(&r);
}

/* Async mode with a rollout that loads new weights 1.5 s late (issue 15): every TrainBatch row carries the version
 * that generated it (the fake rollout writes 1000 + its version into each response's first token; the fake learner
 * checks the row's behaviour_versions against it), no row more than trainer.staleness behind the learner's version is
 * ever sent (its groups are dropped as "stale" and their prompts generated again), and the accounting adds up. */
static void test_async_stale_rows_dropped(void **state) {
    (void)state;
    static Run r;
    g_extra3 = "trainer.test_freq=5";                 /* steps 1-4 overlap; validation at 0, 5 and 6 (the last) */
    start_run(&r, MODE_BY_LENGTH, "trainer.staleness=1", "trainer.total_training_steps=6");
    r.l.delay_ms = 300;
    r.l.staleness = 1;
    r.r[0].load_lag_ms = 1500;
    json_t *st = wait_phase(&r, "done", 80000);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 6);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 24);
    assert_int_equal(tu_group_count(st, "validated"), 3 * 24);   /* before training, steps 5, 6: async validates too */
    fprintf(stderr, "async: %d rows, %d one version behind, %d too stale, %d mismatched, %lld groups dropped as stale\n",
            r.l.rows, r.l.stale_rows, r.l.too_stale, r.l.version_mismatch, (long long)tu_group_count(st, "stale"));
    assert_int_equal(r.l.rows, 24 * 4);
    assert_int_equal(r.l.bad, 0);
    assert_int_equal(r.l.too_stale, 0);
    assert_int_equal(r.l.version_mismatch, 0);
    assert_true(r.l.stale_rows > 0);                  /* rows one version behind were trained (and weighted) */
    assert_true(tu_group_count(st, "stale") > 0);        /* the slow rollout's old groups were dropped, not trained */
    json_decref(st);
    stop_run(&r);
}

/* Sums over the training steps of DIR/ckpt/metrics.jsonl: steps, batch/groups_refilled, batch/groups_waited, and
 * batch/groups_staleness/<d> for d = 0 .. 8. */
typedef struct { int steps; long long refilled, waited, stale_hist[9]; } StepSums;
static StepSums step_sums(const char *dir) {
    char path[400], line[1 << 16];
    snprintf(path, sizeof path, "%s/ckpt/metrics.jsonl", dir);
    StepSums m = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        if (j && json_object_get(j, "timing_s/step")) {
            m.steps++;
            m.refilled += (long long)json_number_value(json_object_get(j, "batch/groups_refilled"));
            m.waited += (long long)json_number_value(json_object_get(j, "batch/groups_waited"));
            for (int d = 0; d < 9; d++) {
                char key[48];
                snprintf(key, sizeof key, "batch/groups_staleness/%d", d);
                m.stale_hist[d] += (long long)json_number_value(json_object_get(j, key));
            }
        }
        json_decref(j);
    }
    fclose(f);
    return m;
}

/* Issue 41: staleness 4 with a learner slower than generation. Ready batches queue behind the step in training (up to
 * 4 steps at the learners; the coordinator holds their frames and sends each when the one before is done, so the
 * learner sees one step at a time and every step trains from the version its predecessor made); rows reach 4
 * versions behind their training version and never more; the accounting adds up. */
static void test_async_staleness_four(void **state) {
    (void)state;
    static Run r;
    g_extra3 = "trainer.test_freq=-1";
    g_extra4 = "trainer.total_epochs=40";            /* a third of the prompts have mixed groups: enough data */
    start_run(&r, MODE_BY_LENGTH, "trainer.staleness=4", "trainer.total_training_steps=10");
    r.l.delay_ms = 1200;
    r.l.staleness = 4;
    json_t *st = wait_phase(&r, "done", 120000);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 10);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 40);
    fprintf(stderr, "staleness 4: %d rows, %d behind, max lag %d, %d too stale, %lld groups dropped as stale\n", r.l.rows,
            r.l.stale_rows, r.l.max_lag, r.l.too_stale, (long long)tu_group_count(st, "stale"));
    assert_int_equal(r.l.rows, 40 * 4);
    assert_int_equal(r.l.bad, 0);
    assert_int_equal(r.l.too_stale, 0);
    assert_int_equal(r.l.version_mismatch, 0);
    assert_int_equal(r.l.backwards, 0);
    assert_int_equal(r.l.max_lag, 4);
    /* issue 41: the per-step staleness histogram reaches 4 and never 5; the refill shows in the funnel's metrics and
     * adds up to the run's counter */
    StepSums m = step_sums(r.dir);
    assert_int_equal(m.steps, 10);
    assert_true(m.stale_hist[4] > 0);
    assert_int_equal(m.stale_hist[5], 0);
    assert_int_equal(m.stale_hist[0] + m.stale_hist[1] + m.stale_hist[2] + m.stale_hist[3] + m.stale_hist[4], 40);
    assert_true(m.refilled > 0);
    assert_int_equal(m.refilled, json_integer_value(json_object_get(json_object_get(st, "counters"), "groups_refilled")));
    static char body[1 << 18];                       /* the dashboard's data: the funnel's refills, the bars */
    assert_int_equal(tu_http(r.hport, "GET", "/api/panels", NULL, body, sizeof body), 200);
    json_t *panels = json_loads(body, 0, NULL), *steps = json_object_get(panels, "steps");
    assert_int_equal(json_array_size(steps), 10);
    long long refilled = 0;
    for (size_t i = 0; i < json_array_size(steps); i++) {
        json_t *e = json_array_get(steps, i);
        refilled += (long long)json_number_value(json_object_get(json_object_get(e, "funnel"), "refilled"));
        assert_int_equal(json_array_size(json_object_get(e, "staleness")), 5);    /* d = 0 .. 4 */
    }
    assert_int_equal(refilled, m.refilled);
    json_decref(panels);
    json_t *al = json_object_get(st, "at_learners");
    assert_string_equal(json_string_value(json_object_get(al, "refill")), "at_once");
    assert_int_equal(json_array_size(json_object_get(al, "queued")), 0);
    json_decref(st);
    stop_run(&r);
}

/* Staleness 4 with trainer.staleness_strategy wait: a group goes only to a rollout whose weights are fresh enough for
 * the version its step trains from, so none is ever dropped as stale; the groups that waited are counted. */
static void test_async_staleness_wait(void **state) {
    (void)state;
    static Run r;
    g_extra3 = "trainer.test_freq=-1";
    g_extra4 = "trainer.total_epochs=40";
    g_extra5 = "trainer.staleness_strategy=wait";
    start_run(&r, MODE_BY_LENGTH, "trainer.staleness=4", "trainer.total_training_steps=6");
    r.l.delay_ms = 1200;
    r.l.staleness = 4;
    json_t *st = wait_phase(&r, "done", 120000);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 6);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 24);
    assert_int_equal(tu_group_count(st, "stale"), 0);
    assert_int_equal(r.l.too_stale, 0);
    assert_int_equal(r.l.backwards, 0);
    StepSums m = step_sums(r.dir);
    fprintf(stderr, "staleness 4, wait: max lag %d, %lld groups waited\n", r.l.max_lag, (long long)m.waited);
    assert_true(r.l.max_lag <= 4);
    assert_int_equal(m.waited, json_integer_value(json_object_get(json_object_get(st, "counters"), "groups_waited")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(st, "at_learners"), "staleness_strategy")),
                        "wait");
    json_decref(st);
    stop_run(&r);
}

/* Reads DIR/ckpt/metrics.jsonl into body; returns the number of validation rows of `step`. */
static int val_rows_of(const char *dir, long step, char *body, size_t cap) {
    char path[400];
    snprintf(path, sizeof path, "%s/ckpt/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(body, 1, cap - 1, f);
    body[n] = 0;
    fclose(f);
    int rows = 0;
    for (char *line = strtok(body, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        if (j && json_integer_value(json_object_get(j, "step")) == step && json_object_get(j, "timing_s/testing")) rows++;
        json_decref(j);
    }
    return rows;
}

/* The three bookkeeping faults of issue 15: (a) trainer.total_training_steps unset: the step count is derived as verl
 * does (whole data.gen_batch_size batches x total_epochs: 24 prompts / 6 = 4) and sent with every TrainBatch (the
 * learner's lr schedule uses it); (b) the data runs out before that (each step needs more than one round here): the
 * step being drawn is not trained and neither /api/status nor the log counts it; (c) the last trained step is
 * validated whatever test_freq says (test_freq 100 here). */
static void test_data_runs_out_and_last_step_validated(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "trainer.total_training_steps=-1", "trainer.total_epochs=1");
    json_t *st = wait_phase(&r, "done", 60000);
    long trained = (long)json_integer_value(json_object_get(st, "policy_version"));
    fprintf(stderr, "data ran out: %ld steps trained, status step %lld, learner saw total_training_steps %lld\n", trained,
            (long long)json_integer_value(json_object_get(st, "step")), r.l.total_steps_seen);
    assert_true(trained >= 1 && trained < 4);               /* filtering needs more than 6 prompts a step */
    assert_int_equal(json_integer_value(json_object_get(st, "step")), trained);
    assert_int_equal(r.l.total_steps_seen, 4);
    assert_accounting(st);
    json_decref(st);
    static char body[1 << 18];
    assert_int_equal(val_rows_of(r.dir, trained, body, sizeof body), 1);   /* the last step's validation */
    char cmd[600], out[256];
    snprintf(cmd, sizeof cmd, "grep -c 'step %ld not trained: the data ran out' %s/coordinator.log", trained + 1, r.dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    stop_run(&r);
}

/* Validation at the last step (verl): total_training_steps 3, test_freq 2: before training, at step 2 and at step 3. */
static void test_last_step_validated(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "trainer.total_training_steps=3", NULL);
    json_t *st = wait_phase(&r, "done", 60000);
    assert_int_equal(json_integer_value(json_object_get(st, "policy_version")), 3);
    assert_int_equal(tu_group_count(st, "validated"), 3 * 24);
    assert_int_equal(r.l.total_steps_seen, 3);
    json_decref(st);
    static char body[1 << 18];
    assert_int_equal(val_rows_of(r.dir, 3, body, sizeof body), 1);
    assert_int_equal(val_rows_of(r.dir, 1, body, sizeof body), 0);
    stop_run(&r);
}

/* A learner that loaded a checkpoint the coordinator has none for (here: version 5, no coordinator.json) stops the
 * run at once with an error naming both sides, instead of a run waiting for ever for weights no one serves. */
static void test_learner_checkpoint_mismatch_fails_clearly(void **state) {
    (void)state;
    static Run r;
    g_learner_version = 5;
    start_run(&r, MODE_BY_LENGTH, "trainer.val_before_train=false", NULL);
    g_learner_version = 0;
    json_t *st = wait_phase(&r, "failed", 20000);
    const char *line = json_string_value(json_object_get(st, "status_line"));
    assert_non_null(strstr(line, "loaded policy version 5"));
    assert_non_null(strstr(line, "there is no coordinator.json"));
    assert_int_equal(json_integer_value(json_object_get(st, "step")), 0);
    json_decref(st);
    g_want_exit = DAPO_EXIT_STOPPED;      /* failed, then stopped */
    stop_run(&r);
}

/* Learners that heartbeat but do not send a step's results are not waited for for ever: past cluster.max_lease_s the
 * run fails with the counts. */
static void test_silent_learner_update_bounded(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "trainer.val_before_train=false", "cluster.max_lease_s=1");
    r.l.delay_ms = 3000;
    json_t *st = wait_phase(&r, "failed", 30000);
    const char *line = json_string_value(json_object_get(st, "status_line"));
    assert_non_null(strstr(line, "step 1: the learners sent 1 of the 2 step results"));
    json_decref(st);
    g_want_exit = DAPO_EXIT_STOPPED;      /* failed, then stopped */
    stop_run(&r);
}

/* A failed StepResult is decided by its code, never its text: ERR_INVAL with text that names a collective fails the
 * run (only ERR_COLLECTIVE may roll back, and with one learner nothing can re-form), and the status line gives both
 * the code's name and the learner's words. */
static void test_step_failure_decided_by_code(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "trainer.val_before_train=false", NULL);
    r.l.fail_text = "collective allreduce #7: rank 1 lost (a text that must not decide)";
    r.l.fail_code = ERR_INVAL;
    r.l.fail_step = 1;
    json_t *st = wait_phase(&r, "failed", 30000);
    const char *line = json_string_value(json_object_get(st, "status_line"));
    assert_non_null(strstr(line, "step 1: learner learner-0 (rank 0) failed (invalid argument): collective allreduce #7"));
    json_decref(st);
    g_want_exit = DAPO_EXIT_STOPPED;      /* failed, then stopped */
    stop_run(&r);
}

/* A second coordinator over the same trainer.default_local_dir (another run pointed at the same checkpoints) is
 * refused at start, naming the live one's pid; the first run is unaffected. */
static void test_second_coordinator_same_dir_refused(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "trainer.val_before_train=false", NULL);
    char bin[256], log[300], a_http[64], a_bind[96], a_dir[320], a_train[320], a_tok[320];
    snprintf(a_http, sizeof a_http, "cluster.http=127.0.0.1:%d", tu_free_port());
    snprintf(a_bind, sizeof a_bind, "cluster.bind=tcp://127.0.0.1:%d", tu_free_port());
    snprintf(a_dir, sizeof a_dir, "trainer.default_local_dir=%s/ckpt", r.dir);
    snprintf(a_train, sizeof a_train, "data.train_files=%s/toy.jsonl", r.dir);
    snprintf(a_tok, sizeof a_tok, "data.tokenizer=%s/data/tokenizers/qwen3", tu_root());
    snprintf(log, sizeof log, "%s/coordinator-second.log", r.dir);
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-coordinator"), TU_DAPO_RECIPE, a_http, a_bind, a_dir, a_train, a_tok, NULL};
    char lock[400];
    snprintf(lock, sizeof lock, "%s/ckpt/coordinator.lock", r.dir);
    struct stat sb;
    for (int t = 0; t < 200 && (stat(lock, &sb) != 0 || sb.st_size == 0); t++) usleep(50000);   /* the first holds it */
    pid_t second = tu_spawn(argv, log);
    int rc2 = tu_wait(second, 10000);
    if (rc2 < 0) { kill(second, SIGKILL); tu_wait(second, 2000); }     /* not left running when the check fails */
    assert_int_equal(rc2, 1);
    char cmd[400], out[512], want[64];
    snprintf(cmd, sizeof cmd, "grep -h 'is in use by another coordinator' %s", log);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    snprintf(want, sizeof want, "(pid %d)", (int)r.coord);
    assert_non_null(strstr(out, want));
    json_t *st = wait_phase(&r, "done", 60000);              /* the first run goes on */
    json_decref(st);
    /* with cluster.lock_wait_s a replacement (a Kubernetes pod started while the old one checkpoints) waits for the
     * lock, and starts once the first has exited */
    char a_wait[64], a_http3[64];
    int h3 = tu_free_port();
    snprintf(a_wait, sizeof a_wait, "cluster.lock_wait_s=60");
    snprintf(a_http3, sizeof a_http3, "cluster.http=127.0.0.1:%d", h3);
    snprintf(log, sizeof log, "%s/coordinator-third.log", r.dir);
    char *argv3[] = {bin, a_http3, a_bind, a_dir, a_train, a_tok, a_wait, NULL};
    pid_t third = tu_spawn(argv3, log);
    snprintf(cmd, sizeof cmd, "grep -c 'waiting for it to exit' %s", log);
    int waiting = 0;
    for (int t = 0; t < 100 && !waiting; t++) { usleep(100000); waiting = tu_run(cmd, out, sizeof out) == 0; }
    assert_true(waiting);
    assert_true(kill(third, 0) == 0);                         /* still waiting, not refused */
    stop_run(&r);
    static char body[64];
    int ready = 0;
    for (int t = 0; t < 300 && !ready; t++) {
        usleep(100000);
        ready = tu_http(h3, "GET", "/readyz", NULL, body, sizeof body) == 200;
    }
    kill(third, SIGTERM);
    tu_wait(third, 10000);
    assert_true(ready);
}

/* Starts a worker daemon with the coordinator's endpoint and extra (NULL-terminated) overrides; returns its exit
 * status within ms (-1: still running, then killed) and the log's refusal line in out. */
static int worker_refused(Run *r, const char *bin_name, const char *id, const char *const *extra, char *out, size_t n) {
    char bin[256], log[300], coord[96], cmd[400];
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", r->zep);
    snprintf(log, sizeof log, "%s/%s.log", r->dir, id);
    char *argv[16] = {(char *)tu_bin(bin, sizeof bin, bin_name), coord, "cluster.heartbeat_ms=100",
                      "cluster.verifier_threads=1"};
    int k = 4;
    for (int i = 0; extra[i] && k < 12; i++) argv[k++] = (char *)extra[i];
    argv[k++] = "--id";
    argv[k++] = (char *)id;
    argv[k] = NULL;
    pid_t pid = tu_spawn(argv, log);
    int rc = tu_wait(pid, 20000);
    if (rc < 0) { kill(pid, SIGKILL); tu_wait(pid, 2000); }
    snprintf(cmd, sizeof cmd, "grep -h 'coordinator refused' %s", log);
    out[0] = 0;
    tu_run(cmd, out, n);
    return rc;
}

/* One route for a run key (issue 36): a worker started with a run key set to another value than the coordinator's —
 * the rollout temperature, top_p, the model path, the chat template — is refused by its config probe, before it
 * loads anything, naming the key and both values, and exits with an error; one that sets the coordinator's values
 * registers, and so does one given only local keys, which takes the run keys (and the hash) from the coordinator. */
static void test_worker_with_another_config_refused(void **state) {
    (void)state;
    static Run r;
    start_run(&r, MODE_BY_LENGTH, "actor_rollout_ref.rollout.temperature=0.9", "actor_rollout_ref.rollout.top_p=0.95");
    json_decref(wait_phase(&r, "done", 60000));               /* the run, then its registry, stays up */
    char model[320], want[400], tok[320];
    static char out[4096];
    snprintf(model, sizeof model, "actor_rollout_ref.model.path=%s/tests/data/model/qwen2_gqa", tu_root());
    snprintf(tok, sizeof tok, "data.tokenizer=%s/data/tokenizers/qwen3", tu_root());   /* the coordinator's */
    const struct { const char *bin, *id, *arg, *want; } cases[] = {
        {"dapo-verifier", "verifier-t", "actor_rollout_ref.rollout.temperature=0.7",
         "actor_rollout_ref.rollout.temperature is 0.7 at worker verifier-t, 0.9 at the coordinator"},
        {"dapo-verifier", "verifier-p", "actor_rollout_ref.rollout.top_p=1.0",
         "actor_rollout_ref.rollout.top_p is 1 at worker verifier-p, 0.95 at the coordinator"},
        {"dapo-verifier", "verifier-c", "data.chat_template=llama3",
         "data.chat_template is \"llama3\" at worker verifier-c, \"auto\" at the coordinator"},
        {"dapo-rollout", "rollout-m", model, "actor_rollout_ref.model.path is \""},
        {"dapo-learner", "learner-w", "cluster.num_learners=2", "cluster.num_learners is 2 at the learner, 1 at the "
                                                                "coordinator"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *extra[] = {cases[i].arg, tok, NULL};
        int rc = worker_refused(&r, cases[i].bin, cases[i].id, extra, out, sizeof out);
        if (!strstr(out, cases[i].want)) fail_msg("%s %s: no refusal naming %s in its log: %s", cases[i].bin,
                                                  cases[i].arg, cases[i].want, out);
        assert_true(rc > 0);                                 /* it exits with an error */
    }
    snprintf(want, sizeof want, "at the coordinator");
    assert_non_null(strstr(out, want));
    /* refused by the probe, before it loads anything */
    snprintf(want, sizeof want, "grep -c 'model .*tokenizer' %s/rollout-m.log", r.dir);
    tu_run(want, out, sizeof out);
    assert_int_equal(atoi(out), 0);
    /* one with the coordinator's values registers; so does one given only local keys, which takes the run keys */
    const char *same[] = {"actor_rollout_ref.rollout.temperature=0.9", "actor_rollout_ref.rollout.top_p=0.95"};
    char bin[256], log[300], coord[96];
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", r.zep);
    static char body[1 << 16];
    for (int k = 0; k < 2; k++) {
        const char *id = k ? "verifier-local" : "verifier-same";
        snprintf(log, sizeof log, "%s/%s.log", r.dir, id);
        char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-verifier"), coord, "cluster.heartbeat_ms=100",
                        "--id", (char *)id, k ? NULL : (char *)same[0], (char *)same[1], NULL};
        pid_t ok = tu_spawn(argv, log);
        int seen = 0;
        char want_id[64];
        snprintf(want_id, sizeof want_id, "\"id\":\"%s\"", id);
        for (int t = 0; t < 100 && !seen; t++) {
            usleep(100000);
            seen = tu_http(r.hport, "GET", "/api/status", NULL, body, sizeof body) == 200 && strstr(body, want_id) &&
                   strstr(body, "\"config_hash\":\"");
        }
        kill(ok, SIGTERM);
        tu_wait(ok, 5000);
        assert_true(seen);                                   /* registered, beside the refusals */
        const char *h = strstr(body, "\"config_hash\":\"");
        snprintf(want, sizeof want, "grep -c 'took [0-9]* run keys from the coordinator .*hash %.16s' %s", h + 15, log);
        tu_run(want, out, sizeof out);
        if (atoi(out) != 1) fail_msg("%s: no 'took N run keys ... hash %.16s' line in %s", id, h + 15, log);
        /* the hash is in the run's metadata too: coordinator.json and the "run started" event */
        snprintf(want, sizeof want, "grep -c '\"config_hash\": \"%.16s\"' %s/ckpt/coordinator.json", h + 15, r.dir);
        tu_run(want, out, sizeof out);
        if (atoi(out) != 1) fail_msg("coordinator.json has no config_hash %.16s", h + 15);
        snprintf(want, sizeof want, "grep -c 'started (run config hash %.16s)' %s/ckpt/events.jsonl", h + 15, r.dir);
        tu_run(want, out, sizeof out);
        if (atoi(out) != 1) fail_msg("events.jsonl has no 'run ... started (run config hash %.16s)'", h + 15);
    }
    stop_run(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_two_steps_with_validation, teardown),
        cmocka_unit_test_teardown(test_max_num_gen_batches_error, teardown),
        cmocka_unit_test_teardown(test_rollout_dies_mid_step, teardown),
        cmocka_unit_test_teardown(test_silent_rollout_lease_reclaimed, teardown),
        cmocka_unit_test_teardown(test_silent_verifier_lease_reclaimed, teardown),
        cmocka_unit_test_teardown(test_resume_at_epoch_boundary, teardown),
        cmocka_unit_test_teardown(test_async_overlaps_generation_and_training, teardown),
        cmocka_unit_test_teardown(test_async_stale_rows_dropped, teardown),
        cmocka_unit_test_teardown(test_async_staleness_four, teardown),
        cmocka_unit_test_teardown(test_async_staleness_wait, teardown),
        cmocka_unit_test_teardown(test_data_runs_out_and_last_step_validated, teardown),
        cmocka_unit_test_teardown(test_last_step_validated, teardown),
        cmocka_unit_test_teardown(test_learner_checkpoint_mismatch_fails_clearly, teardown),
        cmocka_unit_test_teardown(test_second_coordinator_same_dir_refused, teardown),
        cmocka_unit_test_teardown(test_worker_with_another_config_refused, teardown),
        cmocka_unit_test_teardown(test_silent_learner_update_bounded, teardown),
        cmocka_unit_test_teardown(test_step_failure_decided_by_code, teardown),
    };
    if (getenv("TEST_CASE")) cmocka_set_test_filter(getenv("TEST_CASE"));   /* one test by name (a pattern) */
    return cmocka_run_group_tests_name("coordinator", tests, NULL, NULL);
}
