/* tests/integration/test_multihost.c: the cluster across "hosts" (issue 18). Each role runs in its own network
 * namespace made by the test (coordinator, learner ranks 0 and 1, verifier, two rollouts, an intruder), joined by a
 * bridge in a hub namespace, with addresses inside those namespaces only; CURVE on everywhere (keys from
 * dapo-keygen), the real daemons, a reduced batch-invariant config. While it trains:
 *   - the verifier's link goes down past the lease timeout: the run waits for it, then goes on; then
 *   - rollout-0's link goes down for 45 s: it is declared lost, its leases go back to the queue, the
 *     step completes on rollout-1; the link comes back: it registers again exactly once (the Hellos and heartbeats
 *     it queued meanwhile are one registration) and gets work again;
 *   - from the intruder's namespace a Hello to the coordinator and a WeightResend to learner rank 0 get no answer,
 *     from a plaintext client, a CURVE client whose key is not on the allow-list (refused, logged once with its
 *     fingerprint at both servers) and one with a forged server key.
 * At the end the accounting adds up and the final weights (two learner ranks, the collective over CURVE between
 * two namespaces) are bitwise those of the same run on loopback. Needs root and `ip` (iproute2): prints SKIP
 * otherwise. The namespaces are removed whatever happens (teardown, and before starting). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <sys/wait.h>
#include <zmq.h>

#include "core/clock.h"
#include "net/net.h"
#include "tests/curve_client.h"
#include "tests/group_status.h"
#include "tests/testutil.h"

#define STEPS 12
#define PARTITION_S 45       /* how long rollout-0's host is cut off (the 45 s) */
#define NNODES 7
enum { N_COORD, N_L0, N_L1, N_VER, N_R0, N_R1, N_X };
static const char *const ROLE_NAME[NNODES] = {"coordinator", "learner-0", "learner-1", "verifier-0", "rollout-0",
                                              "rollout-1", "intruder"};
static char ns[NNODES][32], hub[32], addr[NNODES][32], veth[NNODES][16];
static char dir[300], keys[400];
static int subnet;
static pid_t procs[NNODES];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void net_down(void) {
    for (int i = 0; i < NNODES; i++) sh("ip netns del %s 2>/dev/null", ns[i]);
    sh("ip netns del %s 2>/dev/null", hub);
}

static void net_up(void) {
    int id = (int)getpid() % 100000;
    subnet = 64 + (int)getpid() % 128;
    snprintf(hub, sizeof hub, "dapo%dh", id);
    for (int i = 0; i < NNODES; i++) {
        snprintf(ns[i], sizeof ns[i], "dapo%dn%d", id, i);
        snprintf(veth[i], sizeof veth[i], "dv%dn%d", id, i);
        snprintf(addr[i], sizeof addr[i], "10.%d.0.%d", subnet, i + 1);
    }
    net_down();
    /* can this machine make namespaces, a bridge and veth pairs at all (a container without CAP_SYS_ADMIN or the
     * veth module cannot)? Otherwise SKIP, as without root */
    if (sh("ip netns add %s 2>/dev/null && ip -n %s link add br0 type bridge 2>/dev/null && "
           "ip -n %s link add pa type veth peer name pb 2>/dev/null && ip -n %s link del pa && "
           "ip netns exec %s true 2>/dev/null", hub, hub, hub, hub, hub) != 0) {
        net_down();
        printf("SKIP test_multihost: this machine cannot create network namespaces with a bridge and veth pairs, or "
               "run a program in one (ip netns exec)\n");
        skip();
    }
    assert_int_equal(sh("ip -n %s link set br0 up && ip -n %s link set lo up", hub, hub), 0);
    for (int i = 0; i < NNODES; i++)
        assert_int_equal(sh("ip netns add %s && ip -n %s link set lo up && "
                            "ip link add %s type veth peer name eth0 netns %s && ip link set %s netns %s && "
                            "ip -n %s link set %s master br0 up && ip -n %s addr add %s/24 dev eth0 && "
                            "ip -n %s link set eth0 up", ns[i], ns[i], veth[i], ns[i], veth[i], hub, hub, veth[i],
                            ns[i], addr[i], ns[i]), 0);
}

/* The daemons' arguments (as test_chaos's, batch-invariant), for the addresses of run `here` (0 loopback). */
static int args(char a[][640], int role, int here, const char *rdir, const char *ports) {
    int n = 0;
    int zp = 0, wp = 0, cp = 0;
    sscanf(ports, "%d %d %d", &zp, &wp, &cp);
    const char *ca = here ? addr[N_COORD] : "127.0.0.1", *la = here ? addr[N_L0] : "127.0.0.1";
    snprintf(a[n++], 640, "--config");
    snprintf(a[n++], 640, "%s/configs/default.yaml", tu_root());
    snprintf(a[n++], 640, "data.train_files=%s/train.jsonl", dir);
    snprintf(a[n++], 640, "data.val_files=%s/val.jsonl", dir);
    snprintf(a[n++], 640, "actor_rollout_ref.model.path=%s/model", dir);
    snprintf(a[n++], 640, "trainer.default_local_dir=%s/ckpt", rdir);
    snprintf(a[n++], 640, "cluster.bind=tcp://%s:%d", ca, zp);
    snprintf(a[n++], 640, "cluster.coordinator=tcp://%s:%d", ca, zp);
    snprintf(a[n++], 640, "cluster.weights_bind=tcp://%s:%d", la, wp);
    snprintf(a[n++], 640, "cluster.weights=tcp://%s:%d", la, wp);
    snprintf(a[n++], 640, "cluster.collective=tcp://%s:%d", la, cp);
    snprintf(a[n++], 640, "cluster.http=127.0.0.1:%d", here ? 8080 : zp + 1);
    snprintf(a[n++], 640, "cluster.curve.server_public_key=%s/server.pub", keys);
    snprintf(a[n++], 640, "cluster.curve.server_secret_key=%s/server.key", keys);
    snprintf(a[n++], 640, "cluster.curve.authorized_keys=%s/authorized_keys", keys);
    snprintf(a[n++], 640, "cluster.curve.secret_key=%s/%s.key", keys, ROLE_NAME[role]);
    snprintf(a[n++], 640, "trainer.total_training_steps=%d", STEPS);
    const char *fixed[] = {TU_DAPO_RECIPE, "data.train_batch_size=4", "data.gen_batch_size=6", "actor_rollout_ref.rollout.n=4",
                           "actor_rollout_ref.actor.ppo_mini_batch_size=2", "data.max_response_length=24",
                           "reward_model.overlong_buffer.len=8", "algorithm.filter_groups.enable=false",
                           "trainer.save_freq=1", "trainer.val_before_train=false", "trainer.test_freq=0",
                           "cluster.num_learners=2", "cluster.heartbeat_ms=200", "cluster.lease_timeout_s=2",
                           "cluster.collective_timeout_s=30", "actor_rollout_ref.rollout.batch_invariant=true",
                           "actor_rollout_ref.rollout.max_num_seqs=8", "cluster.rollout_threads=1",
                           "cluster.learner_threads=1", "cluster.verifier_threads=1"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) snprintf(a[n++], 640, "%s", fixed[i]);
    snprintf(a[n++], 640, "%s", tu_fsdp_size_arg());
    return n;
}

static const char *BIN[NNODES] = {"dapo-coordinator", "dapo-learner", "dapo-learner", "dapo-verifier", "dapo-rollout",
                                  "dapo-rollout", NULL};

/* Starts every role: in its namespace (here) or on loopback. */
static void start_all(int here, const char *rdir, const char *ports) {
    for (int r = 0; r < N_X; r++) {
        static char a[80][640];
        char *argv[96], bin[300], log[500];
        int k = 0;
        if (here) { argv[k++] = "/usr/sbin/ip"; argv[k++] = "netns"; argv[k++] = "exec"; argv[k++] = ns[r]; }
        argv[k++] = (char *)tu_bin(bin, sizeof bin, BIN[r]);
        int n = args(a, r, here, rdir, ports);
        for (int i = 0; i < n; i++) argv[k++] = a[i];
        if (r != N_COORD) { argv[k++] = "--id"; argv[k++] = (char *)ROLE_NAME[r]; }
        if (r == N_L0 || r == N_L1) { argv[k++] = "--rank"; argv[k++] = r == N_L0 ? "0" : "1"; }
        argv[k] = NULL;
        snprintf(log, sizeof log, "%s/%s.log", rdir, ROLE_NAME[r]);
        procs[r] = tu_spawn(argv, log);
        assert_true(procs[r] > 0);
    }
}

static void stop_all(void) {
    for (int r = N_X - 1; r >= 0; r--) if (procs[r] > 0) kill(procs[r], SIGTERM);
    for (int r = N_X - 1; r >= 0; r--)
        if (procs[r] > 0 && tu_wait(procs[r], 15000) < 0) { kill(procs[r], SIGKILL); tu_wait(procs[r], 2000); }
    memset(procs, 0, sizeof procs);
}

/* Starts fn in a child that entered namespace `name` (setns): its pid (tu_wait gives its exit status). */
static pid_t in_ns_start(const char *name, int (*fn)(void *), void *arg) {
    pid_t p = fork();
    if (p == 0) {
        char path[128];
        snprintf(path, sizeof path, "/var/run/netns/%s", name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(120);
        _exit(fn(arg));
    }
    return p;
}

/* Runs fn in a child that entered namespace `name`: its exit status, or -1. */
static int in_ns(const char *name, int (*fn)(void *), void *arg) {
    return tu_wait(in_ns_start(name, fn, arg), 30000);
}

static int http_port;
static char status_path[64];
static int fetch_status(void *arg) {
    (void)arg;
    int fd = open(status_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char body[1 << 18];
    int code = tu_http(http_port, "GET", "/api/status", NULL, body, sizeof body);
    if (fd < 0 || code != 200) return 1;
    ssize_t w = write(fd, body, strlen(body));
    close(fd);
    return w > 0 ? 0 : 1;
}

/* /api/status of the run (in the coordinator's namespace when here). NULL when it does not answer. */
static json_t *status(int here) {
    snprintf(status_path, sizeof status_path, "/tmp/dapo-mh-%d.json", (int)getpid());
    int rc = here ? in_ns(ns[N_COORD], fetch_status, NULL) : fetch_status(NULL);
    json_t *j = rc == 0 ? json_load_file(status_path, 0, NULL) : NULL;
    unlink(status_path);
    return j;
}

static json_int_t geti(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static const char *worker_state(json_t *st, const char *id) {
    json_t *w;
    size_t i;
    json_array_foreach(json_object_get(st, "workers"), i, w)
        if (!strcmp(json_string_value(json_object_get(w, "id")), id)) return json_string_value(json_object_get(w, "state"));
    return "";
}

/* Waits until the run is at `step` (or done when step == STEPS), and `id` (when given) is in `state`. */
static json_t *wait_for(int here, long step, const char *id, const char *state, int ms, const char *what) {
    int64_t end = clock_ms() + (int64_t)ms * TU_SLOW;
    while (clock_ms() < end) {
        json_t *st = status(here);
        int ok = st && geti(st, "done_steps") >= step &&
                 (step < STEPS || !strcmp(json_string_value(json_object_get(st, "phase")), "done")) &&
                 (!id || !strcmp(worker_state(st, id), state));
        if (ok) return st;
        json_decref(st);
        usleep(200000);
    }
    fail_msg("multi-host: timed out waiting for %s", what);
    return NULL;
}

/* Waits until worker id holds work (its credit is below its capacity), so that its partition strands a lease. */
static void wait_leased(const char *id) {
    int64_t end = clock_ms() + 30000;
    while (clock_ms() < end) {
        json_t *st = status(1), *w;
        size_t i;
        int held = 0;
        json_array_foreach(json_object_get(st, "workers"), i, w)
            if (!strcmp(json_string_value(json_object_get(w, "id")), id))
                held = geti(w, "credit") < geti(w, "capacity");
        json_decref(st);
        if (held) return;
        usleep(20000);
    }
    fail_msg("multi-host: %s never held work", id);
}

static const char *ep_coord, *ep_weights, *ep_coll;
/* From the intruder's host, each of: a plaintext client, a CURVE client with a key not on the allow-list, and one
 * with its key but a forged server key, to the coordinator (a Hello) and to learner rank 0's weight server (a
 * WeightResend). Returns how many got any answer (0 expected), or -1 when its keys cannot be read. */
static int intruder(void *arg) {
    (void)arg;
    Dapo__Hello h = tu_hello("intruder", DAPO__ROLE__ROLE_ROLLOUT, 8);
    Dapo__WeightResend wr = DAPO__WEIGHT_RESEND__INIT;
    char path[500], err[ERR_LEN], spub[41], sec[41], pub[41], fpub[41], fsec[41];
    snprintf(path, sizeof path, "%s/server.pub", keys);
    if (curve_key_read(path, false, "server", spub, err)) return -1;
    snprintf(path, sizeof path, "%s/intruder.key", keys);
    if (curve_key_read(path, true, "intruder", sec, err) || zmq_curve_public(pub, sec) ||
        zmq_curve_keypair(fpub, fsec))
        return -1;
    const char *server[3] = {NULL, spub, fpub};              /* plaintext, unknown key, forged server key */
    int answered = 0;
    for (int k = 0; k < 3; k++)
        answered += (tu_answered(ep_coord, server[k], pub, sec, DAPO__MSG_TYPE__MSG_HELLO, &h.base, 1000) != 0) +
                    (tu_answered(ep_weights, server[k], pub, sec, DAPO__MSG_TYPE__MSG_WEIGHT_RESEND, &wr.base,
                                 1000) != 0);
    answered += tu_answered(ep_coll, NULL, NULL, NULL, DAPO__MSG_TYPE__MSG_HELLO, &h.base, 1000) != 0;  /* plaintext */
    return answered;
}

/* Sends m (of type) on a fresh DEALER with routing id rid, a CURVE client with the key pair of keys/<key>.key; 1 when
 * a message came back within ms and *answer (may be NULL) gets its type; 0 when none did; -1 when it cannot connect. */
static int sent_as(const char *ep, const char *rid, const char *key, Dapo__MsgType type, const ProtobufCMessage *m,
                   int ms, Dapo__MsgType *answer) {
    char path[500], err[ERR_LEN], spub[41], sec[41], pub[41];
    snprintf(path, sizeof path, "%s/server.pub", keys);
    if (curve_key_read(path, false, "server", spub, err)) return -1;
    snprintf(path, sizeof path, "%s/%s.key", keys, key);
    if (curve_key_read(path, true, key, sec, err) || zmq_curve_public(pub, sec)) return -1;
    void *ctx = zmq_ctx_new(), *s = tu_dealer(ctx, ep, rid, spub, pub, sec);
    int got = -1;
    if (s) {
        net_send(s, NULL, 0, type, m, true);
        NetMsg r;
        got = net_recv(s, &r, ms, 1 << 20, err) == 0;
        if (got && answer) *answer = r.type;
        if (got) net_msg_free(&r);
        zmq_close(s);
    }
    zmq_ctx_term(ctx);
    return got;
}

/* issue 38: from the intruder's host, a client holding rollout-1's key (a leaked rollout key, on the allow-list):
 * with the routing ids of learner-0, verifier-0 and rollout-0 a Heartbeat is told to say Hello (no worker registered
 * on its connection) and displaces nobody; a Hello as learner-0 or as rollout-0 is refused; a WeightResend with the
 * verifier's key gets no weights. Returns the number of outcomes other than those (0 expected). */
/* issue 38: from the intruder's host while the run trains, a client holding rollout-1's key joins the learners'
 * collective (learner rank 0's cluster.collective) as rank 1, with the routing id the ranks once used: the learners'
 * ZAP domain refuses the key at the handshake, so it gets no READY and displaces nobody (the final weights, bitwise
 * the loopback run's, show it). It runs beside the test's next
 * phases (they depend on the run's pace). Returns 1 when it got an answer. */
static int leaked_key_collective(void *arg) {
    (void)arg;
    int bad = 0;
    char path[500], err[ERR_LEN], spub[41], sec[41], pub[41];
    snprintf(path, sizeof path, "%s/server.pub", keys);
    if (curve_key_read(path, false, "server", spub, err)) return 100;
    snprintf(path, sizeof path, "%s/rollout-1.key", keys);
    if (curve_key_read(path, true, "rollout-1", sec, err) || zmq_curve_public(pub, sec)) return 100;
    void *ctx = zmq_ctx_new(), *s = tu_dealer(ctx, ep_coll, "coll-rank-1", spub, pub, sec);
    if (!s) return 100;
    struct { uint32_t magic, version, op, rank; uint64_t seq, bytes, nonce; } hello = {0x4c4f4344u, 2, 1, 1, 0, 8, 77};
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    for (int k = 0; k < 8 && !(it.revents & ZMQ_POLLIN); k++) {   /* as a joining rank: HELLO again and again, so
                                                                      rank 0 reads one in its next collective */
        zmq_send(s, &hello, sizeof hello, ZMQ_DONTWAIT);   /* refused at the handshake: no peer, a send would wait */
        bad += zmq_poll(&it, 1, 200) > 0;
    }
    usleep(8000000);                 /* trying while the run trains on (the learners' ZAP refuses the key: nothing is
                                        ever delivered) */
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);   /* its HELLOs are still queued: do not wait for them */
    zmq_close(s);
    zmq_ctx_term(ctx);
    return bad;
}

static int leaked_key(void *arg) {
    (void)arg;
    Dapo__Heartbeat hb = DAPO__HEARTBEAT__INIT;
    Dapo__WeightResend wr = DAPO__WEIGHT_RESEND__INIT;
    static const char *const rids[] = {"learner-0", "verifier-0", "rollout-0"};
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        Dapo__MsgType t = DAPO__MSG_TYPE__MSG_UNKNOWN;
        bad += sent_as(ep_coord, rids[i], "rollout-1", DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base, 2000, &t) != 1 ||
               t != DAPO__MSG_TYPE__MSG_ERROR;
    }
    Dapo__Hello as_learner = tu_hello("learner-0", DAPO__ROLE__ROLE_LEARNER, 1),
                as_rollout = tu_hello("rollout-0", DAPO__ROLE__ROLE_ROLLOUT, 8);
    Dapo__MsgType t = DAPO__MSG_TYPE__MSG_UNKNOWN;
    bad += sent_as(ep_coord, "learner-0", "rollout-1", DAPO__MSG_TYPE__MSG_HELLO, &as_learner.base, 2000, &t) != 1 ||
           t != DAPO__MSG_TYPE__MSG_WELCOME;         /* a Welcome with accepted false: checked in the log */
    bad += sent_as(ep_coord, "rollout-0", "rollout-1", DAPO__MSG_TYPE__MSG_HELLO, &as_rollout.base, 2000, &t) != 1 ||
           t != DAPO__MSG_TYPE__MSG_WELCOME;
    Dapo__Hello as_rank0 = tu_hello("gpu-node-3", DAPO__ROLE__ROLE_LEARNER, 1);   /* a key named for no role, as its */
    as_rank0.world_size = 2;                                                    /* own id: not rank 0 (issue 38) */
    bad += sent_as(ep_coord, "gpu-node-3", "gpu-node-3", DAPO__MSG_TYPE__MSG_HELLO, &as_rank0.base, 2000, &t) != 1 ||
           t != DAPO__MSG_TYPE__MSG_WELCOME;
    bad += sent_as(ep_weights, "verifier-0", "verifier-0", DAPO__MSG_TYPE__MSG_WEIGHT_RESEND, &wr.base, 1500,
                   NULL) != 0;
    return bad;
}

static int count_in(const char *path, const char *what) {
    char cmd[900], out[64];
    snprintf(cmd, sizeof cmd, "grep -c '%s' %s", what, path);
    tu_run(cmd, out, sizeof out);
    return atoi(out);
}

static void test_multihost(void **state) {
    (void)state;
    if (getuid() != 0 || access("/usr/sbin/ip", X_OK) != 0) {
        printf("SKIP test_multihost: needs root and /usr/sbin/ip (iproute2) for network namespaces\n");
        skip();
    }
    snprintf(dir, sizeof dir, "%s/test-logs/multihost", tu_build());
    snprintf(keys, sizeof keys, "%s/keys", dir);
    char bin[300], bin2[300], bin3[300];
    assert_int_equal(sh("rm -rf %s && mkdir -p %s/ref %s/net && %s --split train --n 400 > %s/train.jsonl && "
                        "%s --split test --n 4 --seed 2 > %s/val.jsonl && %s --config %s/configs/tiny-model/config.json "
                        "--tokenizer %s/data/tokenizers/tiny --out %s/model > %s/init.log 2>&1 && %s --dir %s --server "
                        "--client coordinator --client learner-0 --client learner-1 --client verifier-0 --client rollout-0 "
                        "--client rollout-1 --client intruder --client gpu-node-3 > /dev/null", dir, dir, dir,
                        tu_bin(bin, sizeof bin, "dapo-gen-arith"), dir, bin, dir,
                        tu_bin(bin2, sizeof bin2, "dapo-init-model"), tu_root(), tu_root(), dir, dir,
                        tu_bin(bin3, sizeof bin3, "dapo-keygen"), keys), 0);
    assert_int_equal(sh("rm %s/authorized_keys/intruder.pub", keys), 0);    /* made, never let in */
    net_up();
    /* the same run on loopback first: its final weights are the reference */
    char ref[400], net[400], ports[64];
    snprintf(ref, sizeof ref, "%s/ref", dir);
    snprintf(net, sizeof net, "%s/net", dir);
    int zp = tu_free_port();
    snprintf(ports, sizeof ports, "%d %d %d", zp, tu_free_port(), tu_free_port());
    http_port = zp + 1;
    start_all(0, ref, ports);
    json_t *st = wait_for(0, STEPS, NULL, NULL, 120000, "the loopback run");
    json_decref(st);
    stop_all();
    /* across namespaces (made before the loopback run: net_up SKIPs where they cannot be made) */
    http_port = 8080;
    start_all(1, net, "5555 5556 5557");
    st = wait_for(1, 2, NULL, NULL, 120000, "step 2 across hosts");
    json_decref(st);
    char ec[64], ew[64], el[64];
    snprintf(ec, sizeof ec, "tcp://%s:5555", addr[N_COORD]);
    snprintf(ew, sizeof ew, "tcp://%s:5556", addr[N_L0]);
    snprintf(el, sizeof el, "tcp://%s:5557", addr[N_L0]);
    ep_coord = ec;
    ep_weights = ew;
    ep_coll = el;
    pid_t coll_attack = in_ns_start(ns[N_X], leaked_key_collective, NULL);
    /* a verifier host partitioned past the lease timeout (it scores in microseconds, so it seldom holds a lease):
     * the run waits for it, then goes on */
    assert_int_equal(sh("ip -n %s link set %s down", hub, veth[N_VER]), 0);
    st = wait_for(1, 0, "verifier-0", "lost", 30000, "verifier-0 declared lost");
    json_decref(st);
    assert_int_equal(sh("ip -n %s link set %s up", hub, veth[N_VER]), 0);
    /* a rollout host partitioned past the lease timeout while it holds a lease, then back */
    wait_leased("rollout-0");
    assert_int_equal(sh("ip -n %s link set %s down", hub, veth[N_R0]), 0);
    int64_t t_down = clock_ms();
    st = wait_for(1, 0, "rollout-0", "lost", 30000, "rollout-0 declared lost");
    long at = (long)geti(st, "done_steps");
    json_decref(st);
    st = wait_for(1, at + 1, NULL, NULL, 60000, "a step without rollout-0");
    json_decref(st);
    while (clock_ms() - t_down < PARTITION_S * 1000) usleep(100000);   /* its Hellos and heartbeats queue up */
    assert_int_equal(sh("ip -n %s link set %s up", hub, veth[N_R0]), 0);
    st = wait_for(1, 0, "rollout-0", "alive", 30000, "rollout-0 back");
    json_decref(st);
    /* an intruder host: no answer from the coordinator or the weight server */
    assert_int_equal(in_ns(ns[N_X], intruder, NULL), 0);
    assert_int_equal(in_ns(ns[N_X], leaked_key, NULL), 0);
    assert_int_equal(tu_wait(coll_attack, 30000), 0);
    st = wait_for(1, STEPS, NULL, NULL, 120000, "the run across hosts to finish");
    json_t *sec = json_object_get(st, "security");
    assert_true(geti(sec, "messages_unregistered") >= 3 && geti(sec, "hellos_refused") >= 2);
    assert_true(geti(sec, "handshakes_plaintext") + geti(sec, "handshakes_failed") >= 1);   /* the plaintext client */
    assert_int_equal(geti(sec, "messages_foreign"), 0);
    tu_assert_groups_add_up(st, 1);
    assert_int_equal(tu_group_count(st, "trained"), STEPS * 4);
    assert_true(geti(json_object_get(st, "leases"), "requeued_from_lost") > 0);
    json_t *w;
    size_t i;
    json_array_foreach(json_object_get(st, "workers"), i, w) {
        assert_true(strlen(json_string_value(json_object_get(w, "key"))) == 16);   /* every worker on CURVE */
        if (strcmp(json_string_value(json_object_get(w, "id")), "learner-0")) continue;
        json_t *ls = json_object_get(w, "security");      /* rank 0's servers: the intruder's and (at the
                                                            collective) the rollout's key refused, the verifier key's
                                                            weight request dropped */
        assert_true(geti(ls, "handshakes_refused") >= 2 && geti(ls, "messages_refused") >= 1);
    }
    json_decref(st);
    stop_all();
    char log[500], a_path[500];
    snprintf(log, sizeof log, "%s/coordinator.log", net);
    assert_int_equal(count_in(log, "worker rollout-0 registered again"), 1);    /* one registration per reconnect */
    assert_int_equal(count_in(log, "worker verifier-0 registered again"), 1);
    /* the leaked rollout key displaced nobody and was seen: no learner rank re-registered, nothing rolled back */
    assert_int_equal(count_in(log, "worker learner-0 registered again"), 0);
    assert_int_equal(count_in(log, "rolled back"), 0);
    assert_true(count_in(log, "on a connection no worker registered on") >= 1);
    assert_int_equal(count_in(log, "its CURVE key, authorized_keys/rollout-1.pub, is a rollout.s: it cannot register as a learner"), 1);
    assert_int_equal(count_in(log, "worker id .rollout-0. does not match its CURVE key"), 1);
    assert_int_equal(count_in(log, "authorized_keys/gpu-node-3.pub, is not named for a role"), 1);
    /* the unknown key: refused at both servers, logged once each with its fingerprint and the intruder's address */
    char ipub[41], fp[17], err[ERR_LEN], what[160];
    snprintf(a_path, sizeof a_path, "%s/intruder.pub", keys);
    assert_int_equal(curve_key_read(a_path, false, "intruder", ipub, err), 0);
    curve_fingerprint(ipub, fp);
    snprintf(what, sizeof what, "refused a client from %s.* with key %s", addr[N_X], fp);
    assert_int_equal(count_in(log, what), 1);
    snprintf(log, sizeof log, "%s/learner-0.log", net);
    assert_int_equal(count_in(log, what), 1);
    assert_int_equal(count_in(log, "weights: refused a request from .* with key verifier-0"), 1);
    /* the rollout key at the collective: refused at the handshake (the learners' ZAP domain), logged once */
    assert_int_equal(count_in(log, "with key .*: not a learner key, and the learners. collective takes only learner keys"), 1);
    char a[600], b[600], cmd[1300], out[16];
    snprintf(a, sizeof a, "%s/ckpt/global_step_%d/actor/huggingface/model.safetensors", ref, STEPS);
    snprintf(b, sizeof b, "%s/ckpt/global_step_%d/actor/huggingface/model.safetensors", net, STEPS);
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s' && echo same", a, b);
    if (tu_run(cmd, out, sizeof out) != 0 || strncmp(out, "same", 4))
        fail_msg("the weights across hosts differ from the loopback run's: %s vs %s", b, a);
    net_down();
}

static int teardown(void **state) {
    (void)state;
    stop_all();
    if (hub[0]) net_down();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_multihost, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
