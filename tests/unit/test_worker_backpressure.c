/* tests/unit/test_worker_backpressure.c: a worker whose send queue is full (the coordinator reads slower than the
 * results come) loses nothing (issue 8, the coordinator stall): worker_send waits for room instead of dropping a
 * result, and credit that found the queue full is announced later. Before the fix the first send past ZeroMQ's
 * high-water mark returned ERR_AGAIN and the result was gone while the worker's heartbeats kept its lease renewed,
 * so the coordinator waited for it for ever (bench/coordinator hung about 1 run in 5).
 * The coordinator here is a bare ROUTER on inproc (pipe capacity: the two 1000-message HWMs, no kernel buffers),
 * which stops reading for a while and then reads everything on another thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "net/worker.h"

#define NRESULTS 5000                      /* well past the 2000 messages the inproc pipe holds */

typedef struct {
    void *router;
    int   delay_ms;                        /* reads nothing for this long */
    int   results, in_order;               /* ScoreResults received; all in request_id order */
    uint64_t credits;                      /* credits announced after the first (the Welcome's) */
    volatile int stop;
} Reader;

static void *reader_main(void *arg) {
    Reader *r = arg;
    usleep((useconds_t)r->delay_ms * 1000);
    r->in_order = 1;
    int64_t end = clock_ms() + 30000;
    while (!r->stop && clock_ms() < end && (r->results < NRESULTS || r->credits < NRESULTS)) {
        NetMsg m;
        char err[ERR_LEN];
        if (net_recv(r->router, &m, 50, 0, err) != 0) continue;
        if (m.type == DAPO__MSG_TYPE__MSG_SCORE_RESULT) {
            if (((Dapo__ScoreResult *)m.msg)->request_id != (uint64_t)r->results) r->in_order = 0;
            r->results++;
        } else if (m.type == DAPO__MSG_TYPE__MSG_CREDIT) {
            r->credits += ((Dapo__Credit *)m.msg)->credits;
        }
        net_msg_free(&m);
    }
    return NULL;
}

/* A bare ROUTER on `ep` and a worker registered with it (Hello, Welcome, the first Credit read). */
static Worker *registered_worker(void *ctx, const char *ep, const char *id, int send_wait_ms, void **router) {
    char err[ERR_LEN];
    NetOpts ro = {.bind = true};
    *router = net_socket(ctx, ZMQ_ROUTER, ep, &ro, err);
    assert_non_null(*router);
    WorkerOpts o = {.role = DAPO__ROLE__ROLE_VERIFIER, .worker_id = id, .coordinator = ep, .capacity = 100,
                    .heartbeat_ms = 60000, .lease_timeout_s = 60, .send_wait_ms = send_wait_ms};
    Worker *w = worker_open(ctx, &o, err);
    assert_non_null(w);
    NetMsg m;
    assert_int_equal(net_recv(*router, &m, 2000, 0, err), 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_HELLO);
    Dapo__Welcome wel = DAPO__WELCOME__INIT;
    wel.accepted = 1;
    wel.protocol_version = DAPO_PROTOCOL_VERSION;
    wel.run_id = "bp";
    wel.heartbeat_ms = 60000;
    wel.lease_timeout_s = 60;
    wel.reason = "";
    assert_int_equal(net_send(*router, m.peer, m.peer_len, DAPO__MSG_TYPE__MSG_WELCOME, &wel.base, false), 0);
    net_msg_free(&m);
    for (int i = 0; i < 100 && worker_state(w) != WORKER_READY; i++) {
        NetMsg x;
        if (worker_poll(w, &x, 20, err) == 1) net_msg_free(&x);
    }
    assert_int_equal(worker_state(w), WORKER_READY);
    assert_int_equal(net_recv(*router, &m, 2000, 0, err), 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_CREDIT);
    assert_int_equal(((Dapo__Credit *)m.msg)->credits, 100);
    net_msg_free(&m);
    return w;
}

static void test_full_queue_loses_no_result_or_credit(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new(), *router;
    char err[ERR_LEN];
    Worker *w = registered_worker(ctx, "inproc://backpressure", "verifier-bp", 20000, &router);

    /* the coordinator stops reading for 300 ms; the worker sends a result and a credit per item meanwhile */
    static Reader rd;
    memset(&rd, 0, sizeof rd);
    rd.router = router;
    rd.delay_ms = 300;
    pthread_t th;
    pthread_create(&th, NULL, reader_main, &rd);
    Dapo__Score sc = DAPO__SCORE__INIT, *scp[1] = {&sc};
    sc.error = "";
    int failed = 0;
    for (int i = 0; i < NRESULTS; i++) {
        Dapo__ScoreResult r = DAPO__SCORE_RESULT__INIT;
        r.run_id = "bp";
        r.request_id = (uint64_t)i;
        r.attempt = 1;
        r.n_scores = 1;
        r.scores = scp;
        failed += worker_send(w, DAPO__MSG_TYPE__MSG_SCORE_RESULT, &r.base) != 0;
        assert_true(worker_add_credit(w, 1) == 0);
    }
    for (int64_t end = clock_ms() + 20000; clock_ms() < end && rd.credits < NRESULTS;) {   /* pending credit */
        NetMsg x;
        if (worker_poll(w, &x, 20, err) == 1) net_msg_free(&x);
    }
    rd.stop = 1;
    pthread_join(th, NULL);
    assert_int_equal(failed, 0);
    assert_true(worker_full_waits(w) > 0);              /* the queue did fill: the case under test happened */
    assert_int_equal(rd.results, NRESULTS);
    assert_true(rd.in_order);
    assert_int_equal(rd.credits, NRESULTS);
    worker_close(w, NULL);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

/* A queue that stays full (nobody reads) gives up after send_wait_ms with ERR_AGAIN instead of blocking for ever,
 * and the worker registers again (the coordinator read nothing of it for that long), so the next send does not
 * wait. */
static void test_send_wait_is_bounded(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new(), *router;
    Worker *w = registered_worker(ctx, "inproc://backpressure-2", "verifier-bp2", 200, &router);
    Dapo__LeaseRenew lr = DAPO__LEASE_RENEW__INIT;
    int rc = 0, sent = 0;
    int64_t t0 = 0;
    while (sent < 10000) {
        t0 = clock_ms();
        rc = worker_send(w, DAPO__MSG_TYPE__MSG_LEASE_RENEW, &lr.base);
        if (rc) break;
        sent++;
    }
    int64_t waited = clock_ms() - t0;
    assert_int_equal(rc, ERR_AGAIN);
    assert_true(sent >= 1000 && sent < 10000);
    assert_true(waited >= 190 && waited < 5000);
    assert_int_equal(worker_state(w), WORKER_CONNECTING);
    t0 = clock_ms();
    assert_int_equal(worker_send(w, DAPO__MSG_TYPE__MSG_LEASE_RENEW, &lr.base), ERR_AGAIN);
    assert_true(clock_ms() - t0 < 100);
    worker_close(w, NULL);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_queue_loses_no_result_or_credit),
        cmocka_unit_test(test_send_wait_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
