/* tests/integration/test_verifier_daemon.c: dapo-verifier against the scripted fake coordinator — registration and
 * credit, scores with the overlong penalty, strict box, hostile inputs, per-item deadline, cancel, goodbye; and
 * --help of every daemon. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <zmq.h>

#include "core/clock.h"

#include "tests/support/fake_coord.h"
#include "tests/testutil.h"

typedef struct { void *ctx; FakeCoord fc; pid_t pid; } Fix;

/* extra: up to 6 more key=value arguments, NULL-terminated. */
static pid_t start_verifier(Fix *f, const char *const *extra) {
    char bin[256], coord[256], log[256];
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", f->fc.endpoint);
    snprintf(log, sizeof log, "%s/test-logs/verifier-daemon.log", tu_build());
    char *argv[12] = {(char *)tu_bin(bin, sizeof bin, "dapo-verifier"), coord, "cluster.verifier_capacity=16",
                      "cluster.verifier_threads=2", "cluster.heartbeat_ms=100"};
    for (int i = 0; extra[i] && i < 6; i++) argv[5 + i] = (char *)extra[i];
    return tu_spawn(argv, log);
}

static void handshake(Fix *f) {
    NetMsg *h = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_HELLO, 10000, NULL);
    assert_non_null(h);
    assert_int_equal(((Dapo__Hello *)h->msg)->role, DAPO__ROLE__ROLE_VERIFIER);
    assert_int_equal(((Dapo__Hello *)h->msg)->capacity, 16);
    fake_coord_welcome(&f->fc, 100, 5);
    NetMsg *c = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_CREDIT, 5000, NULL);
    assert_non_null(c);
    assert_int_equal(((Dapo__Credit *)c->msg)->credits, 16);
}

static int setup_with(void **state, const char *const *extra) {
    Fix *f = xcalloc(1, sizeof *f);
    char err[ERR_LEN];
    f->ctx = zmq_ctx_new();
    if (fake_coord_open(&f->fc, f->ctx, "tcp://127.0.0.1:0", err)) return -1;
    f->pid = start_verifier(f, extra);
    *state = f;
    return f->pid > 0 ? 0 : -1;
}
static int setup(void **state) { return setup_with(state, (const char *[]){"reward_model.timeout_s=1", NULL}); }
static int setup_tiny_deadline(void **state) {
    return setup_with(state, (const char *[]){"reward_model.timeout_s=0.000000001", NULL});
}
/* The reward file is copied to a path of this test process's own (test-logs/reward-<pid>.py): its workers' command
 * lines end in "<that path> compute_score", which no other process on the machine has (REWARD_WORKERS). */
static char g_reward_path[512], g_reward_copy[400], g_workers_needle[460];
#define REWARD_WORKERS g_workers_needle
static int setup_python(void **state) {
    char cmd[1200];
    snprintf(g_reward_copy, sizeof g_reward_copy, "%s/test-logs/reward-%d.py", tu_build(), (int)getpid());
    snprintf(g_workers_needle, sizeof g_workers_needle, "%s compute_score", g_reward_copy);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/test-logs && cp %s/tests/data/reward/misbehaving_reward.py %s", tu_build(),
             tu_root(), g_reward_copy);
    if (system(cmd)) return -1;
    snprintf(g_reward_path, sizeof g_reward_path, "custom_reward_function.path=%s", g_reward_copy);
    return setup_with(state, (const char *[]){g_reward_path, "reward_model.num_workers=3", "reward_model.timeout_s=2",
                                              "reward_model.worker_memory_mb=400", "reward_model.error_score=-2", NULL});
}

static int teardown(void **state) {
    Fix *f = *state;
    if (f->pid > 0) { kill(f->pid, SIGKILL); tu_wait(f->pid, 2000); }
    fake_coord_close(&f->fc);
    zmq_ctx_term(f->ctx);
    xfree(f);
    return 0;
}

typedef struct { const char *resp; size_t len; const char *gt; uint32_t tokens; int strict; } Item;

static Dapo__ScoreResult *score(Fix *f, const Item *items, size_t n, uint64_t request_id) {
    Dapo__ScoreItem it[16], *its[16];
    for (size_t i = 0; i < n; i++) {
        dapo__score_item__init(&it[i]);
        it[i].item_id = 100 + i;
        it[i].attempt = 1;
        it[i].response_text.data = (uint8_t *)items[i].resp;
        it[i].response_text.len = items[i].len ? items[i].len : strlen(items[i].resp);
        it[i].ground_truth.data = (uint8_t *)items[i].gt;
        it[i].ground_truth.len = strlen(items[i].gt);
        it[i].response_length = items[i].tokens;
        it[i].data_source = "math_dapo";
        it[i].strict_box = items[i].strict;
        its[i] = &it[i];
    }
    Dapo__ScoreRequest r = DAPO__SCORE_REQUEST__INIT;
    r.run_id = "fake-run";
    r.request_id = request_id;
    r.attempt = 1;
    r.n_items = n;
    r.items = its;
    r.max_response_length = 100;
    r.overlong_buffer_enable = true;
    r.overlong_buffer_len = 20;
    r.overlong_penalty_factor = 1.0f;
    r.prompt_text.data = (uint8_t *)"Question?\n";
    r.prompt_text.len = 10;
    assert_int_equal(fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_SCORE_REQUEST, &r.base), 0);
    NetMsg *m = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_SCORE_RESULT, 10000, NULL);
    assert_non_null(m);
    Dapo__ScoreResult *res = (Dapo__ScoreResult *)m->msg;
    assert_int_equal(res->request_id, request_id);
    assert_int_equal(res->n_scores, n);
    return res;
}

static void test_scores_and_overlong(void **state) {
    Fix *f = *state;
    handshake(f);
    static char big[1 << 20];
    memset(big, '{', sizeof big - 20);
    memcpy(big + sizeof big - 20, "\nAnswer: 7", 11);
    const Item items[] = {
        {"Let me think.\nAnswer: 42", 0, "42", 10, 0},           /* right, short: +1 */
        {"Answer: 41", 0, "42", 10, 0},                           /* wrong: -1 */
        {"Answer: 42", 0, "42", 90, 0},                           /* right, 10 tokens into the buffer: 1 - 0.5 */
        {"Answer: 42", 0, "42", 100, 0},                          /* right, at the limit: 1 - 1 */
        {"so \\boxed{42}", 0, "42", 5, 1},                        /* strict box */
        {"no box here", 0, "42", 5, 1},                           /* strict, no box: pred null */
        {"Answer: \xff\xfe 4\0002", 15, "42", 5, 0},              /* invalid UTF-8 and a NUL */
        {big, sizeof big - 10, "7", 5, 0},                         /* 1 MB of braces, then the answer */
    };
    size_t n = sizeof items / sizeof items[0];
    Dapo__ScoreResult *r = score(f, items, n, 7);
    const float want[] = {1, -1, 0.5f, 0, 1, -1, -1, 1};
    for (size_t i = 0; i < n; i++) {
        Dapo__Score *s = r->scores[i];
        assert_int_equal(s->item_id, 100 + i);
        if (fabsf(s->score - want[i]) > 1e-6f) fail_msg("item %zu: score %g, want %g", i, s->score, want[i]);
        assert_string_equal(s->error, "");
    }
    assert_true(r->scores[0]->acc && !r->scores[1]->acc && r->scores[2]->acc);
    assert_true(fabsf(r->scores[2]->overlong_penalty + 0.5f) < 1e-6f);
    assert_true(r->scores[4]->has_pred && r->scores[4]->acc);
    assert_false(r->scores[5]->has_pred);
    assert_int_equal(r->scores[1]->pred.len, 2);
    assert_memory_equal(r->scores[1]->pred.data, "41", 2);
    /* The credit comes back once the request is answered. */
    NetMsg *c = fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_CREDIT, 5000, NULL);
    assert_non_null(c);
    assert_int_equal(((Dapo__Credit *)c->msg)->credits, n);
    /* Garbage and an unsupported message: answered or dropped, the daemon keeps serving. */
    fake_coord_send_raw(&f->fc, "\x00\x01garbage-frame", 15);
    Dapo__TrainBatch tb = DAPO__TRAIN_BATCH__INIT;
    fake_coord_reply(&f->fc, DAPO__MSG_TYPE__MSG_TRAIN_BATCH, &tb.base);
    assert_non_null(fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_ERROR, 5000, NULL));
    r = score(f, items, 2, 8);
    assert_true(r->scores[0]->score == 1 && r->scores[1]->score == -1);
    /* SIGTERM: goodbye and exit 0. */
    kill(f->pid, SIGTERM);
    assert_non_null(fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_GOODBYE, 5000, NULL));
    assert_int_equal(tu_wait(f->pid, 5000), 0);
    f->pid = 0;
}

static void test_deadline(void **state) {
    Fix *f = *state;
    handshake(f);
    const Item items[] = {{"Answer: 42", 0, "42", 10, 0}};
    Dapo__ScoreResult *r = score(f, items, 1, 9);
    assert_true(r->scores[0]->score == -1);
    assert_string_equal(r->scores[0]->error, "timeout");
}

static double extra_value(const Dapo__Score *s, const char *key) {
    for (size_t i = 0; i < s->n_extra_keys && i < s->n_extra_values; i++)
        if (!strcmp(s->extra_keys[i], key)) return s->extra_values[i];
    return NAN;
}

/* A Python reward function (custom_reward_function.path) that misbehaves on purpose: the request still completes
 * within the deadline, exactly the bad items are marked with their outcome and reward_model.error_score, every other
 * score is right, workers are replaced, and no interpreter is left after the daemon exits. */
static void test_python_reward(void **state) {
    Fix *f = *state;
    handshake(f);
    assert_int_equal(tu_count_procs(REWARD_WORKERS), 3);        /* reward_model.num_workers */
    const Item items[] = {
        {"Let me think.\nAnswer: 42", 0, "42", 10, 0},   /* right: +1, acc, pred "42", two extra metrics */
        {"Answer: 41", 0, "42", 10, 0},                   /* wrong: -1 */
        {"x", 0, "sleep", 10, 0},                         /* sleeps for ever: timeout */
        {"x", 0, "segv", 10, 0},                          /* segfault: crash */
        {"x", 0, "oom", 10, 0},                           /* unbounded allocation: memory */
        {"x", 0, "raise", 10, 0},                         /* ValueError: error */
        {"x", 0, "bad", 10, 0},                           /* returns a string: error */
        {"x", 0, "float", 10, 0},                         /* a plain float */
        {"Answer: 7", 0, "7", 90, 0},                     /* right, 10 tokens into the overlong buffer: 1 - 0.5 */
        {"Answer: \xff 7", 0, "7", 10, 0},                /* invalid UTF-8 reaches Python as U+FFFD */
        {"x", 0, "huge", 10, 0},                          /* 1e300: no float holds it: error */
        {"x", 0, "spawn", 10, 0},                         /* starts a process, then hangs: timeout, both killed */
        {"x", 0, "stdin", 10, 0},                         /* reads stdin: EOF at once, 0.5 */
    };
    const int want_outcome[] = {0, 0, DAPO__REWARD_OUTCOME__REWARD_TIMEOUT, DAPO__REWARD_OUTCOME__REWARD_CRASH,
                                DAPO__REWARD_OUTCOME__REWARD_MEMORY, DAPO__REWARD_OUTCOME__REWARD_ERROR,
                                DAPO__REWARD_OUTCOME__REWARD_ERROR, 0, 0, 0, DAPO__REWARD_OUTCOME__REWARD_ERROR,
                                DAPO__REWARD_OUTCOME__REWARD_TIMEOUT, 0};
    const float want[] = {1, -1, -2, -2, -2, -2, -2, 0.25f, 0.5f, -1, -2, -2, 0.5f};
    size_t n = sizeof items / sizeof items[0];
    int64_t t0 = clock_ms();
    Dapo__ScoreResult *r = score(f, items, n, 11);
    double took = (clock_ms() - t0) / 1000.0;
    if (took > 9) fail_msg("the request took %.1f s (deadline 2 s per item, 3 workers)", took);
    for (size_t i = 0; i < n; i++) {
        Dapo__Score *s = r->scores[i];
        if ((int)s->outcome != want_outcome[i] || fabsf(s->score - want[i]) > 1e-6f)
            fail_msg("item %zu: outcome %d score %g (error '%s'), want outcome %d score %g", i, s->outcome, s->score,
                     s->error, want_outcome[i], want[i]);
        if ((want_outcome[i] != 0) != (s->error[0] != 0)) fail_msg("item %zu: error '%s'", i, s->error);
    }
    assert_non_null(strstr(r->scores[2]->error, "timeout"));
    assert_non_null(strstr(r->scores[3]->error, "signal 11"));
    assert_non_null(strstr(r->scores[4]->error, "MemoryError"));
    assert_non_null(strstr(r->scores[5]->error, "ValueError: no score for this one"));
    assert_true(r->scores[0]->acc && !r->scores[1]->acc && r->scores[7]->acc && !r->scores[2]->acc);
    assert_true(r->scores[0]->has_pred && r->scores[0]->pred.len == 2 && !memcmp(r->scores[0]->pred.data, "42", 2));
    assert_false(r->scores[7]->has_pred);
    assert_true(extra_value(r->scores[0], "response_chars") == 24 && extra_value(r->scores[0], "source_is_math") == 1);
    assert_int_equal(r->scores[7]->n_extra_keys, 0);
    assert_true(fabsf(r->scores[8]->overlong_penalty + 0.5f) < 1e-6f);
    assert_non_null(strstr(r->scores[10]->error, "a float can hold"));
    assert_int_equal(tu_count_procs("sleep 314159"), 0);   /* the worker's process group went with it */
    assert_non_null(fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_CREDIT, 5000, NULL));
    /* The replaced workers score the next request right. */
    r = score(f, items, 2, 12);
    assert_true(r->scores[0]->score == 1 && r->scores[1]->score == -1 && r->scores[0]->outcome == 0);
    assert_int_equal(tu_count_procs(REWARD_WORKERS), 3);
    kill(f->pid, SIGTERM);
    assert_non_null(fake_coord_expect(&f->fc, DAPO__MSG_TYPE__MSG_GOODBYE, 5000, NULL));
    assert_int_equal(tu_wait(f->pid, 5000), 0);
    f->pid = 0;
    assert_int_equal(tu_count_procs(REWARD_WORKERS), 0);
}

/* A verifier killed with SIGKILL takes its interpreters with it (PR_SET_PDEATHSIG); a reward file that does not
 * import stops the daemon at start with the Python error. */
static void test_python_reward_lifecycle(void **state) {
    Fix *f = *state;
    handshake(f);
    assert_int_equal(tu_count_procs(REWARD_WORKERS), 3);
    kill(f->pid, SIGKILL);
    tu_wait(f->pid, 5000);
    f->pid = 0;
    for (int i = 0; i < 50 && tu_count_procs(REWARD_WORKERS); i++) usleep(20000);
    assert_int_equal(tu_count_procs(REWARD_WORKERS), 0);
    char bin[256], cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "%s cluster.coordinator=%s custom_reward_function.path=%s/tests/data/reward/"
             "misbehaving_reward.py custom_reward_function.name=no_such_fn 2>&1",
             tu_bin(bin, sizeof bin, "dapo-verifier"), f->fc.endpoint, tu_root());
    assert_int_equal(fake_coord_run(&f->fc, cmd, out, sizeof out), 1);
    if (!strstr(out, "has no function 'no_such_fn'")) fail_msg("output:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s cluster.coordinator=%s custom_reward_function.path=/nonexistent/r.py 2>&1",
             tu_bin(bin, sizeof bin, "dapo-verifier"), f->fc.endpoint);
    assert_int_equal(fake_coord_run(&f->fc, cmd, out, sizeof out), 1);
    if (!strstr(out, "custom_reward_function.path: cannot read /nonexistent/r.py")) fail_msg("output:\n%s", out);
}

/* The reference server's count for key in GET /stats, or -1. */
static int server_stat(int port, const char *key) {
    char body[4096];
    if (tu_http(port, "GET", "/stats", NULL, body, sizeof body) != 200) return -1;
    json_t *j = json_loads(body, 0, NULL);
    int v = json_is_integer(json_object_get(j, key)) ? (int)json_integer_value(json_object_get(j, key)) : 0;
    json_decref(j);
    return v;
}

/* One remote case: a verifier pointed at url scores items; returns the result (owned by f's last message). */
static Dapo__ScoreResult *remote_case(void **state, const char *url, const Item *items, size_t n, double *took) {
    char arg[300];
    snprintf(arg, sizeof arg, "reward_model.remote.url=%s", url);
    assert_int_equal(setup_with(state, (const char *[]){arg, "reward_model.num_workers=2",
                                                        "reward_model.remote.batch_size=4",
                                                        "reward_model.remote.timeout_s=0.5",
                                                        "reward_model.remote.max_retries=2",
                                                        "reward_model.remote.retry_backoff_s=0.05", NULL}), 0);
    Fix *f = *state;
    handshake(f);
    int64_t t0 = clock_ms();
    Dapo__ScoreResult *r = score(f, items, n, 21);
    *took = (clock_ms() - t0) / 1000.0;
    return r;
}

/* A remote reward server (reward_model.remote.url, OpenRLHF's schema) against tests/support/reward_server.py:
 * right scores and extra_logs in batches of remote.batch_size; a flaky server (two HTTP 500s) recovered by retries; a
 * slow one (timeouts), a failing one (HTTP 500 on every try), a non-JSON reply and an unreachable port each give
 * every item its documented outcome and reward_model.error_score, within the bounded time; nothing is lost. */
static pid_t g_srv;                /* the reference server of test_remote_reward */

/* Also after a failed assertion inside the loop: the case's verifier and the server are stopped. */
static int teardown_remote(void **state) {
    if (*state) teardown(state);
    *state = NULL;
    if (g_srv > 0) { kill(g_srv, SIGKILL); tu_wait(g_srv, 2000); }
    g_srv = 0;
    return 0;
}

static void test_remote_reward(void **state) {
    int port = tu_free_port();
    char bin[600], portarg[16], log[300], url[128];
    snprintf(bin, sizeof bin, "%s/tests/support/reward_server.py", tu_root());
    snprintf(portarg, sizeof portarg, "%d", port);
    snprintf(log, sizeof log, "%s/test-logs/reward-server.log", tu_build());
    g_srv = tu_spawn((char *[]){bin, portarg, NULL}, log);          /* #!/usr/bin/env python3 */
    for (int i = 0; i < 100 && server_stat(port, "items") < 0; i++) usleep(50000);
    assert_true(server_stat(port, "items") == 0);
    const Item items[] = {
        {"Answer: 42", 0, "42", 10, 0}, {"Answer: 41", 0, "42", 10, 0}, {"Answer: 7", 0, "7", 10, 0},
        {"no answer", 0, "7", 10, 0}, {"Answer: \xff", 0, "\xef\xbf\xbd", 10, 0}, {"Answer: 9", 0, "9", 90, 0},
    };
    const float ok_want[] = {1, -1, 1, -1, 1, 0.5f};            /* the last one 10 tokens into the overlong buffer */
    struct { const char *path; int outcome; const char *msg; int posts; double max_s; } cases[] = {
        {"/ok", 0, "", 2, 3},
        {"/flaky", 0, "", -1, 3},
        {"/slow", DAPO__REWARD_OUTCOME__REWARD_TIMEOUT, "timeout: no reply", 6, 4},
        {"/fail", DAPO__REWARD_OUTCOME__REWARD_ERROR, "HTTP 500", 6, 3},
        {"/garbage", DAPO__REWARD_OUTCOME__REWARD_ERROR, "no \"rewards\" list", 2, 3},
        {"/huge", DAPO__REWARD_OUTCOME__REWARD_ERROR, "outside the float range", 2, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] + 1; c++) {
        int unreachable = c == sizeof cases / sizeof cases[0];
        if (unreachable) snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", tu_free_port());
        else snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, cases[c].path);
        int outcome = unreachable ? DAPO__REWARD_OUTCOME__REWARD_ERROR : cases[c].outcome;
        double took;
        Dapo__ScoreResult *r = remote_case(state, url, items, 6, &took);
        for (size_t i = 0; i < 6; i++) {
            Dapo__Score *s = r->scores[i];
            float want = outcome ? -2 + (i == 5 ? -0.5f : 0) : ok_want[i];
            want = outcome ? (i == 5 ? -1.5f : -1) : want;              /* error_score -1 (the default) + penalty */
            if ((int)s->outcome != outcome || fabsf(s->score - want) > 1e-6f)
                fail_msg("%s item %zu: outcome %d score %g (error '%s'), want %d / %g", url, i, s->outcome, s->score,
                         s->error, outcome, want);
            const char *msg = unreachable ? "127.0.0.1" : cases[c].msg;
            if (outcome && !strstr(s->error, msg)) fail_msg("%s item %zu: error '%s' lacks '%s'", url, i, s->error, msg);
            if (!outcome && extra_value(s, "query_chars") != 10 + (double)strlen(items[i].resp))   /* prompt + response */
                fail_msg("%s item %zu: query_chars %g", url, i, extra_value(s, "query_chars"));
        }
        if (!outcome) assert_true(r->scores[0]->acc && !r->scores[1]->acc);
        double max_s = unreachable ? 3 : cases[c].max_s;
        if (took > max_s) fail_msg("%s: the request took %.1f s (at most %.1f)", url, took, max_s);
        if (!unreachable && cases[c].posts > 0) assert_int_equal(server_stat(port, cases[c].path), cases[c].posts);
        teardown(state);
        *state = NULL;
    }
    assert_true(server_stat(port, "/flaky") >= 4);                 /* 2 refused + one good POST per batch */
}

/* Every daemon takes --help / -h: the shared usage (flags, key.path=value, --print-config) plus its own flags on
 * stdout, exit 0, and no coordinator needed; an unknown flag still exits 2 naming it. */
static void test_daemons_help(void **state) {
    (void)state;
    static const struct { const char *bin, *flag, *own; } d[] = {
        {"dapo-verifier", "--help", "--id NAME"}, {"dapo-rollout", "-h", "--load DIR"},
        {"dapo-learner", "--help", "--rank N"}, {"dapo-coordinator", "--help", "--print-config"},
    };
    char bin[256], cmd[600], out[8192];
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", tu_bin(bin, sizeof bin, d[i].bin), d[i].flag);
        int rc = tu_run(cmd, out, sizeof out);
        if (rc != 0 || !strstr(out, "usage: ") || !strstr(out, d[i].bin) || !strstr(out, "key.path=value") ||
            !strstr(out, "--print-config") || !strstr(out, d[i].own))
            fail_msg("%s %s: exit %d, output:\n%s", d[i].bin, d[i].flag, rc, out);
    }
    snprintf(cmd, sizeof cmd, "%s --nosuch 2>&1", tu_bin(bin, sizeof bin, "dapo-verifier"));
    assert_int_equal(tu_run(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "unknown argument '--nosuch'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_daemons_help),
        cmocka_unit_test_setup_teardown(test_scores_and_overlong, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup_tiny_deadline, teardown),
        cmocka_unit_test_setup_teardown(test_python_reward, setup_python, teardown),
        cmocka_unit_test_setup_teardown(test_python_reward_lifecycle, setup_python, teardown),
        cmocka_unit_test_teardown(test_remote_reward, teardown_remote),
    };
    return cmocka_run_group_tests_name("verifier_daemon", tests, NULL, NULL);
}
