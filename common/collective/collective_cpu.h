/* common/collective/collective_cpu.h: the CPU collective's state and frame helpers, shared by its two files (private to
 * common/collective; callers use collective.h):
 *   collective_cpu.c   the star: rank 0's ROUTER at cluster.collective, the join (HELLO / READY), membership
 *                      (connection events), broadcast, the backend table;
 *   collective_ring.c  the ring: each rank's own ROUTER (rx, bound at an address derived from the star's endpoint) that
 *                      its predecessor's DEALER (tx) sends into; reduce-scatter, all-gather and all-reduce over it.
 * Wire format of every frame (a DEALER's; a ROUTER adds the routing id frame): CollHeader + payload. */
#ifndef DAPO_COLLECTIVE_CPU_H
#define DAPO_COLLECTIVE_CPU_H

#include <stdint.h>
#include <zmq.h>

#include "collective/collective.h"
#include "core/log.h"

#define COLL_MAGIC   0x4c4f4344u   /* "DCOL" */
#define COLL_VERSION 3             /* 3: HELLO carries the rank's ring endpoint, READY the group and every endpoint */
#define COLL_STAR_MAX_MSG 65536   /* bytes a frame to rank 0's star socket (a HELLO is 296) */
#define COLL_RCVHWM 0             /* frames queued per connection: no bound (a bound made libzmq 4.3.4 abort when a
                                     paused connection closed); only learner keys connect (ZAP) */
#define COLL_EP_LEN  256           /* a ring endpoint on the wire: NUL-padded text */
enum { OP_HELLO = 1, OP_READY, OP_REDUCE, OP_RESULT, OP_BCAST, OP_RS, OP_AG, OP_RING_HELLO, OP_COUNT };

typedef struct {
    uint32_t magic, version, op, rank;
    uint64_t seq, bytes;
} CollHeader;
_Static_assert(sizeof(CollHeader) == 32, "CollHeader is a wire format");

typedef struct {
    int       rank, world;
    void     *zctx, *sock;       /* the star: rank 0's ROUTER, the others' DEALER */
    int       own_ctx;
    double    timeout_s;
    uint64_t  seq;
    CollIdleFn idle;
    void     *idle_ud;
    char    (*rid)[32];          /* [world] routing ids of ranks (rank 0 only) */
    size_t   *rid_len;
    uint64_t  nonce;             /* this process's join nonce (pid and clock), sent in HELLO */
    uint64_t  group;             /* rank 0's nonce: the group this rank joined (READY), checked by the ring's hello */
    uint64_t *joined;            /* [world] rank 0: the nonce each rank joined with */
    char    (*ring_ep)[COLL_EP_LEN];   /* [world] rank 0: each rank's ring endpoint from its HELLO */
    void     *mon;               /* PAIR socket reading the star socket's connection events */
    int      *peer_fd;           /* [world] the connection (ZMQ_SRCFD) of each rank's HELLO (rank 0), of READY ([0]) */
    unsigned char *fd_open;      /* [n_fd] by file descriptor: 1 after its CONNECTED/ACCEPTED event, 0 after DISCONNECTED */
    int       n_fd;
    int       ready;             /* the join is complete: from now on a closed peer connection loses the group */
    char      lost[160];         /* non-empty once a peer's connection closed after the join: who and how */
    int       curve;             /* CURVE server sockets: frames count only from learners' keys (issue 38) */
    uint64_t  refused;           /* frames dropped: another role's key, or a connection that is not the ring peer */
    uint64_t  handshakes_failed; /* connections refused before any frame (monitor events) */
    LogLimit  warn_refused, warn_handshake;
    /* the ring (collective_ring.c) */
    void     *rx, *tx;           /* own ROUTER (the predecessor sends into it); DEALER into the successor's */
    char      my_ep[COLL_EP_LEN];        /* rx's endpoint as the others reach it */
    char      pred_rid[32];      /* the predecessor's connection on rx (routing id of its RING_HELLO) */
    size_t    pred_rid_len;
    long      seg_floats;        /* floats per ring frame (pipelining); COLL_SEG_FLOATS unless a test lowers it */
    uint64_t  zc_sent;           /* ring data frames handed to ZeroMQ without a copy (collective_ring.c send_range) */
    _Atomic uint64_t zc_freed;   /* ... and released by ZeroMQ's I/O thread (its free callback) */
} CpuColl;

/* Frames of the ring carry at most this many floats: a chunk is sent in segments, each forwarded as soon as it is
 * reduced, so the W - 1 steps overlap (1 MiB: large enough that the per-frame cost vanishes, small enough to pipeline) */
#define COLL_SEG_FLOATS (256L * 1024)

/* Shared by both files (collective_cpu.c). */
/* coll__check_header for a header sent as a frame of its own (the ring's data frames: header, then the floats in a
 * second frame of h->bytes): the frame must be exactly the header. */
int coll__check_split_header(CpuColl *c, zmq_msg_t *m, uint32_t op, uint64_t bytes, int want_rank, CollHeader *h,
                             char err[ERR_LEN]);
const char *coll__op_name(uint32_t op);
/* 1 when *m may be used: CURVE is off, or its sender's key is a learner's (ZAP User-Id "learner..."); otherwise
 * counts it in c->refused, logs it (rate-limited, naming where: "star socket" or "ring", the address and key) and
 * returns 0 — the caller drops *m. */
int  coll__from_learner_key(CpuColl *c, zmq_msg_t *m, const char *where);
/* header + payload as one frame on sock (to routing id rid when non-NULL). 0 or ERR_IO / ERR_NOMEM. */
int  coll__send(CpuColl *c, void *sock, const void *rid, size_t rid_len, uint32_t op, const void *data, size_t bytes,
                char err[ERR_LEN]);
/* Validates a frame's header: DCOL, version, sender (want_rank >= 0: that rank), op, sequence number, size. */
int  coll__check_header(CpuColl *c, zmq_msg_t *m, uint32_t op, uint64_t bytes, int want_rank, CollHeader *h,
                        char err[ERR_LEN]);
/* The error of a wait that ended with rc (ERR_TIMEOUT: nothing from `who`; ERR_CLOSED: the lost peer). */
int  coll__timeout_err(CpuColl *c, int rc, uint32_t op, const char *who, char err[ERR_LEN]);
void coll__mon_drain(CpuColl *c);
/* 1 when a frame on the star socket is a HELLO a joined rank sent again before it saw READY (dropped). */
int  coll__is_resent_hello(const CpuColl *c, zmq_msg_t *m);
/* The options of every collective socket: no linger, ZMTP heartbeats from timeout_s, no send high-water mark; for a
 * socket that takes connections (rank 0's star, every ring receiver) max_msg bytes a frame at most and rcvhwm frames
 * queued a connection (issue 38: a client with an authorized key cannot fill a learner's memory before the key is
 * checked); max_msg -1 and rcvhwm 0: no limit (a client socket: only the server it checked sends to it). */
int  coll__sockopts(void *s, double timeout_s, int64_t max_msg, int rcvhwm, char err[ERR_LEN]);
int  coll__sockopt(void *s, int opt, const char *name, const void *v, size_t n, char err[ERR_LEN]);
/* CURVE server (every rank's ring socket, rank 0's star) / client (the others), before bind / connect; no-ops
 * without CURVE. ERR_INVAL naming the missing key. */
int  coll__curve_server(void *s, const CollOptions *o, char err[ERR_LEN]);
int  coll__curve_client(void *s, const CollOptions *o, char err[ERR_LEN]);
/* ERR_CLOSED naming the lost peer when the group is lost (events read first), else 0: an operation's first check. */
int  coll__check_lost(CpuColl *c, uint32_t op, char err[ERR_LEN]);

/* collective_ring.c */
/* Binds rx at the address derived from the star's endpoint (ipc/inproc: a sibling path; tcp: rank 0 on the endpoint's
 * host, a rank r > 0 on the local address its traffic to rank 0 leaves from, both on a port the system picks) and
 * writes c->my_ep. CURVE server with the server keys of o. 0 or ERR_IO / ERR_INVAL naming what. */
int  coll__ring_bind(CpuColl *c, const CollOptions *o, char err[ERR_LEN]);
/* After READY: connects tx to the successor's endpoint eps[(rank + 1) % W] (a wildcard host there is read as the
 * star endpoint's host), says RING_HELLO (with c->group) and waits for the predecessor's. 0 or a timeout_err. */
int  coll__ring_link(CpuColl *c, const CollOptions *o, char (*eps)[COLL_EP_LEN], char err[ERR_LEN]);
int  coll__ring_allreduce(void *impl, float *buf, long n, char err[ERR_LEN]);
int  coll__ring_reduce_scatter(void *impl, float *buf, long shard, char err[ERR_LEN]);
int  coll__ring_allgather(void *impl, float *buf, long shard, char err[ERR_LEN]);
void coll__ring_close(CpuColl *c);

#endif
