/* common/collective/collective.h: collectives between the W learner ranks (docs/design.md §1, §3): sum all-reduce,
 * sum reduce-scatter and all-gather of fp32 buffers (data parallelism; the sharded learner of issue 39), broadcast from
 * rank 0, barrier. One small interface, two backends behind a const vtable (docs/conventions.md rule 6):
 *   cpu  (collective_cpu.c + collective_ring.c, always built): ZeroMQ over TCP/IPC. Rank 0 binds a ROUTER at
 *        `endpoint` (the star: join, membership, broadcast); every rank also binds a ring socket (its address derived
 *        from `endpoint`, sent in the join) that its predecessor rank - 1 sends into. Reduce-scatter, all-gather and
 *        all-reduce run as rings (the bandwidth-optimal algorithm: each rank sends and receives (W-1)/W n floats per
 *        reduce-scatter or all-gather, 2 (W-1)/W n per all-reduce, pipelined in 1 MiB frames). Fixed reduction order:
 *        chunk k of the W chunks is summed in the order of ranks k+1, k+2, ..., W-1, 0, ..., k (fp32), so every rank
 *        gets the same bits, and every run, whatever the arrival order.
 *   nccl (collective_nccl.c, only in CUDA builds, USE_CUDA): ncclAllReduce / ncclReduceScatter / ncclAllGather /
 *        ncclBroadcast on DEVICE buffers (host buffers are staged). The ncclUniqueId is made by rank 0 and passed to
 *        the others through a CPU collective (the side channel), the communicator is non-blocking and every wait polls
 *        ncclCommGetAsyncError against the deadline, so a hung peer is aborted (ncclCommAbort) with an error instead
 *        of hanging.
 * Every wait has a deadline (timeout_s): a dead or hung peer makes the call fail with ERR_TIMEOUT and a message
 * that names the rank and the operation; the collective is then unusable (ERR_CLOSED) and the learner must be
 * restarted (the run resumes from its last checkpoint, docs/design.md §7). The group is all or nothing (issue 31): once a
 * rank's connection to a joined peer closes (the peer died, restarted, or stayed silent for timeout_s), the CPU
 * backend's call under way fails at once with ERR_CLOSED naming that rank, and coll_poll tells an idle caller, which
 * starts again and joins whichever rank 0 is up: the ranks re-form whatever order they restart in. Rank 0 watches
 * every other rank; a rank r > 0 watches rank 0 only (it learns of another rank's death when rank 0 goes). The NCCL
 * backend checks its side channel in coll_poll only (an NCCL operation with a dead peer ends at its deadline).
 * With CURVE every rank's ring socket is a CURVE server: every learner rank needs the server key pair and
 * authorized_keys (and a ZAP handler on its context, net/zap.h), and only learner keys take part.
 * Not here: averaging (callers scale), other reductions than the sum, tree algorithms. */
#ifndef DAPO_COLLECTIVE_H
#define DAPO_COLLECTIVE_H

#include <stddef.h>

#include "core/err.h"

/* Called about every 50 ms while a collective waits (e.g. to send heartbeats to the coordinator). Returns 0 to
 * keep waiting, or a negative code to give up (the collective fails with that code). */
typedef int (*CollIdleFn)(void *ud);

typedef struct {
    int         rank, world;      /* 0 <= rank < world */
    const char *endpoint;         /* cpu: rank 0 binds it, the others connect ("tcp://127.0.0.1:5557", "ipc://...") */
    double      timeout_s;        /* longest wait for a peer in one operation (and for everyone to join at open) */
    void       *zctx;             /* ZeroMQ context to use; NULL: the collective makes its own */
    CollIdleFn  idle;             /* optional */
    void       *idle_ud;
    /* CURVE (issue 18; Z85 key text, 40 characters, borrowed for the call; NULL or "": plaintext). Rank 0 is the
     * server (its context must run a ZAP handler, net/zap.h): curve_server_secret. The others are clients:
     * curve_server_public and their own curve_public / curve_secret. */
    const char *curve_server_secret, *curve_server_public, *curve_public, *curve_secret;
} CollOptions;

typedef struct Collective Collective;

/* Opens the CPU backend into *out and waits (up to timeout_s) until all W ranks are connected. world == 1 needs no
 * socket. Returns 0, or with *out NULL and a message: ERR_INVAL bad options, ERR_IO socket errors, ERR_TIMEOUT ranks
 * missing (named: a peer that is not up yet, which a later try may find), ERR_NOMEM. */
int coll_open_cpu(const CollOptions *o, Collective **out, char err[ERR_LEN]);

/* Opens the NCCL backend into *out (CUDA builds): bootstraps through a CPU collective on o->endpoint (kept open for
 * coll_poll), then ncclCommInitRank on the current CUDA device. Errors as coll_open_cpu, and ERR_UNSUPPORTED without
 * USE_CUDA. */
int coll_open_nccl(const CollOptions *o, Collective **out, char err[ERR_LEN]);

/* In place: buf[i] = sum over ranks of buf[i] (fp32, in the fixed order above). buf: n floats, host memory (cpu)
 * or device memory (nccl). Every rank must call with the same n. 0, ERR_TIMEOUT (peer dead or hung: err names it),
 * ERR_INVAL (n mismatch between ranks, bad arguments), ERR_CLOSED (an earlier failure), ERR_IO. */
int coll_allreduce_sum(Collective *c, float *buf, long n, char err[ERR_LEN]);

/* In place, sharded: buf holds W x shard floats (every rank the same shard >= 0); on return this rank's region
 * buf[rank * shard .. (rank + 1) * shard) holds the sum over ranks of that region (the order above: ranks rank+1,
 * ..., rank); the rest of buf is scratch (its contents unspecified). FSDP's gradient reduce-scatter (callers pad to a
 * multiple of W). Errors as coll_allreduce_sum. */
int coll_reduce_scatter_sum(Collective *c, float *buf, long shard, char err[ERR_LEN]);

/* In place: buf holds W x shard floats and this rank's region buf[rank * shard ..) is its contribution; on return
 * every region r holds rank r's. FSDP's parameter all-gather. Errors as coll_allreduce_sum. */
int coll_allgather(Collective *c, float *buf, long shard, char err[ERR_LEN]);

/* In place: every rank receives rank 0's `bytes` bytes. Errors as coll_allreduce_sum. */
int coll_broadcast(Collective *c, void *buf, size_t bytes, char err[ERR_LEN]);

/* Returns when every rank has called it. Errors as coll_allreduce_sum. */
int coll_barrier(Collective *c, char err[ERR_LEN]);

/* Never blocks: 0 while every peer this rank joined is still connected; ERR_CLOSED with err naming the lost rank
 * once one is gone (or after an earlier failed operation): the collective is unusable from then on, and the caller
 * must start again (the learner exits with status 75 and rejoins from the newest checkpoint). Call it while idle
 * between collectives; world 1 and backends without a membership check always give 0. */
int coll_poll(Collective *c, char err[ERR_LEN]);

int         coll_rank(const Collective *c);
int         coll_world(const Collective *c);
const char *coll_backend_name(const Collective *c);   /* "cpu" | "nccl" */
/* What this rank's sockets refused since open (issue 38; cpu: its star and ring servers; 0 for backends without):
 * frames dropped from keys that are not learners' or from a connection not its ring predecessor's, and handshakes
 * that failed (a plaintext client, a key not allowed, a peer that hung up). NULL-safe (zeros). */
void        coll_security(const Collective *c, unsigned long long *frames_refused, unsigned long long *handshakes_failed);
/* Seconds spent inside collective calls since open (communication share for benchmarks and metrics). */
double      coll_seconds(const Collective *c);

void coll_close(Collective *c);   /* NULL-safe */

/* ---- backend interface (for collective_*.c only) ---- */
typedef struct {
    const char *name;
    int  (*allreduce_sum)(void *impl, float *buf, long n, char err[ERR_LEN]);
    int  (*reduce_scatter_sum)(void *impl, float *buf, long shard, char err[ERR_LEN]);
    int  (*allgather)(void *impl, float *buf, long shard, char err[ERR_LEN]);
    int  (*broadcast)(void *impl, void *buf, size_t bytes, char err[ERR_LEN]);
    int  (*poll)(void *impl, char err[ERR_LEN]);                 /* NULL: nothing to check (coll_poll gives 0) */
    void (*security)(void *impl, unsigned long long *refused, unsigned long long *failed);   /* NULL: zeros */
    void (*close)(void *impl);
} CollBackend;

struct Collective {
    const CollBackend *be;
    void              *impl;
    int                rank, world;
    int                broken;     /* an operation failed: later calls return ERR_CLOSED */
    double             seconds;
};

#endif
