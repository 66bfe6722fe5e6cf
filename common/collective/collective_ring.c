/* common/collective/collective_ring.c: the CPU collective's ring (collective.h): reduce-scatter, all-gather and
 * all-reduce over W ranks, each sending into its successor's socket and receiving from its predecessor's, with fixed
 * chunk order so the sums are bitwise repeatable.
 * Algorithm (the classic ring; Patarasuk & Yuan 2009, as NCCL's and Gloo's ring all-reduce): the buffer is W chunks
 * (bounds b[0..W]); reduce-scatter takes W-1 steps, at step s rank r sends chunk (r-s-1) mod W and receives chunk
 * (r-s-2) mod W, adding its own values to what arrives, so rank r ends with chunk r summed in the order r+1, r+2, ...,
 * r; all-gather takes W-1 steps, at step s rank r sends chunk (r-s) mod W and stores chunk (r-s-1) mod W. Each chunk
 * travels in frames of seg_floats (1 MiB): a frame is forwarded as soon as it is added (or stored), so the steps
 * overlap. Each rank sends and receives (W-1)/W n floats per phase.
 * Frames are accepted only from the predecessor's linked connection (the routing id of its RING_HELLO, which names
 * this group), and with CURVE only from learner keys; the star's connection events (and on rank 0 its socket) are
 * watched during every wait, so a lost peer or a restarted rank's HELLO (out of step) ends the operation at once.
 * Not here: the join and the star (collective_cpu.c). */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <sched.h>
#include <unistd.h>

#include "collective/collective_cpu.h"
#include "core/clock.h"
#include "core/rng.h"

/* ---------------------------------------------------------------------------------------------- endpoints */

/* Splits "tcp://HOST:PORT" (HOST may be "[v6]"); 0, or -1 when ep is not of that form. */
static int tcp_split(const char *ep, char *host, size_t hn, char *port, size_t pn) {
    if (strncmp(ep, "tcp://", 6)) return -1;
    const char *h = ep + 6, *colon;
    size_t hl;
    if (*h == '[') {
        const char *e = strchr(h, ']');
        if (!e || e[1] != ':') return -1;
        h++;
        hl = (size_t)(e - h);
        colon = e + 1;
    } else {
        colon = strrchr(h, ':');
        if (!colon) return -1;
        hl = (size_t)(colon - h);
    }
    if (hl + 1 > hn || strlen(colon + 1) + 1 > pn) return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    snprintf(port, pn, "%s", colon + 1);
    return 0;
}

static int is_wildcard(const char *host) {
    return !host[0] || !strcmp(host, "*") || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
}

/* The local address this host's traffic to host:port leaves from (a UDP socket's connect picks the route and sends
 * nothing), as text; *v6 when it is IPv6. 0 or ERR_IO naming the host. */
static int local_addr_to(const char *host, const char *port, char *out, size_t n, int *v6, char err[ERR_LEN]) {
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g) return err_set(err, ERR_IO, "collective: cannot resolve rank 0's host '%s': %s", host, gai_strerror(g));
    int rc = ERR_IO;
    for (struct addrinfo *a = res; a && rc; a = a->ai_next) {
        int s = socket(a->ai_family, SOCK_DGRAM, 0);
        struct sockaddr_storage me;
        socklen_t ml = sizeof me;
        if (s >= 0 && connect(s, a->ai_addr, a->ai_addrlen) == 0 && getsockname(s, (struct sockaddr *)&me, &ml) == 0) {
            const void *ip = me.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&me)->sin6_addr
                                                      : (const void *)&((struct sockaddr_in *)&me)->sin_addr;
            if (inet_ntop(me.ss_family, ip, out, (socklen_t)n)) {
                *v6 = me.ss_family == AF_INET6;
                rc = 0;
            }
        }
        if (s >= 0) close(s);
    }
    freeaddrinfo(res);
    return rc ? err_set(err, ERR_IO, "collective: no route to rank 0's host '%s' to bind the ring socket on", host) : 0;
}

/* The address rx binds: a sibling of the star's ipc/inproc endpoint, or tcp on rank 0's host (rank 0) or on the local
 * address toward it (the others), port chosen by the system. */
static int ring_bind_addr(const CpuColl *c, const char *star, char *out, size_t n, int *v6, char err[ERR_LEN]) {
    *v6 = 0;
    if (!strncmp(star, "ipc://", 6) || !strncmp(star, "inproc://", 9)) {
        snprintf(out, n, "%s.ring%d", star, c->rank);
        return 0;
    }
    char host[256], port[32], ip[INET6_ADDRSTRLEN];
    if (tcp_split(star, host, sizeof host, port, sizeof port))
        return err_set(err, ERR_INVAL, "collective: endpoint '%s' is not tcp://HOST:PORT, ipc:// or inproc://", star);
    if (c->rank == 0) {
        *v6 = strchr(host, ':') != NULL;
        snprintf(out, n, *v6 ? "tcp://[%s]:*" : "tcp://%s:*", is_wildcard(host) ? "*" : host);
        return 0;
    }
    int rc = local_addr_to(host, port, ip, sizeof ip, v6, err);
    if (!rc) snprintf(out, n, *v6 ? "tcp://[%s]:*" : "tcp://%s:*", ip);
    return rc;
}

int coll__ring_bind(CpuColl *c, const CollOptions *o, char err[ERR_LEN]) {
    char addr[COLL_EP_LEN];
    int v6 = 0, one = 1;
    int rc = ring_bind_addr(c, o->endpoint, addr, sizeof addr, &v6, err);
    if (rc) return rc;
    rng_seed_libc();                                  /* the ROUTER's generated routing ids (core/rng.h) */
    c->rx = zmq_socket(c->zctx, ZMQ_ROUTER);
    if (!c->rx) return err_set(err, ERR_IO, "collective: zmq_socket: %s", zmq_strerror(zmq_errno()));
    /* a frame holds a segment at most (header + seg_floats floats), plus 4 KiB: at exactly that size libzmq 4.3.4 cut
     * the learners' ring connections in test_multihost (though not in a two-socket test of it) */
    int64_t max_frame = (int64_t)sizeof(CollHeader) + (int64_t)c->seg_floats * (int64_t)sizeof(float) + 4096;
    rc = coll__sockopts(c->rx, c->timeout_s, max_frame, COLL_RCVHWM, err);
    if (!rc && v6) rc = coll__sockopt(c->rx, ZMQ_IPV6, "ZMQ_IPV6", &one, sizeof one, err);
    if (!rc) rc = coll__curve_server(c->rx, o, err);
    if (!rc && zmq_bind(c->rx, addr))
        rc = err_set(err, ERR_IO, "collective: rank %d cannot bind its ring socket at %s: %s", c->rank, addr,
                     zmq_strerror(zmq_errno()));
    size_t len = sizeof c->my_ep;
    if (!rc && zmq_getsockopt(c->rx, ZMQ_LAST_ENDPOINT, c->my_ep, &len))
        rc = err_set(err, ERR_IO, "collective: ZMQ_LAST_ENDPOINT: %s", zmq_strerror(zmq_errno()));
    return rc;
}

/* The successor's endpoint as this rank connects to it: a wildcard host (rank 0 bound on every interface) becomes the
 * host this rank reaches rank 0 by. */
static void peer_endpoint(const char *ep, const char *star, char *out, size_t n) {
    char host[256], port[32], shost[256], sport[32];
    if (tcp_split(ep, host, sizeof host, port, sizeof port) || !is_wildcard(host) ||
        tcp_split(star, shost, sizeof shost, sport, sizeof sport)) {
        snprintf(out, n, "%s", ep);
        return;
    }
    snprintf(out, n, strchr(shost, ':') ? "tcp://[%s]:%s" : "tcp://%s:%s", shost, port);
}

/* ---------------------------------------------------------------------------------------------- receiving */

#define COLL_LOST_GRACE_MS 200

static void drain_more(void *sock, zmq_msg_t *m) {
    while (zmq_msg_more(m)) {
        zmq_msg_close(m);
        zmq_msg_init(m);
        if (zmq_msg_recv(m, sock, 0) < 0) break;
    }
}

/* One routed message from a ROUTER (rid frame, then the first frame into *m; the rest dropped unless keep: the ring's
 * data frame follows its header). 0, or -1 when there was none. */
static int recv_routed(void *sock, char rid[32], size_t *rid_len, zmq_msg_t *m, int keep) {
    zmq_msg_t id;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, sock, ZMQ_DONTWAIT) < 0) { zmq_msg_close(&id); return -1; }
    size_t l = zmq_msg_size(&id);
    *rid_len = l < 32 ? l : 32;
    memcpy(rid, zmq_msg_data(&id), *rid_len);
    int more = zmq_msg_more(&id);
    zmq_msg_close(&id);
    zmq_msg_init(m);
    if (!more || zmq_msg_recv(m, sock, 0) < 0) { zmq_msg_close(m); return -1; }
    if (!keep) drain_more(sock, m);
    return 0;
}

/* Rank 0: a frame on the star socket while a ring operation waits. Ranks r > 0 send nothing there after the join: a
 * HELLO sent again is dropped (0); anything else is a rank out of step (a restarted process) and ends the operation
 * with the header check's error. (Ranks r > 0 do not read their star socket during ring waits: what rank 0 sends
 * there is for the next operation, a broadcast say, once rank 0 is done with this one.) */
static int star_frame(CpuColl *c, uint32_t op, char err[ERR_LEN]) {
    zmq_msg_t m;
    char rid[32];
    size_t rl;
    if (recv_routed(c->sock, rid, &rl, &m, 0)) return 0;
    if (!coll__from_learner_key(c, &m, "star socket")) { zmq_msg_close(&m); return 0; }
    if (coll__is_resent_hello(c, &m)) { zmq_msg_close(&m); return 0; }
    CollHeader h;
    int rc = coll__check_header(c, &m, op, (uint64_t)-1, -1, &h, err);
    zmq_msg_close(&m);
    return rc ? rc : err_set(err, ERR_INVAL, "collective %s #%llu: an unexpected frame on rank 0's star socket",
                             coll__op_name(op), (unsigned long long)c->seq);
}

/* The next frame on rx from the linked predecessor (any sender while linking: pred_rid_len 0), before the deadline,
 * into *m. Frames of other connections (a stale process, a stranger) and, with CURVE, of other keys are dropped and
 * counted. 0, ERR_TIMEOUT, ERR_CLOSED (lost group), the idle hook's code, or star_frame's error. */
static int ring_recv(CpuColl *c, int64_t deadline, uint32_t op, zmq_msg_t *m, char err[ERR_LEN]) {
    int64_t grace = 0;
    for (;;) {
        zmq_pollitem_t it[3] = {{c->rx, 0, ZMQ_POLLIN, 0}, {c->sock, 0, ZMQ_POLLIN, 0}, {c->mon, 0, ZMQ_POLLIN, 0}};
        int star = c->rank == 0;                      /* it[1] is watched on rank 0 only (star_frame) */
        if (!star) it[1].events = 0;
        int n = zmq_poll(it, 2, 0);
        if (n == 0) {
            coll__mon_drain(c);
            /* a lost group ends the wait, after a short grace: a peer's last frames come on rx, another connection
             * than the star's whose closing said it went, so they may still be on the way */
            if (c->lost[0] && !grace) grace = clock_ms() + COLL_LOST_GRACE_MS;
            if (c->lost[0] && clock_ms() >= grace) return ERR_CLOSED;
            int64_t left = (grace ? grace : deadline) - clock_ms();
            if (left <= 0) return ERR_TIMEOUT;
            n = zmq_poll(it, c->mon ? 3 : 2, left < 50 ? (long)left : 50);
        }
        if (n < 0 && zmq_errno() != EINTR) return err_set(err, ERR_IO, "collective: zmq_poll: %s", zmq_strerror(zmq_errno()));
        if (n > 0 && (it[1].revents & ZMQ_POLLIN)) {
            int rc = star_frame(c, op, err);
            if (rc) return rc;
        }
        if (n > 0 && (it[0].revents & ZMQ_POLLIN)) {
            char rid[32];
            size_t rl = 0;
            if (recv_routed(c->rx, rid, &rl, m, 1)) continue;
            int mine = !c->pred_rid_len || (rl == c->pred_rid_len && !memcmp(rid, c->pred_rid, rl));
            if (!coll__from_learner_key(c, m, "ring")) { drain_more(c->rx, m); zmq_msg_close(m); continue; }
            if (mine) {
                if (!c->pred_rid_len) { memcpy(c->pred_rid, rid, rl); c->pred_rid_len = rl; }
                return 0;
            }
            const char *a = zmq_msg_gets(m, "Peer-Address");
            c->refused++;
            log_warn_limited(&c->warn_refused, 10000, "collective: rank %d dropped a ring frame from %s: not its ring "
                             "predecessor's link", c->rank, a ? a : "?");
            drain_more(c->rx, m);
            zmq_msg_close(m);
            continue;
        }
        if (n > 0) continue;
        if (c->idle) {
            int rc = c->idle(c->idle_ud);
            if (rc < 0) return rc;
        }
    }
}

/* ---------------------------------------------------------------------------------------------- linking */

int coll__ring_link(CpuColl *c, const CollOptions *o, char (*eps)[COLL_EP_LEN], char err[ERR_LEN]) {
    int succ = (c->rank + 1) % c->world, pred = (c->rank + c->world - 1) % c->world;
    char ep[COLL_EP_LEN + 64];
    peer_endpoint(eps[succ], o->endpoint, ep, sizeof ep);
    int one = 1;
    c->tx = zmq_socket(c->zctx, ZMQ_DEALER);
    if (!c->tx) return err_set(err, ERR_IO, "collective: zmq_socket: %s", zmq_strerror(zmq_errno()));
    int rc = coll__sockopts(c->tx, c->timeout_s, -1, 0, err);
    /* frames still queued when the rank closes (its last forward of an all-gather) are flushed for up to 2 s: the
     * successor may still need them although this rank is done */
    int linger = c->timeout_s * 1000 < 2000 ? (int)(c->timeout_s * 1000) : 2000;
    if (!rc) rc = coll__sockopt(c->tx, ZMQ_LINGER, "ZMQ_LINGER", &linger, sizeof linger, err);
    if (!rc && strchr(ep, '[')) rc = coll__sockopt(c->tx, ZMQ_IPV6, "ZMQ_IPV6", &one, sizeof one, err);
    if (!rc) rc = coll__curve_client(c->tx, o, err);
    if (!rc && zmq_connect(c->tx, ep))
        rc = err_set(err, ERR_IO, "collective: rank %d cannot connect to rank %d's ring socket %s: %s", c->rank, succ,
                     ep, zmq_strerror(zmq_errno()));
    if (!rc) rc = coll__send(c, c->tx, NULL, 0, OP_RING_HELLO, &c->group, sizeof c->group, err);
    int64_t deadline = clock_ms() + (int64_t)(c->timeout_s * 1000);
    c->pred_rid_len = 0;
    while (!rc) {                                   /* the predecessor's hello of this group (older ones dropped) */
        zmq_msg_t m;
        rc = ring_recv(c, deadline, OP_RING_HELLO, &m, err);
        if (rc) {
            char who[48];
            snprintf(who, sizeof who, "rank %d (its ring link)", pred);
            return rc == ERR_TIMEOUT || rc == ERR_CLOSED ? coll__timeout_err(c, rc, OP_RING_HELLO, who, err) : rc;
        }
        CollHeader h;
        uint64_t group = 0;
        int bad = coll__check_header(c, &m, OP_RING_HELLO, sizeof group, pred, &h, err);
        if (!bad) memcpy(&group, (const char *)zmq_msg_data(&m) + sizeof h, sizeof group);
        drain_more(c->rx, &m);                      /* a data frame of an older operation: its second part too */
        zmq_msg_close(&m);
        if (!bad && group == c->group) break;
        log_warn("collective: rank %d dropped a ring hello of another group (%s)", c->rank, bad ? err : "stale");
        c->pred_rid_len = 0;
    }
    return rc;
}

void coll__ring_close(CpuColl *c) {
    if (c->rx) zmq_close(c->rx);
    if (c->tx) zmq_close(c->tx);
    c->rx = c->tx = NULL;
}

/* ---------------------------------------------------------------------------------------------- the ring */

typedef struct {
    CpuColl    *c;
    float      *buf;
    const long *b;            /* [W + 1] chunk bounds */
    uint32_t    op;
} Ring;

static int mod(int a, int w) { return ((a % w) + w) % w; }

/* ZeroMQ's I/O thread is done with a frame sent from the caller's buffer. */
static void zc_free(void *data, void *hint) {
    (void)data;
    atomic_fetch_add(&((CpuColl *)hint)->zc_freed, 1);
}

/* Sends floats [lo, hi) of buf to the successor in segments, each as a header frame and a data frame that ZeroMQ
 * sends from buf itself (no copy: ring_settle waits until it is done with them before buf goes back to the caller). */
static int send_range(Ring *r, long lo, long hi, char err[ERR_LEN]) {
    CpuColl *c = r->c;
    for (long i = lo; i < hi; i += c->seg_floats) {
        long k = hi - i < c->seg_floats ? hi - i : c->seg_floats;
        CollHeader h = {COLL_MAGIC, COLL_VERSION, r->op, (uint32_t)c->rank, c->seq, (uint64_t)k * sizeof(float)};
        zmq_msg_t m;
        if (zmq_send(c->tx, &h, sizeof h, ZMQ_SNDMORE) < 0 ||
            zmq_msg_init_data(&m, r->buf + i, (size_t)k * sizeof(float), zc_free, c))
            return err_set(err, ERR_IO, "collective %s #%llu: send failed: %s", coll__op_name(r->op),
                           (unsigned long long)c->seq, zmq_strerror(zmq_errno()));
        c->zc_sent++;
        if (zmq_msg_send(&m, c->tx, 0) < 0) {
            zmq_msg_close(&m);                      /* calls zc_free */
            return err_set(err, ERR_IO, "collective %s #%llu: send failed: %s", coll__op_name(r->op),
                           (unsigned long long)c->seq, zmq_strerror(zmq_errno()));
        }
    }
    return 0;
}

/* Waits until ZeroMQ has released every frame sent from the caller's buffer. After a failure the successor may never
 * take them: the ring's sending socket is closed at once (its queue discarded, which releases them) and the ring is
 * unusable until the ranks re-form. 0, or ERR_TIMEOUT when ZeroMQ holds them past the collective timeout (the buffer
 * must then not be reused: the caller is told, and the process should exit). */
static int ring_settle(CpuColl *c, int failed, char err[ERR_LEN]) {
    if (failed && c->tx && atomic_load(&c->zc_freed) < c->zc_sent) {
        int zero = 0;
        zmq_setsockopt(c->tx, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(c->tx);
        c->tx = NULL;
    }
    int64_t deadline = clock_ms() + (int64_t)(c->timeout_s * 1000) + 1000;
    while (atomic_load(&c->zc_freed) < c->zc_sent) {
        if (clock_ms() > deadline)
            return err_set(err, ERR_TIMEOUT, "collective: ZeroMQ still holds %llu ring frames of rank %d's buffer after "
                           "%.1f s", (unsigned long long)(c->zc_sent - atomic_load(&c->zc_freed)), c->rank, c->timeout_s);
        sched_yield();                              /* microseconds, usually: the last frames are on their way */
    }
    return 0;
}

/* Receives chunk `ch` segment by segment from the predecessor: added into buf (reduce) or stored (gather), each
 * segment forwarded to the successor when `forward`. */
static int recv_chunk(Ring *r, int ch, int reduce, int forward, char err[ERR_LEN]) {
    CpuColl *c = r->c;
    int pred = mod(c->rank - 1, c->world);
    for (long i = r->b[ch]; i < r->b[ch + 1]; i += c->seg_floats) {
        long k = r->b[ch + 1] - i < c->seg_floats ? r->b[ch + 1] - i : c->seg_floats;
        zmq_msg_t m, d;
        int rc = ring_recv(c, clock_ms() + (int64_t)(c->timeout_s * 1000), r->op, &m, err);   /* per frame */
        if (rc) {
            char who[24];
            snprintf(who, sizeof who, "rank %d", pred);
            return rc == ERR_TIMEOUT || rc == ERR_CLOSED ? coll__timeout_err(c, rc, r->op, who, err) : rc;
        }
        CollHeader h;
        rc = coll__check_split_header(c, &m, r->op, (uint64_t)k * sizeof(float), pred, &h, err);
        zmq_msg_init(&d);
        int got = !rc && zmq_msg_recv(&d, c->rx, 0) >= 0;   /* the rest of a multipart message is there already */
        if (!rc && !got)
            rc = err_set(err, ERR_IO, "collective: rank %d lost a data frame: %s", c->rank, zmq_strerror(zmq_errno()));
        if (!rc && (zmq_msg_size(&d) != (size_t)k * sizeof(float) || zmq_msg_more(&d)))
            rc = err_set(err, ERR_INVAL, "collective %s #%llu: a %zu-byte data frame from rank %d for %ld floats",
                         coll__op_name(r->op), (unsigned long long)c->seq, zmq_msg_size(&d), pred, k);
        if (!rc) {
            const char *x = zmq_msg_data(&d);        /* not always float-aligned (ZeroMQ may share a receive buffer) */
            float *y = r->buf + i;
            if (!reduce) memcpy(y, x, (size_t)k * sizeof(float));
            else if ((uintptr_t)x % sizeof(float) == 0)
                for (long t = 0; t < k; t++) y[t] += ((const float *)(const void *)x)[t];
            else
                for (long j = 0; j < k; j += 1024) {
                    float tmp[1024];
                    long q = k - j < 1024 ? k - j : 1024;
                    memcpy(tmp, x + (size_t)j * sizeof(float), (size_t)q * sizeof(float));
                    for (long t = 0; t < q; t++) y[j + t] += tmp[t];
                }
        }
        drain_more(c->rx, got ? &d : &m);           /* whatever is left of the message */
        zmq_msg_close(&d);
        zmq_msg_close(&m);
        if (!rc && forward) rc = send_range(r, i, i + k, err);
        if (rc) return rc;
    }
    return 0;
}

/* Reduce-scatter over the chunks: rank r ends holding chunk r summed in the order r+1, ..., r. */
static int ring_rs(Ring *r, char err[ERR_LEN]) {
    int me = r->c->rank, W = r->c->world;
    r->op = OP_RS;
    int ch = mod(me - 1, W);
    int rc = send_range(r, r->b[ch], r->b[ch + 1], err);
    for (int s = 0; s < W - 1 && !rc; s++) rc = recv_chunk(r, mod(me - s - 2, W), 1, s < W - 2, err);
    return rc;
}

/* All-gather over the chunks: rank r starts with chunk r, ends with all. */
static int ring_ag(Ring *r, char err[ERR_LEN]) {
    int me = r->c->rank, W = r->c->world;
    r->op = OP_AG;
    int rc = send_range(r, r->b[me], r->b[me + 1], err);
    for (int s = 0; s < W - 1 && !rc; s++) rc = recv_chunk(r, mod(me - s - 1, W), 0, s < W - 2, err);
    return rc;
}

/* One operation: a new sequence number, the lost check, the chunk bounds (even: shard each; else n * k / W). */
static int ring_run(CpuColl *c, float *buf, long n, long shard, int phases, char err[ERR_LEN]) {
    c->seq++;
    int rc = coll__check_lost(c, phases == 2 ? OP_AG : OP_RS, err);
    if (rc) return rc;
    long *b = xmalloc((size_t)(c->world + 1) * sizeof *b);
    for (int k = 0; k <= c->world; k++) b[k] = shard >= 0 ? shard * k : (long)((long long)n * k / c->world);
    Ring r = {.c = c, .buf = buf, .b = b};
    if (phases & 1) rc = ring_rs(&r, err);
    if (!rc && (phases & 2)) rc = ring_ag(&r, err);
    xfree(b);
    char e2[ERR_LEN];
    int src = ring_settle(c, rc != 0, rc ? e2 : err);
    return rc ? rc : src;
}

int coll__ring_allreduce(void *impl, float *buf, long n, char err[ERR_LEN]) {
    return ring_run(impl, buf, n, -1, 3, err);
}

int coll__ring_reduce_scatter(void *impl, float *buf, long shard, char err[ERR_LEN]) {
    return ring_run(impl, buf, 0, shard, 1, err);
}

int coll__ring_allgather(void *impl, float *buf, long shard, char err[ERR_LEN]) {
    return ring_run(impl, buf, 0, shard, 2, err);
}
