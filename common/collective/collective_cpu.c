/* common/collective/collective_cpu.c: the CPU backend of collective.h over ZeroMQ: the star (rank 0's ROUTER at
 * cluster.collective) for the join, membership and broadcast; the data collectives run on the ring
 * (collective_ring.c). Wire format per frame (DEALER side; the ROUTER adds the routing id frame):
 *   CollHeader (32 bytes: magic "DCOL", version, op, rank, seq, payload bytes, little-endian host order) + payload.
 * Every header is checked (magic, version, op, seq, size) before a payload is used, so a confused or stale peer
 * gives a clear error rather than wrong sums. Every receive polls in <= 50 ms slices up to the deadline and calls
 * the idle hook in between.
 * Join: a rank r > 0 binds its ring socket first and says HELLO (its nonce and ring endpoint) to rank 0; once every
 * rank has, rank 0 answers READY (its nonce = the group, and every rank's ring endpoint), and each rank links to its
 * ring successor (coll__ring_link).
 * Membership (issue 31): every rank watches its own star socket's connections (zmq_socket_monitor, DISCONNECTED
 * events) and ZMTP heartbeats drop a connection whose peer stays silent for timeout_s (dead, hung or cut off), in the
 * I/O thread, whatever the caller is doing. Once joined, a rank whose peer's connection closes (rank 0: the connection
 * a rank's HELLO came on; rank r > 0: the one READY came on, matched by ZMQ_SRCFD) marks the group lost: the
 * operation under way fails at once (ring waits poll the same events), and coll_poll reports it to an idle caller,
 * which starts again and joins whatever rank 0 is up then — so the ranks re-form in any restart order. A rank r > 0
 * that loses its ring neighbour learns it when rank 0 does (rank 0 watches every rank, fails, and its learner exits).
 * Events are read before every data frame: a connection's DISCONNECTED is queued before its file descriptor is
 * closed (and can be reused), so an event never applies to a later connection.
 * Not here: the ring algorithms (collective_ring.c), RDMA, compression. */
#include "collective/collective_cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/rng.h"

#define HELLO_RESEND_MS 500     /* a rank > 0 sends HELLO again this often until READY comes */
#define HELLO_BYTES (8 + COLL_EP_LEN)   /* nonce + ring endpoint */

/* A frame's sender holds a learner's key: the User-Id the ZAP handler gives ("NAME FINGERPRINT", net/zap.h) names
 * authorized_keys/learner.pub or learner-N.pub. Another role's key (a leaked rollout key) must not pose as a rank. */
int coll__from_learner_key(CpuColl *c, zmq_msg_t *m, const char *where) {
    const char *u = zmq_msg_gets(m, "User-Id");
    if (!c->curve || (u && !strncmp(u, "learner", 7) && (u[7] == ' ' || u[7] == '-'))) return 1;
    const char *a = zmq_msg_gets(m, "Peer-Address");
    c->refused++;
    log_warn_limited(&c->warn_refused, 10000, "collective: rank %d dropped a frame on its %s from %s with key %s: "
                     "only learner keys (authorized_keys/learner.pub, learner-NAME.pub) take part", c->rank, where, a ? a : "?",
                     u ? u : "none");
    return 0;
}

const char *coll__op_name(uint32_t op) {
    static const char *n[OP_COUNT] = {"?", "hello", "ready", "all-reduce", "result", "broadcast", "reduce-scatter",
                                      "all-gather", "ring hello"};
    return op < OP_COUNT ? n[op] : "?";
}

int coll__send(CpuColl *c, void *sock, const void *rid, size_t rid_len, uint32_t op, const void *data, size_t bytes,
               char err[ERR_LEN]) {
    CollHeader h = {COLL_MAGIC, COLL_VERSION, op, (uint32_t)c->rank, c->seq, bytes};
    zmq_msg_t m;
    if (zmq_msg_init_size(&m, sizeof h + bytes)) return err_set(err, ERR_NOMEM, "collective: zmq_msg_init_size");
    memcpy(zmq_msg_data(&m), &h, sizeof h);
    if (bytes) memcpy((char *)zmq_msg_data(&m) + sizeof h, data, bytes);
    if (rid && zmq_send(sock, rid, rid_len, ZMQ_SNDMORE) < 0) {
        zmq_msg_close(&m);
        return err_set(err, ERR_IO, "collective %s #%llu: send to a rank failed: %s", coll__op_name(op),
                       (unsigned long long)c->seq, zmq_strerror(zmq_errno()));
    }
    if (zmq_msg_send(&m, sock, 0) < 0) {
        zmq_msg_close(&m);
        return err_set(err, ERR_IO, "collective %s #%llu: send failed: %s", coll__op_name(op), (unsigned long long)c->seq,
                       zmq_strerror(zmq_errno()));
    }
    return 0;
}

/* 1 when the connection a frame came on (ZMQ_SRCFD) has closed already: its DISCONNECTED was read after the frame had
 * arrived (events of an earlier connection with the same number come before that connection's CONNECTED/ACCEPTED). */
static int fd_closed(const CpuColl *c, int fd) { return fd >= 0 && fd < c->n_fd && !c->fd_open[fd]; }

/* Applies the connection events queued so far (never blocks). Rank 0 while joining: a rank whose connection closed
 * must say HELLO again. After the join: the connection of a joined peer closed, so the group is lost (c->lost). */
void coll__mon_drain(CpuColl *c) {
    if (!c->mon) return;
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, c->mon, ZMQ_DONTWAIT) < 0) { zmq_msg_close(&ev); return; }
        uint16_t what = 0;
        uint32_t fd = 0;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&what, zmq_msg_data(&ev), 2);
            memcpy(&fd, (const char *)zmq_msg_data(&ev) + 2, 4);
        }
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        char where[128] = "";
        if (more) {                                  /* the endpoint's address */
            zmq_msg_init(&addr);
            if (zmq_msg_recv(&addr, c->mon, 0) >= 0)
                snprintf(where, sizeof where, "%.*s", (int)zmq_msg_size(&addr), (const char *)zmq_msg_data(&addr));
            zmq_msg_close(&addr);
        }
        if (what & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                    ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) {   /* issue 38: a refused peer is seen (fd holds a code) */
            c->handshakes_failed++;
            log_warn_limited(&c->warn_handshake, 10000, "collective: a handshake on %s failed (%s; a plaintext "
                             "client, a key not allowed, or a peer that hung up)", where[0] ? where : "?",
                             what == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ? "refused by ZAP"
                             : what == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "protocol error" : strerror((int)fd));
            continue;
        }
        if (fd >= (uint32_t)c->n_fd && fd < (1u << 24)) {
            int n = c->n_fd;
            while (c->n_fd <= (int)fd) c->n_fd = c->n_fd ? 2 * c->n_fd : 64;
            c->fd_open = xrealloc(c->fd_open, (size_t)c->n_fd);
            memset(c->fd_open + n, 0, (size_t)(c->n_fd - n));
        }
        if (fd < (uint32_t)c->n_fd) c->fd_open[fd] = what != ZMQ_EVENT_DISCONNECTED;
        if (what != ZMQ_EVENT_DISCONNECTED) continue;
        for (int r = 0; r < c->world; r++) {
            if (r == c->rank || c->peer_fd[r] < 0 || c->peer_fd[r] != (int)fd) continue;
            c->peer_fd[r] = -1;
            if (!c->ready) {                         /* rank 0 joining: that rank says HELLO again when it can */
                c->joined[r] = 0;
            } else if (!c->lost[0]) {
                snprintf(c->lost, sizeof c->lost, "the connection to rank %d closed (it died, restarted or was silent "
                         "for cluster.collective_timeout_s, %.1f s)", r, c->timeout_s);
                log_warn("collective: rank %d lost: %s", c->rank, c->lost);
            }
        }
    }
}

/* Receives one frame before the deadline into *m (payload after the routing id, which goes into rid; the connection
 * it came on into *fd when fd is non-NULL). A frame that arrived is returned even when the group is lost meanwhile
 * (a peer's last RESULT is good); only with none waiting does a lost group give ERR_CLOSED (c->lost says why).
 * 0, ERR_TIMEOUT, ERR_CLOSED, or the idle hook's code. */
static int recv_frame(CpuColl *c, int64_t deadline_ms, zmq_msg_t *m, char *rid, size_t *rid_len, int *fd) {
    for (;;) {
        zmq_pollitem_t it[2] = {{c->sock, 0, ZMQ_POLLIN, 0}, {c->mon, 0, ZMQ_POLLIN, 0}};
        int64_t left = deadline_ms - clock_ms();
        int n = zmq_poll(it, 1, 0);                  /* a frame waiting? */
        if (n == 0) {
            coll__mon_drain(c);
            if (c->lost[0]) return ERR_CLOSED;
            if (left <= 0) return ERR_TIMEOUT;
            n = zmq_poll(it, c->mon ? 2 : 1, left < 50 ? (long)left : 50);
        }
        if (n > 0 && (it[0].revents & ZMQ_POLLIN)) {
            coll__mon_drain(c);                            /* the events before this frame first */
            if (rid) {
                zmq_msg_t id;
                zmq_msg_init(&id);
                if (zmq_msg_recv(&id, c->sock, 0) < 0) { zmq_msg_close(&id); continue; }
                size_t l = zmq_msg_size(&id);
                *rid_len = l < 32 ? l : 32;
                memcpy(rid, zmq_msg_data(&id), *rid_len);
                int more = zmq_msg_more(&id);
                zmq_msg_close(&id);
                if (!more) continue;
            }
            zmq_msg_init(m);
            if (zmq_msg_recv(m, c->sock, 0) < 0) { zmq_msg_close(m); continue; }
            if (c->rank == 0 && !coll__from_learner_key(c, m, "star socket")) {   /* rank 0's star: a CURVE server */
                while (zmq_msg_more(m)) { zmq_msg_close(m); zmq_msg_init(m); zmq_msg_recv(m, c->sock, 0); }
                zmq_msg_close(m);
                continue;
            }
            if (fd) *fd = zmq_msg_get(m, ZMQ_SRCFD);
            while (zmq_msg_more(m)) {            /* a peer never sends more frames: drain and drop */
                zmq_msg_t x;
                zmq_msg_init(&x);
                zmq_msg_recv(&x, c->sock, 0);
                zmq_msg_close(&x);
            }
            return 0;
        }
        if (n > 0) continue;                         /* an event: applied at the top */
        if (n < 0 && zmq_errno() != EINTR) return ERR_IO;
        if (c->idle) {
            int rc = c->idle(c->idle_ud);
            if (rc < 0) return rc;
        }
    }
}

/* Validates a received frame's header. */
/* The header's fields against what this rank expects (both header checks). */
static int check_fields(CpuColl *c, const CollHeader *h, uint32_t op, uint64_t bytes, int want_rank, char err[ERR_LEN]) {
    if (h->magic != COLL_MAGIC || h->version != COLL_VERSION)
        return err_set(err, ERR_VERSION, "collective: frame with magic %08x version %u (want DCOL version %d): a "
                       "different dapo build or another program on the collective endpoint", h->magic, h->version,
                       COLL_VERSION);
    if (want_rank >= 0 && (int)h->rank != want_rank)
        return err_set(err, ERR_DECODE, "collective: frame from rank %u where rank %d was expected", h->rank, want_rank);
    if (h->rank >= (uint32_t)c->world)
        return err_set(err, ERR_DECODE, "collective: frame from rank %u but world is %d", h->rank, c->world);
    if (h->op != op || h->seq != c->seq)
        return err_set(err, ERR_INVAL, "collective: rank %u is out of step: it sent %s #%llu while rank %d is in %s #%llu "
                       "(ranks must call the same collectives in the same order)", h->rank, coll__op_name(h->op),
                       (unsigned long long)h->seq, c->rank, coll__op_name(op), (unsigned long long)c->seq);
    if (h->bytes != bytes)
        return err_set(err, ERR_INVAL, "collective %s #%llu: rank %u sent %llu bytes, rank %d has %llu (every rank "
                       "must pass the same size)", coll__op_name(op), (unsigned long long)c->seq, h->rank,
                       (unsigned long long)h->bytes, c->rank, (unsigned long long)bytes);
    return 0;
}

int coll__check_header(CpuColl *c, zmq_msg_t *m, uint32_t op, uint64_t bytes, int want_rank, CollHeader *h,
                       char err[ERR_LEN]) {
    if (zmq_msg_size(m) < sizeof *h) return err_set(err, ERR_DECODE, "collective: a %zu-byte frame is too short",
                                                     zmq_msg_size(m));
    memcpy(h, zmq_msg_data(m), sizeof *h);
    int rc = check_fields(c, h, op, bytes, want_rank, err);
    if (!rc && zmq_msg_size(m) != sizeof *h + bytes)
        return err_set(err, ERR_INVAL, "collective %s #%llu: rank %u sent a %zu-byte frame for %llu bytes",
                       coll__op_name(op), (unsigned long long)c->seq, h->rank, zmq_msg_size(m), (unsigned long long)bytes);
    return rc;
}

int coll__check_split_header(CpuColl *c, zmq_msg_t *m, uint32_t op, uint64_t bytes, int want_rank, CollHeader *h,
                             char err[ERR_LEN]) {
    if (zmq_msg_size(m) != sizeof *h || !zmq_msg_more(m))
        return err_set(err, ERR_DECODE, "collective: a %zu-byte frame where a header frame (%zu bytes, more to come) was "
                       "expected", zmq_msg_size(m), sizeof *h);
    memcpy(h, zmq_msg_data(m), sizeof *h);
    return check_fields(c, h, op, bytes, want_rank, err);
}

int coll__timeout_err(CpuColl *c, int rc, uint32_t op, const char *who, char err[ERR_LEN]) {
    if (rc == ERR_TIMEOUT)
        return err_set(err, ERR_TIMEOUT, "collective %s #%llu on rank %d: nothing from %s within %.1f s: that rank is "
                       "dead or hung (cluster.collective_timeout_s); restart the learners and resume from the last "
                       "checkpoint", coll__op_name(op), (unsigned long long)c->seq, c->rank, who, c->timeout_s);
    if (rc == ERR_CLOSED && c->lost[0])
        return err_set(err, ERR_CLOSED, "collective %s #%llu on rank %d: %s; restart the learners and resume from the "
                       "last checkpoint", coll__op_name(op), (unsigned long long)c->seq, c->rank, c->lost);
    return err_set(err, rc, "collective %s #%llu on rank %d: wait aborted: %s", coll__op_name(op),
                   (unsigned long long)c->seq, c->rank, err_str(rc));
}

/* timeout_err naming the ranks 1..W-1 not marked in mark[] (gather's frames seen, join's nonces). */
static int missing_err(CpuColl *c, int rc, uint32_t op, const uint64_t *mark, char err[ERR_LEN]) {
    char who[160] = "";
    size_t w = 0;
    for (int r = 1; r < c->world && w < sizeof who - 16; r++)
        if (!mark[r]) w += (size_t)snprintf(who + w, sizeof who - w, "%srank %d", w ? ", " : "", r);
    return coll__timeout_err(c, rc, op, who, err);
}

/* A HELLO that a rank which already joined sent again before it saw READY (same nonce): dropped. A HELLO with
 * another nonce is a restarted process, which the caller's header check reports as out of step. */
int coll__is_resent_hello(const CpuColl *c, zmq_msg_t *m) {
    CollHeader h;
    uint64_t nonce;
    if (zmq_msg_size(m) != sizeof h + HELLO_BYTES) return 0;
    memcpy(&h, zmq_msg_data(m), sizeof h);
    memcpy(&nonce, (const char *)zmq_msg_data(m) + sizeof h, sizeof nonce);
    return h.magic == COLL_MAGIC && h.op == OP_HELLO && h.rank > 0 && h.rank < (uint32_t)c->world &&
           c->joined[h.rank] == nonce;
}

/* ERR_CLOSED naming the lost peer when the group is lost (events read first), else 0: an operation's first check. */
int coll__check_lost(CpuColl *c, uint32_t op, char err[ERR_LEN]) {
    coll__mon_drain(c);
    return c->lost[0] ? coll__timeout_err(c, ERR_CLOSED, op, "", err) : 0;
}

static int cpu_broadcast(void *impl, void *buf, size_t bytes, char err[ERR_LEN]) {
    CpuColl *c = impl;
    c->seq++;
    int rc = coll__check_lost(c, OP_BCAST, err);
    if (rc) return rc;
    if (c->rank == 0) {
        for (int r = 1; r < c->world && !rc; r++) rc = coll__send(c, c->sock, c->rid[r], c->rid_len[r], OP_BCAST, buf, bytes, err);
        return rc;
    }
    zmq_msg_t m;
    rc = recv_frame(c, clock_ms() + (int64_t)(c->timeout_s * 1000), &m, NULL, NULL, NULL);
    if (rc) return coll__timeout_err(c, rc, OP_BCAST, "rank 0", err);
    CollHeader h;
    rc = coll__check_header(c, &m, OP_BCAST, bytes, 0, &h, err);
    if (!rc) memcpy(buf, (char *)zmq_msg_data(&m) + sizeof h, bytes);
    zmq_msg_close(&m);
    return rc;
}

static int cpu_poll(void *impl, char err[ERR_LEN]) {
    CpuColl *c = impl;
    coll__mon_drain(c);
    log_limit_flush(&c->warn_refused, "collective: frames dropped");     /* idle: the lines held back, once due */
    log_limit_flush(&c->warn_handshake, "collective: failed handshakes");
    return c->lost[0] ? err_set(err, ERR_CLOSED, "collective (cpu, rank %d of %d): %s", c->rank, c->world, c->lost) : 0;
}

static void cpu_close(void *impl) {
    CpuColl *c = impl;
    if (!c) return;
    if (c->mon) {
        zmq_socket_monitor(c->sock, NULL, 0);        /* stop the monitor before its reader goes */
        zmq_close(c->mon);
    }
    if (c->sock) zmq_close(c->sock);
    coll__ring_close(c);
    if (c->own_ctx && c->zctx) zmq_ctx_term(c->zctx);
    xfree(c->rid);
    xfree(c->rid_len);
    xfree(c->ring_ep);
    xfree(c->joined);
    xfree(c->peer_fd);
    xfree(c->fd_open);
    xfree(c);
}

static void cpu_security(void *impl, unsigned long long *refused, unsigned long long *failed) {
    const CpuColl *c = impl;
    if (!c) return;
    *refused = c->refused;
    *failed = c->handshakes_failed;
}

static const CollBackend cpu_backend = {"cpu", coll__ring_allreduce, coll__ring_reduce_scatter, coll__ring_allgather,
                                       cpu_broadcast, cpu_poll, cpu_security, cpu_close};

/* Rank 0's HELLO handling while joining: frames of any other op are leftovers of a rank from before a restart and
 * are dropped (logged); a HELLO records the rank's nonce, routing id and connection. 1 when the frame was a HELLO
 * from a new process of that rank (it needs READY), 0 when dropped or repeated, < 0 on a bad frame. */
static int take_hello(CpuColl *c, zmq_msg_t *m, const char *rid, size_t rid_len, int fd, char err[ERR_LEN]) {
    CollHeader h;
    uint64_t nonce = 0;
    if (zmq_msg_size(m) >= sizeof h) memcpy(&h, zmq_msg_data(m), sizeof h);
    if (zmq_msg_size(m) >= sizeof h && h.magic == COLL_MAGIC && h.version == COLL_VERSION && h.op != OP_HELLO &&
        h.rank > 0 && h.rank < (uint32_t)c->world) {
        log_warn("collective: dropped %s #%llu from rank %u, sent before a restart", coll__op_name(h.op),
                 (unsigned long long)h.seq, h.rank);
        return 0;
    }
    int rc = coll__check_header(c, m, OP_HELLO, HELLO_BYTES, -1, &h, err);
    if (!rc && h.rank == 0) rc = err_set(err, ERR_INVAL, "collective: a second rank 0 sent hello");
    if (rc) return rc;
    if (fd_closed(c, fd)) return 0;                  /* its connection closed since: it says HELLO again if alive */
    const char *p = (const char *)zmq_msg_data(m) + sizeof h;
    memcpy(&nonce, p, sizeof nonce);
    if (!nonce) return err_set(err, ERR_INVAL, "collective: rank %u sent hello without a nonce", h.rank);
    if (!memchr(p + 8, 0, COLL_EP_LEN) || !p[8])
        return err_set(err, ERR_INVAL, "collective: rank %u sent hello without its ring endpoint", h.rank);
    memcpy(c->ring_ep[h.rank], p + 8, COLL_EP_LEN);
    int fresh = c->joined[h.rank] != nonce;          /* 0 also after its connection closed: it is unjoined then */
    c->joined[h.rank] = nonce;
    c->peer_fd[h.rank] = fd;
    memcpy(c->rid[h.rank], rid, rid_len);
    c->rid_len[h.rank] = rid_len;
    return fresh;
}

/* Join, robust to restarts (issues 17, 31: a rank restarted by its supervisor meets a peer that is still the old
 * process, or that restarts too, in any order). Ranks > 0 send HELLO (with their nonce) every HELLO_RESEND_MS until
 * READY comes, so a HELLO that an exiting rank 0 swallowed is sent again to its successor; a rank > 0 that already
 * joined a rank 0 which then went sees its connection close (mon_drain) and starts again. Rank 0 waits until every
 * rank has said HELLO on a connection that is still open (a rank whose connection closed meanwhile must say it
 * again), sends READY to each process once, and is done when all have it. */
static int join_rank0(CpuColl *c, char err[ERR_LEN]) {
    int64_t deadline = clock_ms() + (int64_t)(c->timeout_s * 1000);
    uint64_t *told = xcalloc((size_t)c->world, sizeof *told);   /* the nonce READY went to, per rank */
    size_t ready_bytes = 8 + (size_t)c->world * COLL_EP_LEN;
    char *ready = xcalloc(1, ready_bytes);           /* the group, then every rank's ring endpoint */
    int rc = 0;
    c->group = c->nonce;
    memcpy(c->ring_ep[0], c->my_ep, COLL_EP_LEN);
    for (;;) {
        coll__mon_drain(c);
        int all = 1;
        for (int r = 1; r < c->world; r++) all &= c->joined[r] != 0;
        if (all) {
            memcpy(ready, &c->group, 8);
            memcpy(ready + 8, c->ring_ep, (size_t)c->world * COLL_EP_LEN);
        }
        for (int r = 1; all && r < c->world; r++) {
            if (told[r] == c->joined[r]) continue;
            char e2[ERR_LEN];
            if (coll__send(c, c->sock, c->rid[r], c->rid_len[r], OP_READY, ready, ready_bytes, e2)) {
                log_warn("%s: rank %d must say hello again", e2, r);   /* it went meanwhile */
                c->joined[r] = 0;
                c->peer_fd[r] = -1;
                all = 0;
                continue;
            }
            told[r] = c->joined[r];
        }
        if (all) break;
        zmq_msg_t m;
        char rid[32];
        size_t rid_len = 0;
        int fd = -1;
        rc = recv_frame(c, deadline, &m, rid, &rid_len, &fd);
        if (rc) { rc = missing_err(c, rc, OP_HELLO, c->joined, err); break; }
        rc = take_hello(c, &m, rid, rid_len, fd, err);
        zmq_msg_close(&m);
        if (rc < 0) break;
        rc = 0;
    }
    xfree(ready);
    xfree(told);
    return rc;
}

/* A rank r > 0's READY: the group and every rank's ring endpoint (into eps). */
static int take_ready(CpuColl *c, zmq_msg_t *m, char (*eps)[COLL_EP_LEN], char err[ERR_LEN]) {
    CollHeader h;
    size_t bytes = 8 + (size_t)c->world * COLL_EP_LEN;
    int rc = coll__check_header(c, m, OP_READY, bytes, 0, &h, err);
    if (rc) return rc;
    const char *p = (const char *)zmq_msg_data(m) + sizeof h;
    memcpy(&c->group, p, 8);
    memcpy(eps, p + 8, (size_t)c->world * COLL_EP_LEN);
    for (int r = 0; r < c->world; r++)
        if (!memchr(eps[r], 0, COLL_EP_LEN) || !eps[r][0])
            return err_set(err, ERR_DECODE, "collective: READY without rank %d's ring endpoint", r);
    return 0;
}

static int cpu_join(CpuColl *c, const CollOptions *o, char err[ERR_LEN]) {
    char (*eps)[COLL_EP_LEN] = c->ring_ep;           /* rank 0 fills it from the HELLOs, the others from READY */
    int rc = c->rank == 0 ? join_rank0(c, err) : 0;
    int64_t deadline = clock_ms() + (int64_t)(c->timeout_s * 1000);
    char hello[HELLO_BYTES] = {0};
    memcpy(hello, &c->nonce, 8);
    memcpy(hello + 8, c->my_ep, COLL_EP_LEN);
    while (c->rank > 0) {
        rc = coll__send(c, c->sock, NULL, 0, OP_HELLO, hello, sizeof hello, err);
        if (rc) return rc;
        int64_t slice = clock_ms() + HELLO_RESEND_MS;
        zmq_msg_t m;
        int fd = -1;
        rc = recv_frame(c, slice < deadline ? slice : deadline, &m, NULL, NULL, &fd);
        if (rc == ERR_TIMEOUT && clock_ms() < deadline) continue;           /* send HELLO again */
        if (rc) return coll__timeout_err(c, rc, OP_HELLO, "rank 0", err);
        CollHeader h;
        if (zmq_msg_size(&m) >= sizeof h) memcpy(&h, zmq_msg_data(&m), sizeof h);
        if (zmq_msg_size(&m) >= sizeof h && h.magic == COLL_MAGIC && h.version == COLL_VERSION && h.op != OP_READY &&
            h.rank == 0) {                           /* an old rank 0's frame for the process before this one */
            log_warn("collective: dropped %s #%llu from rank 0, meant for this rank's previous process",
                     coll__op_name(h.op), (unsigned long long)h.seq);
            zmq_msg_close(&m);
            continue;
        }
        rc = take_ready(c, &m, eps, err);
        zmq_msg_close(&m);
        if (rc) return rc;
        c->peer_fd[0] = fd;                          /* rank 0's connection: its closing loses the group */
        if (fd_closed(c, fd))
            snprintf(c->lost, sizeof c->lost, "the connection to rank 0 closed right after it said READY");
        break;
    }
    if (!rc) c->ready = 1;                           /* a peer lost while the ring links loses the group too */
    if (!rc) rc = coll__ring_link(c, o, eps, err);
    return rc;
}

/* zmq_setsockopt, checked: 0 or ERR_IO naming the option. */
int coll__sockopt(void *s, int opt, const char *name, const void *v, size_t n, char err[ERR_LEN]) {
    if (zmq_setsockopt(s, opt, v, n) == 0) return 0;
    return err_set(err, ERR_IO, "collective: zmq_setsockopt(%s): %s", name, zmq_strerror(zmq_errno()));
}

/* CURVE server on s (the server secret key, ZAP domain "dapo"), before bind; a no-op without CURVE. */
int coll__curve_server(void *s, const CollOptions *o, char err[ERR_LEN]) {
    int one = 1, rc = 0;
    if (!o->curve_server_public || !o->curve_server_public[0]) return 0;
    if (!o->curve_server_secret || strlen(o->curve_server_secret) != 40)
        return err_set(err, ERR_INVAL, "collective: rank %d needs the server secret key (cluster.curve.server_secret_key "
                       "and authorized_keys): with CURVE every learner rank serves its ring neighbour", o->rank);
    rc = coll__sockopt(s, ZMQ_CURVE_SERVER, "ZMQ_CURVE_SERVER", &one, sizeof one, err);
    if (!rc) rc = coll__sockopt(s, ZMQ_CURVE_SECRETKEY, "ZMQ_CURVE_SECRETKEY", o->curve_server_secret, 40, err);
    /* "dapo-learners" (net/zap.h's ZAP_DOMAIN_LEARNERS): the ZAP handler lets only learner keys in, so no other key's
     * frames can queue here at all (issue 38); the per-frame key check stays behind it */
    if (!rc) rc = coll__sockopt(s, ZMQ_ZAP_DOMAIN, "ZMQ_ZAP_DOMAIN", "dapo-learners", 13, err);
    return rc;
}

/* CURVE client of the server public key with this rank's key pair on s, before connect; a no-op without CURVE. */
int coll__curve_client(void *s, const CollOptions *o, char err[ERR_LEN]) {
    if (!o->curve_server_public || !o->curve_server_public[0]) return 0;
    if (!o->curve_public || !o->curve_secret || strlen(o->curve_public) != 40 || strlen(o->curve_secret) != 40)
        return err_set(err, ERR_INVAL, "collective: CURVE needs this rank's own key pair");
    int rc = coll__sockopt(s, ZMQ_CURVE_SERVERKEY, "ZMQ_CURVE_SERVERKEY", o->curve_server_public, 40, err);
    if (!rc) rc = coll__sockopt(s, ZMQ_CURVE_PUBLICKEY, "ZMQ_CURVE_PUBLICKEY", o->curve_public, 40, err);
    if (!rc) rc = coll__sockopt(s, ZMQ_CURVE_SECRETKEY, "ZMQ_CURVE_SECRETKEY", o->curve_secret, 40, err);
    return rc;
}

/* Watches the data socket's connection events on an inproc PAIR socket (c->mon), before any connection exists. Its
 * queue has no limit: a socket monitor blocks the context's I/O thread when its queue is full (a port scan while the
 * learner computes for long would stall heartbeats, the weight server and ZAP), so a flood costs memory until the
 * next collective or coll_poll reads it (a few dozen bytes an event). Events of a connection come in the order they
 * happened relative to its frames with one I/O thread (the context's default; the learner's has one). */
static int coll_monitor(CpuColl *c, char err[ERR_LEN]) {
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://dapo-coll-monitor-%p", (void *)c);
    if (zmq_socket_monitor(c->sock, addr, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
        return err_set(err, ERR_IO, "collective: zmq_socket_monitor: %s", zmq_strerror(zmq_errno()));
    int zero = 0;
    c->mon = zmq_socket(c->zctx, ZMQ_PAIR);     /* no limit on queued events: the I/O thread must never block on it */
    if (!c->mon || zmq_setsockopt(c->mon, ZMQ_LINGER, &zero, sizeof zero) ||
        zmq_setsockopt(c->mon, ZMQ_RCVHWM, &zero, sizeof zero) || zmq_connect(c->mon, addr)) {
        int rc = err_set(err, ERR_IO, "collective: the connection monitor: %s", zmq_strerror(zmq_errno()));
        zmq_socket_monitor(c->sock, NULL, 0);
        if (c->mon) zmq_close(c->mon);
        c->mon = NULL;
        return rc;
    }
    return 0;
}

int coll__sockopts(void *s, double timeout_s, int64_t max_msg, int rcvhwm, char err[ERR_LEN]) {
    int zero = 0;
    double tmo_ms = timeout_s * 1000 < 2e9 ? timeout_s * 1000 : 2e9;
    int hb_timeout = tmo_ms < 2 ? 2 : (int)tmo_ms;
    int hb_ivl = hb_timeout / 5 < 1000 ? hb_timeout / 5 : 1000, floor_ms = hb_timeout / 2 < 100 ? hb_timeout / 2 : 100;
    if (hb_ivl < floor_ms) hb_ivl = floor_ms;      /* at least every 100 ms apart, and twice within the timeout */
    int rc = coll__sockopt(s, ZMQ_LINGER, "ZMQ_LINGER", &zero, sizeof zero, err);
    if (!rc) rc = coll__sockopt(s, ZMQ_SNDHWM, "ZMQ_SNDHWM", &zero, sizeof zero, err);
    if (!rc) rc = coll__sockopt(s, ZMQ_RCVHWM, "ZMQ_RCVHWM", &rcvhwm, sizeof rcvhwm, err);
    if (!rc) rc = coll__sockopt(s, ZMQ_MAXMSGSIZE, "ZMQ_MAXMSGSIZE", &max_msg, sizeof max_msg, err);
    if (!rc) rc = coll__sockopt(s, ZMQ_HEARTBEAT_IVL, "ZMQ_HEARTBEAT_IVL", &hb_ivl, sizeof hb_ivl, err);
    if (!rc) rc = coll__sockopt(s, ZMQ_HEARTBEAT_TIMEOUT, "ZMQ_HEARTBEAT_TIMEOUT", &hb_timeout, sizeof hb_timeout, err);
    return rc;
}

/* The rank's star socket (rank 0 a ROUTER bound at the endpoint, the others DEALERs connected to it), its options
 * (coll__sockopts: ZMTP heartbeats, a ping every timeout/5 within [min(100 ms, timeout/2), 1 s], so a connection
 * silent for timeout_s is dropped), CURVE and monitor. */
static int coll_socket(CpuColl *c, const CollOptions *o, char err[ERR_LEN]) {
    rng_seed_libc();                                  /* the ROUTER's generated routing ids (core/rng.h) */
    c->sock = zmq_socket(c->zctx, o->rank == 0 ? ZMQ_ROUTER : ZMQ_DEALER);
    if (!c->sock) return err_set(err, ERR_IO, "collective: zmq_socket: %s", zmq_strerror(zmq_errno()));
    int one = 1;
    int rc = o->rank == 0 ? coll__sockopts(c->sock, o->timeout_s, COLL_STAR_MAX_MSG, COLL_RCVHWM, err)  /* HELLOs */
                          : coll__sockopts(c->sock, o->timeout_s, -1, 0, err);
    if (!rc) rc = o->rank == 0 ? coll__curve_server(c->sock, o, err) : coll__curve_client(c->sock, o, err);
    if (!rc) rc = coll_monitor(c, err);
    if (rc) return rc;
    if (o->rank == 0) {
        /* no ZMQ_ROUTER_HANDOVER, and the ranks set no routing id (the ROUTER gives each connection one; rank 0
         * sends to the one each HELLO came on): a client with another rank's id gets a connection of its own and
         * displaces nobody (issue 38) */
        rc = coll__sockopt(c->sock, ZMQ_ROUTER_MANDATORY, "ZMQ_ROUTER_MANDATORY", &one, sizeof one, err);
        if (!rc && zmq_bind(c->sock, o->endpoint))
            rc = err_set(err, ERR_IO, "collective: rank 0 cannot bind %s: %s (cluster.collective)", o->endpoint,
                         zmq_strerror(zmq_errno()));
        return rc;
    }
    if (zmq_connect(c->sock, o->endpoint))
        rc = err_set(err, ERR_IO, "collective: rank %d cannot connect to %s: %s", o->rank, o->endpoint,
                     zmq_strerror(zmq_errno()));
    return rc;
}

int coll_open_cpu(const CollOptions *o, Collective **pout, char err[ERR_LEN]) {
    if (!pout) return err_set(err, ERR_INVAL, "coll_open_cpu: no place for the result");
    *pout = NULL;
    if (!o || o->world < 1 || o->rank < 0 || o->rank >= o->world || !(o->timeout_s > 0) ||
        (o->world > 1 && (!o->endpoint || !o->endpoint[0])))
        return err_set(err, ERR_INVAL, "collective: bad options (rank %d, world %d, timeout %.3g s, endpoint '%s')",
                       o ? o->rank : -1, o ? o->world : 0, o ? o->timeout_s : 0, o && o->endpoint ? o->endpoint : "");
    CpuColl *c = xcalloc(1, sizeof *c);
    c->rank = o->rank;
    c->world = o->world;
    c->timeout_s = o->timeout_s;
    c->idle = o->idle;
    c->idle_ud = o->idle_ud;
    c->rid = xcalloc((size_t)o->world, sizeof *c->rid);
    c->rid_len = xcalloc((size_t)o->world, sizeof *c->rid_len);
    c->ring_ep = xcalloc((size_t)o->world, sizeof *c->ring_ep);
    c->seg_floats = COLL_SEG_FLOATS;
    c->joined = xcalloc((size_t)o->world, sizeof *c->joined);
    c->peer_fd = xcalloc((size_t)o->world, sizeof *c->peer_fd);
    for (int r = 0; r < o->world; r++) c->peer_fd[r] = -1;
    c->nonce = clock_nonce(c);
    Collective *out = xcalloc(1, sizeof *out);
    out->be = &cpu_backend;
    out->impl = c;
    out->rank = o->rank;
    out->world = o->world;
    *pout = out;
    if (o->world == 1) return 0;
    c->zctx = o->zctx;
    if (!c->zctx) { c->zctx = zmq_ctx_new(); c->own_ctx = 1; }
    c->curve = o->curve_server_public && o->curve_server_public[0];
    const char *seg = getenv("DAPO_COLL_SEG_FLOATS");      /* tests: many frames from small buffers */
    if (seg && atol(seg) > 0) c->seg_floats = atol(seg);
    int rc = c->zctx ? coll_socket(c, o, err) : err_set(err, ERR_IO, "collective: zmq_ctx_new failed");
    if (!rc) rc = coll__ring_bind(c, o, err);
    if (!rc) rc = cpu_join(c, o, err);
    if (rc) {
        coll_close(out);
        *pout = NULL;
        return rc;
    }
    log_info("collective: cpu backend, rank %d of %d on %s (ring: %s)", o->rank, o->world, o->endpoint, c->my_ep);
    return 0;
}
