/* tests/unit/test_collective.c: the CPU collective (common/collective/collective.h) with ranks as threads on loopback:
 * sums in rank order (exact expected bits), broadcast, barrier, world 1, and the failure paths — a rank that never
 * joins, a peer that stops calling (hung) or is gone (dead), mismatched sizes — each a clear error within the timeout,
 * never a hang, and the collective unusable afterwards (ERR_CLOSED). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

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
    Collective *c = coll_open_cpu(&o, a->err);
    if (!c) { a->rc = -99; return NULL; }
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
        assert_int_equal(a[r].rc, 0);
        assert_int_equal(a[r].rc_bcast, 0);
        assert_true(a[r].bc == 3.25);
    }
    for (int i = 0; i < N; i++) {
        float x0 = 0.1f + (float)i * 1e-3f, x1 = 0.2f + (float)i * 1e-3f, x2 = 0.3f + (float)i * 1e-3f;
        float want = (x0 + x1) + x2;                                  /* rank order, fp32 */
        for (int r = 0; r < 3; r++)
            if (a[r].buf[i] != want) fail_msg("rank %d [%d]: %.9g != %.9g", r, i, a[r].buf[i], want);
    }
    for (int r = 0; r < 3; r++) free(a[r].buf);
}

static void test_world_one(void **state) {
    (void)state;
    char err[ERR_LEN];
    CollOptions o = {.rank = 0, .world = 1, .timeout_s = 1};
    Collective *c = coll_open_cpu(&o, err);
    assert_non_null(c);
    float x[2] = {1.5f, -2};
    assert_int_equal(coll_allreduce_sum(c, x, 2, err), 0);
    assert_true(x[0] == 1.5f && x[1] == -2);
    assert_int_equal(coll_barrier(c, err), 0);
    assert_string_equal(coll_backend_name(c), "cpu");
    coll_close(c);
    o.world = 0;
    assert_null(coll_open_cpu(&o, err));
    assert_non_null(strstr(err, "bad options"));
}

static void test_missing_rank_at_join(void **state) {
    (void)state;
    char err[ERR_LEN], ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", tu_free_port());
    CollOptions o = {.rank = 0, .world = 3, .endpoint = ep, .timeout_s = 0.5};
    double t0 = clock_s();
    assert_null(coll_open_cpu(&o, err));
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

static void test_dead_rank0(void **state) {
    (void)state;
    Arg a[2];
    int modes[2] = {2, 0};                                   /* rank 0 joins and leaves: rank 1 waits for it */
    run(a, 2, modes, 0.5);
    assert_int_equal(a[1].rc, ERR_TIMEOUT);
    assert_non_null(strstr(a[1].err, "nothing from rank 0"));
    for (int r = 0; r < 2; r++) free(a[r].buf);
}

static void test_size_mismatch(void **state) {
    (void)state;
    Arg a[2];
    int modes[2] = {0, 3};
    run(a, 2, modes, 2);
    assert_int_equal(a[0].rc, ERR_INVAL);
    assert_non_null(strstr(a[0].err, "same size"));
    assert_int_not_equal(a[1].rc, 0);                        /* rank 1 times out waiting for the result */
    for (int r = 0; r < 2; r++) free(a[r].buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_broadcast_barrier),
        cmocka_unit_test(test_world_one),
        cmocka_unit_test(test_missing_rank_at_join),
        cmocka_unit_test(test_hung_peer),
        cmocka_unit_test(test_dead_rank0),
        cmocka_unit_test(test_size_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
