/* common/collective/collective.c: the backend-independent part of collective.h: dispatch through the backend
 * vtable, the "broken after a failure" rule (a lost peer seen by coll_poll too), time accounting, and barrier (a
 * one-float all-reduce).
 * Not here: the transports (collective_cpu.c, collective_nccl.c). */
#include "collective/collective.h"

#include "core/clock.h"

static int broken(const Collective *c, char err[ERR_LEN]) {
    return err_set(err, ERR_CLOSED, "collective (%s, rank %d of %d) is unusable after an earlier failure; restart "
                   "the learner ranks and resume from the last checkpoint", c->be->name, c->rank, c->world);
}

int coll_allreduce_sum(Collective *c, float *buf, long n, char err[ERR_LEN]) {
    if (!c || (!buf && n > 0) || n < 0) return err_set(err, ERR_INVAL, "coll_allreduce_sum: bad arguments");
    if (c->broken) return broken(c, err);
    if (c->world == 1 || n == 0) return 0;
    double t0 = clock_s();
    int rc = c->be->allreduce_sum(c->impl, buf, n, err);
    c->seconds += clock_s() - t0;
    if (rc) c->broken = 1;
    return rc;
}

/* reduce-scatter and all-gather: the same checks and accounting as the all-reduce, on W x shard floats */
typedef int (*ShardOp)(void *impl, float *buf, long shard, char err[ERR_LEN]);
static int sharded(Collective *c, ShardOp op, const char *what, float *buf, long shard, char err[ERR_LEN]) {
    if (!c || (!buf && shard > 0) || shard < 0) return err_set(err, ERR_INVAL, "%s: bad arguments", what);
    if (c->broken) return broken(c, err);
    if (c->world == 1 || shard == 0) return 0;
    double t0 = clock_s();
    int rc = op(c->impl, buf, shard, err);
    c->seconds += clock_s() - t0;
    if (rc) c->broken = 1;
    return rc;
}

int coll_reduce_scatter_sum(Collective *c, float *buf, long shard, char err[ERR_LEN]) {
    return sharded(c, c ? c->be->reduce_scatter_sum : NULL, "coll_reduce_scatter_sum", buf, shard, err);
}

int coll_allgather(Collective *c, float *buf, long shard, char err[ERR_LEN]) {
    return sharded(c, c ? c->be->allgather : NULL, "coll_allgather", buf, shard, err);
}

int coll_broadcast(Collective *c, void *buf, size_t bytes, char err[ERR_LEN]) {
    if (!c || (!buf && bytes > 0)) return err_set(err, ERR_INVAL, "coll_broadcast: bad arguments");
    if (c->broken) return broken(c, err);
    if (c->world == 1 || bytes == 0) return 0;
    double t0 = clock_s();
    int rc = c->be->broadcast(c->impl, buf, bytes, err);
    c->seconds += clock_s() - t0;
    if (rc) c->broken = 1;
    return rc;
}

int coll_barrier(Collective *c, char err[ERR_LEN]) {
    float one = 1.0f;
    return coll_allreduce_sum(c, &one, 1, err);
}

int coll_poll(Collective *c, char err[ERR_LEN]) {
    if (!c || c->world == 1) return 0;
    if (c->broken) return broken(c, err);
    int rc = c->be->poll ? c->be->poll(c->impl, err) : 0;
    if (rc) c->broken = 1;
    return rc;
}

int coll_rank(const Collective *c) { return c ? c->rank : 0; }
int coll_world(const Collective *c) { return c ? c->world : 1; }
const char *coll_backend_name(const Collective *c) { return c ? c->be->name : "none"; }
double coll_seconds(const Collective *c) { return c ? c->seconds : 0; }

void coll_security(const Collective *c, unsigned long long *frames_refused, unsigned long long *handshakes_failed) {
    *frames_refused = *handshakes_failed = 0;
    if (c && c->be->security) c->be->security(c->impl, frames_refused, handshakes_failed);
}

void coll_close(Collective *c) {
    if (!c) return;
    if (c->be && c->be->close) c->be->close(c->impl);
    xfree(c);
}
