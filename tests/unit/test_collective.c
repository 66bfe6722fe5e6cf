/* tests/unit/test_collective.c: the CPU collective (common/collective/collective.h) with ranks as threads on loopback:
 * ring sums in the documented chunk order (exact expected bits) for all-reduce, reduce-scatter and all-gather at W = 2,
 * 3 and 4 (in one frame and in many: DAPO_COLL_SEG_FLOATS), broadcast, barrier, world 1, and the failure paths — a rank that never
 * joins, a peer that stops calling (hung) or is gone (dead), mismatched sizes — each a clear error within the timeout,
 * never a hang, and the collective unusable afterwards (ERR_CLOSED); and the restarts of issue 17 — a join whose first
 * HELLO was lost with an exiting rank 0, a stale frame from before a restart, a restarted rank mid-collective; and the
 * restart orders of issue 31 (ranks as learner-like members: a member that is killed comes back after a delay, one
 * whose coll_poll reports a lost peer starts again at once; every order re-forms the group and sums right). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>
#include <zmq.h>

#include "collective/collective.h"
#include "core/clock.h"
#include "tests/testutil.h"

#define N 100003

typedef struct {
    int rank, world, mode;     /* mode 0 normal, 1 join then hang, 2 join then leave, 3 wrong size */
    char endpoint[64];
    double timeout;
    int rc, rc2, rc_bcast;
    float *buf;
    double bc;
    char err[ERR_LEN], err2[ERR_LEN];
    double took;
} Arg;

static void *rank_main(void *p) {
    Arg *a = p;
    CollOptions o = {.rank = a->rank, .world = a->world, .endpoint = a->endpoint, .timeout_s = a->timeout};
    Collective *c = NULL;
    if (coll_open_cpu(&o, &c, a->err)) { a->rc = -99; return NULL; }
    a->buf = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) a->buf[i] = (float)(a->rank + 1) * 0.1f + (float)i * 1e-3f;
    if (a->mode == 1) { usleep((useconds_t)(a->timeout * 2.5e6)); coll_close(c); return NULL; }
    if (a->mode == 2) { coll_close(c); return NULL; }
    double t0 = clock_s();
    a->rc = coll_allreduce_sum(c, a->buf, a->mode == 3 ? N - 1 : N, a->err);
    a->took = clock_s() - t0;
    if (a->rc == 0) {
        a->bc = a->rank == 0 ? 3.25 : 0;
        a->rc_bcast = coll_broadcast(c, &a->bc, sizeof a->bc, a->err2);
        if (!a->rc_bcast) a->rc_bcast = coll_barrier(c, a->err2);
    } else {
        a->rc2 = coll_allreduce_sum(c, a->buf, N, a->err2);
    }
    coll_close(c);
    return NULL;
}

static void run(Arg *a, int world, const int *modes, double timeout) {
    int port = tu_free_port();
    pthread_t th[8];
    for (int r = 0; r < world; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].rank = r;
        a[r].world = world;
        a[r].mode = modes ? modes[r] : 0;
        a[r].timeout = timeout;
        snprintf(a[r].endpoint, sizeof a[r].endpoint, "tcp://127.0.0.1:%d", port);
        pthread_create(&th[r], NULL, rank_main, &a[r]);
    }
    for (int r = 0; r < world; r++) pthread_join(th[r], NULL);
}

static void test_sum_broadcast_barrier(void **state) {
    (void)state;
    Arg a[3];
    run(a, 3, NULL, 10);
    for (int r = 0; r < 3; r++) {
        if (a[r].rc || a[r].rc_bcast)
            fail_msg("rank %d: %s / %s (rank 0: %s, rank 1: %s, rank 2: %s)", r, a[r].err, a[r].err2, a[0].err,
                     a[1].err, a[2].err);
        assert_true(a[r].bc == 3.25);
    }
    for (int i = 0; i < N; i++) {
        float x[3] = {0.1f + (float)i * 1e-3f, 0.2f + (float)i * 1e-3f, 0.3f + (float)i * 1e-3f};
        int k = 0;
        while ((long long)N * (k + 1) / 3 <= i) k++;                  /* chunk k of 3 */
        float want = (x[(k + 1) % 3] + x[(k + 2) % 3]) + x[k];        /* ring order: ranks k+1, k+2, k (fp32) */
        for (int r = 0; r < 3; r++)
            if (a[r].buf[i] != want) fail_msg("rank %d [%d]: %.9g != %.9g", r, i, a[r].buf[i], want);
    }
    for (int r = 0; r < 3; r++) free(a[r].buf);
}

/* ---- reduce-scatter, all-gather and all-reduce on the ring: exact bits in the documented order ---- */
#define SHARD 30011                    /* floats per rank's shard (odd: segments do not divide it) */
typedef struct {
    int rank, world, rc;
    char endpoint[64], err[ERR_LEN];
    float *rs, *ag, *ar, small[3];
} RingArg;

static float val(int rank, long i) { return (float)(rank + 1) * 0.37f + (float)(i % 1009) * 1.3e-3f + (float)i * 1e-7f; }

static void *ring_main(void *p) {
    RingArg *a = p;
    CollOptions o = {.rank = a->rank, .world = a->world, .endpoint = a->endpoint, .timeout_s = 20};
    Collective *c = NULL;
    if ((a->rc = coll_open_cpu(&o, &c, a->err))) return NULL;
    long n = (long)SHARD * a->world;
    a->rs = malloc((size_t)n * sizeof(float));
    a->ag = calloc((size_t)n, sizeof(float));
    a->ar = malloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; i++) a->rs[i] = a->ar[i] = val(a->rank, i);
    for (long i = 0; i < SHARD; i++) a->ag[(long)a->rank * SHARD + i] = val(a->rank, i) * 2;
    for (int i = 0; i < 3; i++) a->small[i] = (float)(a->rank + 1) * (float)(i + 1);   /* n = 3 < W = 4: empty chunks */
    a->rc = coll_reduce_scatter_sum(c, a->rs, SHARD, a->err);
    if (!a->rc) a->rc = coll_allgather(c, a->ag, SHARD, a->err);
    if (!a->rc) a->rc = coll_allreduce_sum(c, a->ar, n - 7, a->err);    /* uneven chunks */
    if (!a->rc) a->rc = coll_allreduce_sum(c, a->small, 3, a->err);
    if (!a->rc) a->rc = coll_allreduce_sum(c, a->small, 0, a->err);
    coll_close(c);
    return NULL;
}

/* Sum of val(., i) over the ranks in the ring order of chunk k: k+1, k+2, ..., k (mod W). */
static float ring_sum(int W, int k, long i) {
    float s = val((k + 1) % W, i);
    for (int j = 2; j <= W; j++) s += val((k + j) % W, i);
    return s;
}

static void ring_check(int W) {
    RingArg a[4];
    pthread_t th[4];
    int port = tu_free_port();
    for (int r = 0; r < W; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].rank = r;
        a[r].world = W;
        snprintf(a[r].endpoint, sizeof a[r].endpoint, "tcp://127.0.0.1:%d", port);
        pthread_create(&th[r], NULL, ring_main, &a[r]);
    }
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    long n = (long)SHARD * W, m = n - 7;
    for (int r = 0; r < W; r++) {
        if (a[r].rc) fail_msg("W %d rank %d: %s", W, r, a[r].err);
        for (long i = 0; i < SHARD; i++) {               /* reduce-scatter: this rank's region, chunk r's order */
            long g = (long)r * SHARD + i;
            if (a[r].rs[g] != ring_sum(W, r, g)) fail_msg("W %d rank %d rs[%ld] %.9g != %.9g", W, r, g, a[r].rs[g], ring_sum(W, r, g));
        }
        for (long g = 0; g < n; g++)                      /* all-gather: every region, bit for bit */
            if (a[r].ag[g] != val((int)(g / SHARD), g % SHARD) * 2) fail_msg("W %d rank %d ag[%ld]", W, r, g);
        for (long g = 0, k = 0; g < m; g++) {             /* all-reduce of m floats: chunk k = [m k / W, m (k+1) / W) */
            while ((long long)m * (k + 1) / W <= g) k++;
            if (a[r].ar[g] != ring_sum(W, (int)k, g)) fail_msg("W %d rank %d ar[%ld] %.9g != %.9g", W, r, g, a[r].ar[g], ring_sum(W, (int)k, g));
        }
        for (long g = m; g < n; g++) assert_true(a[r].ar[g] == val(r, g));   /* beyond n: untouched */
        for (int i = 0; i < 3; i++) assert_true(a[r].small[i] == (float)(W * (W + 1) / 2) * (float)(i + 1));
        free(a[r].rs);
        free(a[r].ag);
        free(a[r].ar);
    }
}

static void test_ring_collectives(void **state) {
    (void)state;
    for (int W = 2; W <= 4; W++) ring_check(W);
    setenv("DAPO_COLL_SEG_FLOATS", "1000", 1);          /* many frames per chunk: the pipelined forwarding */
    for (int W = 2; W <= 4; W++) ring_check(W);
    unsetenv("DAPO_COLL_SEG_FLOATS");
}

static void test_world_one(void **state) {
    (void)state;
    char err[ERR_LEN];
    CollOptions o = {.rank = 0, .world = 1, .timeout_s = 1};
    Collective *c = NULL;
    assert_int_equal(coll_open_cpu(&o, &c, err), 0);
    assert_non_null(c);
    float x[2] = {1.5f, -2};
    assert_int_equal(coll_allreduce_sum(c, x, 2, err), 0);
    assert_true(x[0] == 1.5f && x[1] == -2);
    assert_int_equal(coll_barrier(c, err), 0);
    assert_string_equal(coll_backend_name(c), "cpu");
    coll_close(c);
    o.world = 0;
    assert_int_equal(coll_open_cpu(&o, &c, err), ERR_INVAL);
    assert_null(c);
    assert_non_null(strstr(err, "bad options"));
}

static void test_missing_rank_at_join(void **state) {
    (void)state;
    char err[ERR_LEN], ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", tu_free_port());
    CollOptions o = {.rank = 0, .world = 3, .endpoint = ep, .timeout_s = 0.5};
    double t0 = clock_s();
    Collective *c = NULL;
    assert_int_equal(coll_open_cpu(&o, &c, err), ERR_TIMEOUT);
    assert_null(c);
    assert_true(clock_s() - t0 < 3);
    assert_non_null(strstr(err, "rank 1, rank 2"));
    assert_non_null(strstr(err, "dead or hung"));
}

static void test_hung_peer(void **state) {
    (void)state;
    Arg a[2];
    int modes[2] = {0, 1};                                   /* rank 1 joins, then never calls */
    run(a, 2, modes, 0.5);
    assert_int_equal(a[0].rc, ERR_TIMEOUT);
    assert_true(a[0].took < 2);
    assert_non_null(strstr(a[0].err, "nothing from rank 1"));
    assert_int_equal(a[0].rc2, ERR_CLOSED);                  /* unusable afterwards */
    assert_non_null(strstr(a[0].err2, "restart"));
    for (int r = 0; r < 2; r++) free(a[r].buf);
}

/* Rank 0 joins and leaves while rank 1 is in an all-reduce: rank 1 sees the connection close and fails at once
 * (issue 31), not after the timeout. */
static void test_dead_rank0(void **state) {
    (void)state;
    Arg a[2];
    int modes[2] = {2, 0};
    run(a, 2, modes, 5);
    assert_int_equal(a[1].rc, ERR_CLOSED);
    assert_true(a[1].took < 2.5);
    assert_non_null(strstr(a[1].err, "the connection to rank 0 closed"));
    assert_int_equal(a[1].rc2, ERR_CLOSED);                  /* unusable afterwards */
    for (int r = 0; r < 2; r++) free(a[r].buf);
}

static void test_size_mismatch(void **state) {
    (void)state;
    Arg a[2];
    int modes[2] = {0, 3};
    run(a, 2, modes, 2);
    /* the ring's chunk 0 is 50001 floats either way; chunk 1 (50002 on rank 0, 50001 on rank 1) is what rank 1 checks */
    assert_int_equal(a[1].rc, ERR_INVAL);
    assert_non_null(strstr(a[1].err, "same size"));
    assert_int_not_equal(a[0].rc, 0);                        /* rank 0 times out waiting for the rest */
    for (int r = 0; r < 2; r++) free(a[r].buf);
}

/* One raw wire frame (collective_cpu.h's format: magic "DCOL", version 3, op, rank, seq, payload bytes) + payload. */
static void send_raw(void *sock, uint32_t op, uint32_t rank, uint64_t seq, const void *payload, uint64_t bytes) {
    unsigned char f[64];
    uint32_t h32[4] = {0x4c4f4344u, 3, op, rank};
    memcpy(f, h32, 16);
    memcpy(f + 16, &seq, 8);
    memcpy(f + 24, &bytes, 8);
    if (bytes) memcpy(f + 32, payload, bytes);
    assert_int_equal(zmq_send(sock, f, 32 + bytes, 0), (int)(32 + bytes));
}

static void init_arg(Arg *a, int rank, int world, int port, double timeout) {
    memset(a, 0, sizeof *a);
    a->rank = rank;
    a->world = world;
    a->timeout = timeout;
    snprintf(a->endpoint, sizeof a->endpoint, "tcp://127.0.0.1:%d", port);
}

/* Issue 17: rank 1 (restarted by its supervisor) sends its HELLO to a rank 0 that reads it and exits (the old
 * process), and a leftover all-reduce frame of a rank 1 from before the restart is still on the way: the next rank 0
 * still joins (rank 1 sends HELLO again, the stale frame is dropped) and the sums are right. */
static void test_join_survives_restarts(void **state) {
    (void)state;
    int port = tu_free_port();
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    void *zctx = zmq_ctx_new();
    void *old0 = zmq_socket(zctx, ZMQ_ROUTER);
    assert_int_equal(zmq_bind(old0, ep), 0);
    Arg a[2];
    pthread_t th[2];
    init_arg(&a[1], 1, 2, port, 5);
    pthread_create(&th[1], NULL, rank_main, &a[1]);
    zmq_pollitem_t it = {old0, 0, ZMQ_POLLIN, 0};
    assert_int_equal(zmq_poll(&it, 1, 3000), 1);                     /* the old rank 0 swallows rank 1's HELLO */
    char buf[256];
    assert_true(zmq_recv(old0, buf, sizeof buf, 0) > 0);             /* routing id */
    assert_int_equal(zmq_recv(old0, buf, sizeof buf, 0), 32 + 8 + 256);   /* HELLO: nonce, ring endpoint */
    int zero = 0;
    zmq_setsockopt(old0, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(old0);
    void *stale = zmq_socket(zctx, ZMQ_DEALER);                      /* a rank 1 of before, mid all-reduce */
    zmq_setsockopt(stale, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(stale, ep), 0);
    float junk[4] = {99, 99, 99, 99};
    send_raw(stale, 3 /* all-reduce */, 1, 7, junk, sizeof junk);
    usleep(200000);
    init_arg(&a[0], 0, 2, port, 5);
    pthread_create(&th[0], NULL, rank_main, &a[0]);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    zmq_close(stale);
    zmq_ctx_term(zctx);
    for (int r = 0; r < 2; r++) {
        if (a[r].rc) fail_msg("rank %d: %s", r, a[r].err);
        assert_int_equal(a[r].rc_bcast, 0);
    }
    for (int i = 0; i < N; i += 997) {
        float want = (0.1f + (float)i * 1e-3f) + (0.2f + (float)i * 1e-3f);   /* two terms: either order, same bits */
        assert_true(a[0].buf[i] == want && a[1].buf[i] == want);
    }
    for (int r = 0; r < 2; r++) free(a[r].buf);
}

/* A rank that restarted while the others are mid-collective says HELLO with a new nonce: rank 0 reports it out of
 * step at once (the coordinator then rolls the run back) instead of waiting out the timeout. */
static void test_restarted_rank_out_of_step(void **state) {
    (void)state;
    int port = tu_free_port();
    Arg a[2];
    pthread_t th[2];
    init_arg(&a[0], 0, 2, port, 10);
    init_arg(&a[1], 1, 2, port, 10);
    a[1].mode = 1;                                                   /* joins, then never calls (killed, say) */
    a[1].timeout = 1.2;
    for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, rank_main, &a[r]);
    usleep(300000);                                                  /* joined; rank 0 waits in all-reduce #1 */
    void *zctx = zmq_ctx_new();
    void *fresh = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(fresh, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(fresh, ZMQ_ROUTING_ID, "coll-rank-1", 11);
    assert_int_equal(zmq_connect(fresh, a[0].endpoint), 0);
    uint64_t nonce = 0x1234567;
    send_raw(fresh, 1 /* hello */, 1, 0, &nonce, sizeof nonce);
    pthread_join(th[0], NULL);
    assert_int_equal(a[0].rc, ERR_INVAL);
    assert_true(a[0].took < 5);
    assert_non_null(strstr(a[0].err, "out of step: it sent hello #0"));
    pthread_join(th[1], NULL);
    zmq_close(fresh);
    zmq_ctx_term(zctx);
    for (int r = 0; r < 2; r++) free(a[r].buf);
}

/* ---- restart orders (issue 31). A member is a learner in miniature: it joins (coll_open_cpu, retried like a
 * supervisor restarts a learner whose join timed out), then idles calling coll_poll every 20 ms as the learner's idle
 * loop does and starts again at once when a peer is lost; a kill closes its collective and starts it again after
 * its delay. When the driver asks, every member all-reduces one round. */
typedef struct {
    int rank, port;
    pthread_mutex_t mu;
    int kill, stop;            /* requests: kill (close, then come back after delay_s), stop for good */
    double delay_s;
    int reduce_gen;            /* the driver's round; the member answers with done_gen (success) or fail_gen */
    int up, done_gen, fail_gen, joins;
    float sum;
    char err[ERR_LEN];
} Member;

static int member_get(Member *m, int *field, int clear) {
    pthread_mutex_lock(&m->mu);
    int v = *field;
    if (clear) *field = 0;
    pthread_mutex_unlock(&m->mu);
    return v;
}

/* One life of a member: idles until killed, stopped or its group is lost; answers the driver's rounds. 1 when it
 * was killed (it stays down delay_s), 0 otherwise. */
static int member_life(Member *m, Collective *c) {
    for (;;) {
        char err[ERR_LEN];
        if (member_get(m, &m->stop, 0)) return 0;
        if (member_get(m, &m->kill, 1)) return 1;
        if (coll_poll(c, err)) return 0;                              /* a learner exits 75 and starts again */
        pthread_mutex_lock(&m->mu);
        int want = m->reduce_gen, last = m->done_gen > m->fail_gen ? m->done_gen : m->fail_gen;
        pthread_mutex_unlock(&m->mu);
        if (want > last) {                    /* x[0]: the round both are in (a member restarted alone may lag) */
            float x[2] = {(float)want, (float)(m->rank + 1)};
            int rc = coll_allreduce_sum(c, x, 2, err);
            if (!rc && x[0] != 2.0f * (float)want)
                rc = err_set(err, ERR_INVAL, "round %d: the other member was in round %g", want, x[0] - want);
            pthread_mutex_lock(&m->mu);
            if (rc) m->fail_gen = want;
            else m->done_gen = want;
            m->sum = x[1];
            if (rc) snprintf(m->err, sizeof m->err, "%s", err);
            pthread_mutex_unlock(&m->mu);
            if (rc) return 0;                 /* a learner whose step failed: the coordinator restarts it */
        }
        usleep(20000);
    }
}

static void *member_main(void *p) {
    Member *m = p;
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", m->port);
    while (!member_get(m, &m->stop, 0)) {
        CollOptions o = {.rank = m->rank, .world = 2, .endpoint = ep, .timeout_s = 3};
        char err[ERR_LEN];
        Collective *c = NULL;
        if (coll_open_cpu(&o, &c, err)) {                             /* the join timed out: restarted */
            pthread_mutex_lock(&m->mu);
            snprintf(m->err, sizeof m->err, "%s", err);
            pthread_mutex_unlock(&m->mu);
            usleep(100000);
            continue;
        }
        pthread_mutex_lock(&m->mu);
        m->up = 1;
        m->joins++;
        pthread_mutex_unlock(&m->mu);
        int killed = member_life(m, c);
        pthread_mutex_lock(&m->mu);
        m->up = 0;
        pthread_mutex_unlock(&m->mu);
        coll_close(c);                                                /* like kill -9: the connections close */
        if (killed) usleep((useconds_t)(m->delay_s * 1e6));
    }
    return NULL;
}

/* Rounds of one all-reduce until both members answer one right (a round that failed on either is asked again as
 * the next round) within `ms`. 1 on success. */
static int members_reduce(Member *m, int *gen, int ms) {
    int64_t end = clock_ms() + ms;
    int g = ++*gen;
    for (int r = 0; r < 2; r++) { pthread_mutex_lock(&m[r].mu); m[r].reduce_gen = g; pthread_mutex_unlock(&m[r].mu); }
    while (clock_ms() < end) {
        int ok = 1, failed = 0;
        for (int r = 0; r < 2; r++) {
            pthread_mutex_lock(&m[r].mu);
            ok &= m[r].done_gen == g && m[r].sum == 3.0f;
            failed |= m[r].fail_gen == g;
            pthread_mutex_unlock(&m[r].mu);
        }
        if (ok) return 1;
        if (failed) {
            g = ++*gen;
            for (int r = 0; r < 2; r++) {
                pthread_mutex_lock(&m[r].mu);
                m[r].reduce_gen = g;
                pthread_mutex_unlock(&m[r].mu);
            }
        }
        usleep(20000);
    }
    return 0;
}

/* kills[k]: the rank killed k-th (100 ms apart), -1 ends; delay[r]: how long a killed rank r stays down. */
static void restart_order(const int *kills, const double *delay, const char *what) {
    Member m[2];
    pthread_t th[2];
    int port = tu_free_port();
    memset(m, 0, sizeof m);
    for (int r = 0; r < 2; r++) {
        m[r].rank = r;
        m[r].port = port;
        m[r].delay_s = delay[r];
        pthread_mutex_init(&m[r].mu, NULL);
        pthread_create(&th[r], NULL, member_main, &m[r]);
    }
    int gen = 0;
    if (!members_reduce(m, &gen, 10000)) fail_msg("%s: the first group never formed", what);
    double t0 = clock_s();
    for (int k = 0; kills[k] >= 0; k++) {
        if (k) usleep(100000);
        pthread_mutex_lock(&m[kills[k]].mu);
        m[kills[k]].kill = 1;
        pthread_mutex_unlock(&m[kills[k]].mu);
    }
    usleep(50000);
    /* the group re-forms: within the longest delay + a few seconds (a rank that joined the old rank 0 notices) */
    if (!members_reduce(m, &gen, 8000))
        fail_msg("%s: no group within 8 s of the kills (rank 0: up %d, joins %d, %s; rank 1: up %d, joins %d, %s)", what,
                 m[0].up, m[0].joins, m[0].err, m[1].up, m[1].joins, m[1].err);
    printf("restart order %s: group re-formed in %.2f s (joins: rank 0 %d, rank 1 %d)\n", what, clock_s() - t0,
           m[0].joins, m[1].joins);
    for (int r = 0; r < 2; r++) {
        pthread_mutex_lock(&m[r].mu);
        m[r].stop = 1;
        pthread_mutex_unlock(&m[r].mu);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) pthread_mutex_destroy(&m[r].mu);
}

/* Rank 1 killed, then rank 0: rank 0 back first, rank 1 back first, both within 1 s of each other. */
static void test_restart_rank1_then_rank0(void **state) {
    (void)state;
    const int kills[] = {1, 0, -1};
    restart_order(kills, (double[]){0.0, 1.5}, "rank 1 then rank 0, rank 0 back first");
    restart_order(kills, (double[]){1.5, 0.0}, "rank 1 then rank 0, rank 1 back first");
    restart_order(kills, (double[]){0.3, 0.2}, "rank 1 then rank 0, both back within 1 s");
}

static void test_restart_rank0_then_rank1(void **state) {
    (void)state;
    const int kills[] = {0, 1, -1};
    restart_order(kills, (double[]){0.0, 1.5}, "rank 0 then rank 1, rank 0 back first");
    restart_order(kills, (double[]){1.5, 0.0}, "rank 0 then rank 1, rank 1 back first");
    restart_order(kills, (double[]){0.2, 0.3}, "rank 0 then rank 1, both back within 1 s");
}

/* One rank killed while the other idles joined to it: the survivor sees the loss (coll_poll) and joins the
 * restarted one — the deadlock of issue 31 was a rank 1 that stayed joined to a rank 0 gone for good. */
static void test_restart_one_rank(void **state) {
    (void)state;
    restart_order((const int[]){0, -1}, (double[]){1.0, 0.0}, "rank 0 alone, back after 1 s");
    restart_order((const int[]){1, -1}, (double[]){0.0, 1.0}, "rank 1 alone, back after 1 s");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_broadcast_barrier),
        cmocka_unit_test(test_ring_collectives),
        cmocka_unit_test(test_world_one),
        cmocka_unit_test(test_missing_rank_at_join),
        cmocka_unit_test(test_hung_peer),
        cmocka_unit_test(test_dead_rank0),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_join_survives_restarts),
        cmocka_unit_test(test_restarted_rank_out_of_step),
        cmocka_unit_test(test_restart_rank1_then_rank0),
        cmocka_unit_test(test_restart_rank0_then_rank1),
        cmocka_unit_test(test_restart_one_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
