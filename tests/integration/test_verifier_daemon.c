/* tests/integration/test_verifier_daemon.c: dapo-verifier against the scripted fake coordinator — registration and
 * credit, scores with the overlong penalty, strict box, hostile inputs, per-item deadline, cancel, goodbye; and
 * --help of every daemon. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <zmq.h>

#include "tests/support/fake_coord.h"
#include "tests/testutil.h"

typedef struct { void *ctx; FakeCoord fc; pid_t pid; } Fix;

static pid_t start_verifier(Fix *f, const char *extra) {
    char bin[256], coord[256], log[256];
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", f->fc.endpoint);
    snprintf(log, sizeof log, "%s/test-logs/verifier-daemon.log", tu_build());
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-verifier"), coord, "cluster.verifier_capacity=16",
                    "cluster.verifier_threads=2", "cluster.heartbeat_ms=100", (char *)extra, NULL};
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

static int setup_with(void **state, const char *extra) {
    Fix *f = xcalloc(1, sizeof *f);
    char err[ERR_LEN];
    f->ctx = zmq_ctx_new();
    if (fake_coord_open(&f->fc, f->ctx, "tcp://127.0.0.1:0", err)) return -1;
    f->pid = start_verifier(f, extra);
    *state = f;
    return f->pid > 0 ? 0 : -1;
}
static int setup(void **state) { return setup_with(state, "reward_model.timeout_s=1"); }
static int setup_tiny_deadline(void **state) { return setup_with(state, "reward_model.timeout_s=0.000000001"); }

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
    };
    return cmocka_run_group_tests_name("verifier_daemon", tests, NULL, NULL);
}
