/* common/collective/collective_nccl.c: the NCCL backend of collective.h (CUDA builds only: USE_CUDA, -lnccl).
 * Bootstrap: rank 0 makes an ncclUniqueId (ncclGetUniqueId) and broadcasts its 128 bytes to the other ranks through a
 * CPU collective on the same endpoint (the side channel); then ncclCommInitRankConfig with blocking = 0 on the current
 * CUDA device. Every operation is enqueued on the backend's own stream and waited for by polling cudaStreamQuery and
 * ncclCommGetAsyncError against the deadline: a dead or hung peer gives ERR_TIMEOUT (the communicator is aborted with
 * ncclCommAbort) instead of a hang. The side channel stays open for membership: coll_poll asks it (a peer's
 * connection closed) and the communicator's async error. Host buffers (e.g. a barrier's one float) are staged through device scratch.
 * Without USE_CUDA only coll_open_nccl exists and returns ERR_UNSUPPORTED.
 * Not here: multi-node bootstrap beyond what the CPU side channel's endpoint reaches, NVLS / user buffer registration. */
#include "collective/collective.h"

#ifndef USE_CUDA

int coll_open_nccl(const CollOptions *o, Collective **out, char err[ERR_LEN]) {
    (void)o;
    if (out) *out = NULL;
    return err_set(err, ERR_UNSUPPORTED, "collective: the nccl backend needs a CUDA build (make CUDA=1)");
}

#else

#include <cuda_runtime.h>
#include <nccl.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

typedef struct {
    ncclComm_t   comm;
    cudaStream_t stream;
    double       timeout_s;
    CollIdleFn   idle;
    void        *idle_ud;
    void        *scratch;        /* device staging for host buffers */
    size_t       scratch_bytes;
    int          aborted;
    int          rank, world;
    Collective  *side;           /* the CPU collective of the bootstrap, kept for coll_poll's membership check */
} NcclColl;

/* Waits for the stream (and the communicator's async state) up to the deadline. */
static int nccl_wait(NcclColl *c, const char *what, char err[ERR_LEN]) {
    int64_t deadline = clock_ms() + (int64_t)(c->timeout_s * 1000);
    for (;;) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &async);
        if (r != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
            ncclCommAbort(c->comm);
            c->aborted = 1;
            return err_set(err, ERR_IO, "nccl %s: %s", what, ncclGetErrorString(r != ncclSuccess ? r : async));
        }
        cudaError_t q = cudaStreamQuery(c->stream);
        if (q == cudaSuccess && async == ncclSuccess) return 0;
        if (q != cudaSuccess && q != cudaErrorNotReady)
            return err_set(err, ERR_IO, "nccl %s: %s", what, cudaGetErrorString(q));
        if (clock_ms() > deadline) {
            ncclCommAbort(c->comm);
            c->aborted = 1;
            return err_set(err, ERR_TIMEOUT, "nccl %s: not finished within %.1f s: a peer rank is dead or hung "
                           "(cluster.collective_timeout_s); restart the learners and resume from the last checkpoint",
                           what, c->timeout_s);
        }
        if (c->idle) {
            int rc = c->idle(c->idle_ud);
            if (rc < 0) return err_set(err, rc, "nccl %s: wait aborted: %s", what, err_str(rc));
        }
        usleep(200);
    }
}

static int is_device_ptr(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) { cudaGetLastError(); return 0; }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static int stage(NcclColl *c, size_t bytes, char err[ERR_LEN]) {
    if (c->scratch_bytes >= bytes) return 0;
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    cudaError_t e = cudaMalloc(&c->scratch, bytes);
    if (e != cudaSuccess) return err_set(err, ERR_NOMEM, "nccl: cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
    c->scratch_bytes = bytes;
    return 0;
}

static int nccl_allreduce(void *impl, float *buf, long n, char err[ERR_LEN]) {
    NcclColl *c = impl;
    size_t bytes = (size_t)n * sizeof(float);
    int dev = is_device_ptr(buf), rc = 0;
    float *d = buf;
    if (!dev) {
        if ((rc = stage(c, bytes, err))) return rc;
        d = c->scratch;
        if (cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, c->stream) != cudaSuccess)
            return err_set(err, ERR_IO, "nccl all-reduce: staging copy failed");
    }
    ncclResult_t r = ncclAllReduce(d, d, (size_t)n, ncclFloat32, ncclSum, c->comm, c->stream);
    if (r != ncclSuccess && r != ncclInProgress) return err_set(err, ERR_IO, "ncclAllReduce: %s", ncclGetErrorString(r));
    if (!dev && cudaMemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, c->stream) != cudaSuccess)
        return err_set(err, ERR_IO, "nccl all-reduce: copy back failed");
    return nccl_wait(c, "all-reduce", err);
}

/* In-place reduce-scatter (recvbuff = sendbuff + rank * shard) or all-gather (sendbuff = recvbuff + rank * shard) of
 * W x shard floats, as NCCL defines in-place for both. */
static int nccl_sharded(void *impl, float *buf, long shard, int gather, char err[ERR_LEN]) {
    NcclColl *c = impl;
    size_t bytes = (size_t)shard * (size_t)c->world * sizeof(float);
    int dev = is_device_ptr(buf), rc = 0;
    float *d = buf;
    const char *what = gather ? "all-gather" : "reduce-scatter";
    if (!dev) {
        if ((rc = stage(c, bytes, err))) return rc;
        d = c->scratch;
        if (cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, c->stream) != cudaSuccess)
            return err_set(err, ERR_IO, "nccl %s: staging copy failed", what);
    }
    float *mine = d + (size_t)c->rank * (size_t)shard;
    ncclResult_t r = gather ? ncclAllGather(mine, d, (size_t)shard, ncclFloat32, c->comm, c->stream)
                            : ncclReduceScatter(d, mine, (size_t)shard, ncclFloat32, ncclSum, c->comm, c->stream);
    if (r != ncclSuccess && r != ncclInProgress)
        return err_set(err, ERR_IO, "%s: %s", gather ? "ncclAllGather" : "ncclReduceScatter", ncclGetErrorString(r));
    if (!dev && cudaMemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, c->stream) != cudaSuccess)
        return err_set(err, ERR_IO, "nccl %s: copy back failed", what);
    return nccl_wait(c, what, err);
}
static int nccl_reduce_scatter(void *impl, float *buf, long shard, char err[ERR_LEN]) {
    return nccl_sharded(impl, buf, shard, 0, err);
}
static int nccl_allgather(void *impl, float *buf, long shard, char err[ERR_LEN]) {
    return nccl_sharded(impl, buf, shard, 1, err);
}

static int nccl_broadcast(void *impl, void *buf, size_t bytes, char err[ERR_LEN]) {
    NcclColl *c = impl;
    int dev = is_device_ptr(buf), rc = 0;
    void *d = buf;
    if (!dev) {
        if ((rc = stage(c, bytes, err))) return rc;
        d = c->scratch;
        if (cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, c->stream) != cudaSuccess)
            return err_set(err, ERR_IO, "nccl broadcast: staging copy failed");
    }
    ncclResult_t r = ncclBroadcast(d, d, bytes, ncclUint8, 0, c->comm, c->stream);
    if (r != ncclSuccess && r != ncclInProgress) return err_set(err, ERR_IO, "ncclBroadcast: %s", ncclGetErrorString(r));
    if (!dev && cudaMemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, c->stream) != cudaSuccess)
        return err_set(err, ERR_IO, "nccl broadcast: copy back failed");
    return nccl_wait(c, "broadcast", err);
}

static int nccl_poll(void *impl, char err[ERR_LEN]) {
    NcclColl *c = impl;
    int rc = coll_poll(c->side, err);
    if (rc) return rc;
    if (c->aborted) return err_set(err, ERR_CLOSED, "nccl: the communicator was aborted after an earlier failure");
    ncclResult_t async = ncclSuccess, r = ncclCommGetAsyncError(c->comm, &async);
    if (r == ncclSuccess && (async == ncclSuccess || async == ncclInProgress)) return 0;
    return err_set(err, ERR_CLOSED, "nccl: the communicator failed: %s",
                   ncclGetErrorString(r != ncclSuccess ? r : async));
}

static void nccl_close(void *impl) {
    NcclColl *c = impl;
    if (!c) return;
    coll_close(c->side);
    if (c->comm && !c->aborted) ncclCommDestroy(c->comm);
    if (c->scratch) cudaFree(c->scratch);
    if (c->stream) cudaStreamDestroy(c->stream);
    xfree(c);
}

static const CollBackend nccl_backend = {"nccl", nccl_allreduce, nccl_reduce_scatter, nccl_allgather, nccl_broadcast,
                                        nccl_poll, NULL, nccl_close};

/* The communicator of c (its stream made): ncclCommInitRankConfig, non-blocking, waited for up to timeout_s. */
static int nccl_init(NcclColl *c, const CollOptions *o, const ncclUniqueId *id, char err[ERR_LEN]) {
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess)
        return err_set(err, ERR_IO, "nccl: cudaStreamCreate failed");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, o->world, *id, o->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        c->comm = NULL;
        return err_set(err, ERR_IO, "ncclCommInitRankConfig (rank %d of %d): %s", o->rank, o->world,
                       ncclGetErrorString(r));
    }
    int64_t deadline = clock_ms() + (int64_t)(o->timeout_s * 1000);
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) {
        if (ncclCommGetAsyncError(c->comm, &st) != ncclSuccess) st = ncclSystemError;
        if (st == ncclInProgress && clock_ms() > deadline) {
            ncclCommAbort(c->comm);
            c->aborted = 1;
            return err_set(err, ERR_TIMEOUT, "nccl: communicator init did not finish within %.1f s (rank %d of %d)",
                           o->timeout_s, o->rank, o->world);
        }
        if (st == ncclInProgress) usleep(1000);
    }
    if (st != ncclSuccess) {
        ncclCommAbort(c->comm);
        c->aborted = 1;
        return err_set(err, ERR_IO, "nccl: communicator init failed: %s", ncclGetErrorString(st));
    }
    return 0;
}

int coll_open_nccl(const CollOptions *o, Collective **out, char err[ERR_LEN]) {
    if (!out) return err_set(err, ERR_INVAL, "coll_open_nccl: no place for the result");
    *out = NULL;
    Collective *side = NULL;
    int rc = coll_open_cpu(o, &side, err);           /* the side channel for the unique id, then membership */
    if (rc) return rc;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (o->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) rc = err_set(err, ERR_IO, "ncclGetUniqueId: %s", ncclGetErrorString(r));
    }
    if (!rc) rc = coll_broadcast(side, &id, sizeof id, err);
    if (rc) { coll_close(side); return rc; }
    NcclColl *c = xcalloc(1, sizeof *c);
    c->side = side;
    c->timeout_s = o->timeout_s;
    c->rank = o->rank;
    c->world = o->world;
    c->idle = o->idle;
    c->idle_ud = o->idle_ud;
    rc = nccl_init(c, o, &id, err);
    if (rc) { nccl_close(c); return rc; }
    Collective *coll = xcalloc(1, sizeof *coll);
    coll->be = &nccl_backend;
    coll->impl = c;
    coll->rank = o->rank;
    coll->world = o->world;
    log_info("collective: nccl backend, rank %d of %d (bootstrap via %s)", o->rank, o->world, o->endpoint);
    *out = coll;
    return 0;
}

#endif
