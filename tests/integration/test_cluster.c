/* tests/integration/test_cluster.c: the walking skeleton — the four daemons on loopback (ephemeral ports): every
 * worker registers through the real protocol, a worker killed with SIGKILL is noticed within the lease timeout,
 * a worker stopped with SIGTERM says goodbye, a peer of another protocol version is refused naming both
 * versions, and the command-line config checks of issue 2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <zmq.h>

#include "core/clock.h"
#include "net/net.h"
#include "tests/testutil.h"

typedef struct {
    pid_t coord, rollout, verifier, learner;
    int   zport, hport, wport;
    char  zep[64], hostport[64], logdir[128];
} Cluster;

/* Polls /api/status until `needle` shows up or ms pass; returns 1 when found. Last body in body. */
static int wait_status(Cluster *c, const char *needle, int ms, char *body, size_t n) {
    int64_t end = clock_ms() + ms;
    while (clock_ms() < end) {
        if (tu_http(c->hport, "GET", "/api/status", NULL, body, n) == 200 && strstr(body, needle)) return 1;
        usleep(50000);
    }
    return 0;
}

/* Rollout and learner need a model: the small random Qwen2 of the model fixtures. */
static pid_t start(Cluster *c, const char *name, const char *id) {
    char bin[256], log[256], coord[96], hb[] = "cluster.heartbeat_ms=100", lease[] = "cluster.lease_timeout_s=1.5";
    char model[300], weights[96], tok[300];
    snprintf(coord, sizeof coord, "cluster.coordinator=%s", c->zep);
    snprintf(model, sizeof model, "actor_rollout_ref.model.path=%s/tests/data/model/qwen2_gqa", tu_root());
    snprintf(weights, sizeof weights, "cluster.weights_bind=tcp://127.0.0.1:%d", c->wport);
    snprintf(tok, sizeof tok, "data.tokenizer=%s/data/tokenizers/tiny", tu_root());
    snprintf(log, sizeof log, "%s/%s.log", c->logdir, name);
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, name), coord, hb, lease, model, weights, tok, "--id", (char *)id, NULL};
    return tu_spawn(argv, log);
}

static int setup(void **state) {
    static Cluster c;
    memset(&c, 0, sizeof c);
    snprintf(c.logdir, sizeof c.logdir, "%s/test-logs/cluster", tu_build());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && rm -f %s/*.log", c.logdir, c.logdir);
    if (system(cmd)) return -1;
    c.zport = tu_free_port();
    c.hport = tu_free_port();
    c.wport = tu_free_port();
    snprintf(c.zep, sizeof c.zep, "tcp://127.0.0.1:%d", c.zport);
    char bind[96], http[96], bin[256], log[256];
    snprintf(bind, sizeof bind, "cluster.bind=%s", c.zep);
    snprintf(http, sizeof http, "cluster.http=127.0.0.1:%d", c.hport);
    snprintf(log, sizeof log, "%s/coordinator.log", c.logdir);
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-coordinator"), TU_DAPO_RECIPE, bind, http, "cluster.heartbeat_ms=100",
                    "cluster.lease_timeout_s=1.5", NULL};
    c.coord = tu_spawn(argv, log);
    c.rollout = start(&c, "dapo-rollout", "rollout-0");
    c.verifier = start(&c, "dapo-verifier", "verifier-0");
    c.learner = start(&c, "dapo-learner", "learner-0");
    *state = &c;
    return c.coord > 0 && c.rollout > 0 && c.verifier > 0 && c.learner > 0 ? 0 : -1;
}

static int teardown(void **state) {
    Cluster *c = *state;
    pid_t all[] = {c->rollout, c->verifier, c->learner, c->coord};
    for (int i = 0; i < 4; i++)
        if (all[i] > 0) { kill(all[i], SIGKILL); tu_wait(all[i], 2000); }
    return 0;
}

static void test_register_and_notice_death(void **state) {
    Cluster *c = *state;
    static char body[1 << 16];
    assert_true(wait_status(c, "\"alive\":{\"rollout\":1,\"verifier\":1,\"learner\":1}", 10000, body, sizeof body));
    assert_non_null(strstr(body, "\"id\":\"rollout-0\",\"role\":\"rollout\",\"state\":\"alive\""));
    /* SIGKILL: no goodbye; the coordinator must notice within the lease timeout (1.5 s) plus cron slack. */
    kill(c->rollout, SIGKILL);
    assert_int_equal(tu_wait(c->rollout, 2000), 128 + SIGKILL);
    c->rollout = 0;
    int64_t t0 = clock_ms();
    assert_true(wait_status(c, "\"id\":\"rollout-0\",\"role\":\"rollout\",\"state\":\"lost\"", 4000, body, sizeof body));
    int64_t noticed = clock_ms() - t0;
    assert_true(noticed <= 1500 + 600);
    /* SIGTERM: a clean exit with a goodbye. */
    kill(c->verifier, SIGTERM);
    assert_int_equal(tu_wait(c->verifier, 3000), 0);
    c->verifier = 0;
    assert_true(wait_status(c, "\"id\":\"verifier-0\",\"role\":\"verifier\",\"state\":\"gone\"", 3000, body, sizeof body));
    assert_non_null(strstr(body, "\"id\":\"learner-0\",\"role\":\"learner\",\"state\":\"alive\""));
    /* A restarted worker with the same id registers again. */
    c->rollout = start(c, "dapo-rollout", "rollout-0");
    assert_true(wait_status(c, "\"id\":\"rollout-0\",\"role\":\"rollout\",\"state\":\"alive\"", 5000, body, sizeof body));
    kill(c->learner, SIGTERM);
    assert_int_equal(tu_wait(c->learner, 3000), 0);
    c->learner = 0;
    kill(c->coord, SIGTERM);
    assert_int_equal(tu_wait(c->coord, 3000), 0);
    c->coord = 0;
}

/* A peer speaking protocol version 2 is refused at hello, and the answer names both versions. */
static void test_version_mismatch_refused(void **state) {
    Cluster *c = *state;
    static char body[1 << 16];
    assert_true(wait_status(c, "\"learner\":1", 10000, body, sizeof body));
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN];
    NetOpts o = {.routing_id = "future-worker"};
    void *s = net_socket(ctx, ZMQ_DEALER, c->zep, &o, err);
    assert_non_null(s);
    Dapo__Hello h = DAPO__HELLO__INIT;
    h.protocol_version = DAPO_PROTOCOL_VERSION + 1;
    h.role = DAPO__ROLE__ROLE_ROLLOUT;
    h.worker_id = "future-worker";
    size_t len;
    uint8_t *buf = net_encode(DAPO__MSG_TYPE__MSG_HELLO, &h.base, &len);
    buf[4] = DAPO_PROTOCOL_VERSION + 1;               /* the header's protocol version */
    assert_int_equal(zmq_send(s, buf, len, 0), (int)len);
    xfree(buf);
    NetMsg m;
    int rc = net_recv(s, &m, 5000, 0, err);
    assert_int_equal(rc, 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_WELCOME);
    Dapo__Welcome *w = (Dapo__Welcome *)m.msg;
    assert_false(w->accepted);
    char want[96];
    snprintf(want, sizeof want, "worker future-worker speaks %d, coordinator speaks %d", DAPO_PROTOCOL_VERSION + 1,
             DAPO_PROTOCOL_VERSION);
    assert_non_null(strstr(w->reason, want));
    net_msg_free(&m);
    /* Garbage to the coordinator gets an error reply; the coordinator keeps serving. */
    assert_int_equal(zmq_send(s, "not a dapo frame", 16, 0), 16);
    assert_int_equal(net_recv(s, &m, 5000, 0, err), 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_ERROR);
    assert_int_equal(((Dapo__ErrorReply *)m.msg)->code, ERR_DECODE);
    net_msg_free(&m);
    /* issue 38: 244 more garbage frames give a handful of warnings, and a count of the ones held back */
    for (int i = 0; i < 244; i++) assert_int_equal(zmq_send(s, "not a dapo frame", 16, 0), 16);
    zmq_close(s);
    zmq_ctx_term(ctx);
    assert_true(wait_status(c, "\"messages_bad\":245", 10000, body, sizeof body));
    char cmd[600], out[32];
    snprintf(cmd, sizeof cmd, "grep -c 'dropped a bad message' %s/coordinator.log", c->logdir);
    tu_run(cmd, out, sizeof out);
    assert_true(atoi(out) >= 1 && atoi(out) <= 3);
    snprintf(cmd, sizeof cmd, "grep -c 'dropped bad messages: 24[34] more in the last 1[0-9] s' %s/coordinator.log",
             c->logdir);
    int counted = 0;
    for (int64_t end = clock_ms() + 15000; clock_ms() < end && !counted; usleep(200000)) {
        tu_run(cmd, out, sizeof out);
        counted = atoi(out) == 1;
    }
    assert_true(counted);
    assert_int_equal(tu_http(c->hport, "GET", "/nope", NULL, body, sizeof body), 404);
}

static void test_print_config_and_bad_overrides(void **state) {
    (void)state;
    static char out[1 << 16];
    char bin[256], cmd[600];
    const char *names[] = {"dapo-coordinator", "dapo-rollout", "dapo-verifier", "dapo-learner"};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "%s --print-config 2>&1", tu_bin(bin, sizeof bin, names[i]));
        assert_int_equal(tu_run(cmd, out, sizeof out), 0);
        assert_non_null(strstr(out, "    clip_ratio_high: 0.2  # default\n"));    /* with where it came from */
    }
    snprintf(cmd, sizeof cmd, "%s --config %s/configs/default.yaml actor_rollout_ref.rollout.n=4 --print-config 2>&1",
             tu_bin(bin, sizeof bin, "dapo-coordinator"), tu_root());
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "    n: 4  # command line\n"));
    assert_non_null(strstr(out, "/configs/default.yaml\n"));
    assert_non_null(strstr(out, "  max_prompt_length: "));
    tu_bin(bin, sizeof bin, "dapo-coordinator");
    snprintf(cmd, sizeof cmd, "%s actor_rollout_ref.actor.clip_ratio_hgh=0.3 --print-config 2>&1", bin);
    assert_int_not_equal(tu_run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "unknown key 'actor_rollout_ref.actor.clip_ratio_hgh'"));
    snprintf(cmd, sizeof cmd, "%s actor_rollout_ref.actor.clip_ratio_high=abc --print-config 2>&1", bin);
    assert_int_not_equal(tu_run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "'abc' is not a number"));
    snprintf(cmd, sizeof cmd, "%s actor_rollout_ref.rollout.name=vllm --print-config 2>&1", bin);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "WARN"));
    assert_non_null(strstr(out, "actor_rollout_ref.rollout.name: verl key not used by dapo"));
    snprintf(cmd, sizeof cmd, "%s/bin/dapo-learner --rank 3 2>&1", tu_build());
    assert_int_not_equal(tu_run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "--rank: '3' is not a rank in 0..0"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_config_and_bad_overrides),
        cmocka_unit_test_setup_teardown(test_register_and_notice_death, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version_mismatch_refused, setup, teardown),
    };
    return cmocka_run_group_tests_name("cluster", tests, NULL, NULL);
}
