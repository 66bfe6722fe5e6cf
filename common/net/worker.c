/* common/net/worker.c: the worker protocol state machine (see worker.h). */
#include "net/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/log.h"

#define HELLO_RETRY_MS 1000

struct Worker {
    void          *sock;
    void          *zctx;             /* borrowed: the socket is made again on it (reopen) */
    NetOpts        no;               /* the socket's options (its routing id is worker_id) */
    WorkerOpts     o;
    char          *worker_id, *coordinator, *build_info, *run_config;
    WorkerState    state;
    Dapo__Welcome *welcome;          /* owned; the current session's */
    int            sessions;
    int64_t        last_rx_ms;       /* last message from the coordinator */
    int64_t        next_hb_ms, next_hello_ms;
    uint64_t       hb_seq;
    uint64_t       sec[3];           /* worker_set_security: handshakes refused, failed; messages refused */
    uint32_t       busy, pending_credit;   /* pending_credit: freed slots not yet announced (queue full, not READY) */
    uint64_t       full_waits;       /* worker_send waits on a full send queue */
    int64_t        policy_version;
    int64_t        coord_version;    /* the coordinator's, from Welcome / Heartbeat */
    uint32_t       incarnation;      /* of the weights this worker holds (worker_set_incarnation) */
    uint32_t       coord_incarnation;   /* the run's, from Welcome / Heartbeat */
    int            fresh;            /* Hello.fresh (worker_set_fresh) */
    uint64_t       nonce, attempt;   /* Hello.nonce (this process) and .attempt (+1 at every reconnect) */
    int64_t        connecting_since, next_warn_ms;   /* for "no answer from the coordinator" warnings */
    char           health_file[1024];
    int64_t        next_health_ms;   /* when health_file is touched next */
    int            health_warned;
};

static int send_hello(Worker *w) {
    Dapo__Hello h = DAPO__HELLO__INIT;
    h.protocol_version = DAPO_PROTOCOL_VERSION;
    h.role = w->o.role;
    h.worker_id = w->worker_id;
    h.capacity = w->o.capacity;
    h.capacity_tokens = w->o.capacity_tokens;
    h.policy_version = w->policy_version;
    h.build_info = w->build_info;
    h.run_config = w->run_config;
    h.rank = w->o.rank;
    h.world_size = w->o.world_size;
    h.run_id = (char *)(w->welcome && w->welcome->run_id ? w->welcome->run_id : "");
    h.incarnation = w->incarnation;
    h.fresh = w->fresh != 0;
    h.restarts = w->o.restarts;
    h.nonce = w->nonce;
    h.attempt = w->attempt;
    h.config_only = w->o.config_only != 0;
    w->next_hello_ms = clock_ms() + HELLO_RETRY_MS;
    return net_send(w->sock, NULL, 0, DAPO__MSG_TYPE__MSG_HELLO, &h.base, true);
}

Worker *worker_open(void *zctx, const WorkerOpts *o, char err[ERR_LEN]) {
    Worker *w = xcalloc(1, sizeof *w);
    w->o = *o;
    if (w->o.heartbeat_ms <= 0) w->o.heartbeat_ms = 1000;
    if (w->o.lease_timeout_s <= 0) w->o.lease_timeout_s = 10;
    w->worker_id = xstrdup(o->worker_id ? o->worker_id : "worker");
    w->coordinator = xstrdup(o->coordinator ? o->coordinator : "");
    w->build_info = xstrdup(o->build_info ? o->build_info : "");
    w->run_config = xstrdup(o->run_config ? o->run_config : "");
    w->o.run_config = w->o.build_info = NULL;          /* the caller's: this worker keeps its own copies */
    w->policy_version = o->policy_version;
    w->fresh = o->fresh;
    w->coord_version = -1;
    w->nonce = clock_nonce(w);
    w->attempt = 1;
    w->connecting_since = clock_ms();
    w->next_warn_ms = w->connecting_since + 5000;
    if (o->health_file && strlen(o->health_file) >= sizeof w->health_file) {
        err_set(err, ERR_INVAL, "cluster.health_file: path longer than %zu bytes", sizeof w->health_file - 1);
        worker_close(w, NULL);
        return NULL;
    }
    snprintf(w->health_file, sizeof w->health_file, "%s", o->health_file ? o->health_file : "");
    /* no routing id of its own: the coordinator's ROUTER gives each connection one no client can choose, and the
     * Hello names the worker (a client can then neither pose as another worker's connection nor displace it) */
    w->no = (NetOpts){.max_msg_bytes = o->max_msg_bytes, .curve = o->curve};
    w->zctx = zctx;
    w->sock = net_socket(zctx, ZMQ_DEALER, w->coordinator, &w->no, err);
    if (!w->sock) { worker_close(w, NULL); return NULL; }
    w->state = WORKER_CONNECTING;
    w->last_rx_ms = clock_ms();
    int rc = send_hello(w);
    if (rc && rc != ERR_AGAIN) log_warn("%s: hello not sent: %s", w->worker_id, err_str(rc));
    return w;
}

static void reconnect(Worker *w, const char *why) {
    if (w->state == WORKER_READY) {
        log_warn("%s: %s; registering again", w->worker_id, why);
        w->attempt++;               /* a new registration: Hellos of the old attempt still queued are duplicates */
        w->connecting_since = clock_ms();
        w->next_warn_ms = w->connecting_since + 5000;
    }
    w->state = WORKER_CONNECTING;
    w->next_hello_ms = 0;           /* at once */
}

/* A new socket to the coordinator (net_socket_reopen: a worker whose key was missing from authorized_keys for a
 * while gets in once it is back); a Hello goes at once. */
static void reopen(Worker *w) {
    char err[ERR_LEN];
    if (net_socket_reopen(&w->sock, w->zctx, ZMQ_DEALER, w->coordinator, &w->no, err))
        log_warn("%s: %s", w->worker_id, err);
    else
        w->next_hello_ms = 0;
}

static int send_credit(Worker *w, uint32_t n) {
    Dapo__Credit c = DAPO__CREDIT__INIT;
    c.credits = n;
    return net_send(w->sock, NULL, 0, DAPO__MSG_TYPE__MSG_CREDIT, &c.base, true);
}

/* Sends the credit not yet announced (pending_credit), when READY. A Credit that finds the send queue full stays
 * pending and goes with the next try (worker_poll's timers, the next worker_add_credit): a dropped Credit would
 * shrink the coordinator's view of this worker's room for good. */
static int flush_credit(Worker *w) {
    if (w->state != WORKER_READY || !w->pending_credit) return 0;
    int rc = send_credit(w, w->pending_credit);
    if (rc == 0) w->pending_credit = 0;
    return rc == ERR_AGAIN ? 0 : rc;
}

/* Handles a protocol message; returns 1 when it is work for the caller, 0 when consumed, <0 refused. */
static int on_message(Worker *w, NetMsg *m, char err[ERR_LEN]) {
    w->last_rx_ms = clock_ms();
    switch (m->type) {
    case DAPO__MSG_TYPE__MSG_WELCOME: {
        Dapo__Welcome *wel = (Dapo__Welcome *)m->msg;
        if (wel->attempt && wel->attempt != w->attempt) return 0;   /* answers a Hello of an older attempt */
        if (w->state == WORKER_READY && wel->attempt) return 0;      /* a resent Hello's duplicate Welcome */
        if (!wel->accepted) {
            w->state = WORKER_REFUSED;
            return err_set(err, ERR_INVAL, "coordinator refused %s: %s", w->worker_id, wel->reason);
        }
        if (w->welcome) protobuf_c_message_free_unpacked(&w->welcome->base, NULL);
        w->welcome = wel;
        m->msg = NULL;               /* kept */
        w->coord_version = wel->policy_version;
        w->coord_incarnation = wel->incarnation;
        if (w->o.config_only) { w->state = WORKER_READY; return 0; }   /* the probe's answer: nothing registered */
        if (wel->heartbeat_ms) w->o.heartbeat_ms = (int)wel->heartbeat_ms;
        if (wel->lease_timeout_s > 0) w->o.lease_timeout_s = wel->lease_timeout_s;
        w->state = WORKER_READY;
        w->sessions++;
        w->next_hb_ms = clock_ms() + w->o.heartbeat_ms;
        log_info("%s: registered with %s (run %s, session %d)", w->worker_id, w->coordinator,
                 wel->run_id[0] ? wel->run_id : "-", w->sessions);
        /* the coordinator starts this session's credit from zero: announce the free capacity (kept pending
         * while the send queue is full) */
        w->pending_credit = w->o.capacity > w->busy ? w->o.capacity - w->busy : 0;
        flush_credit(w);
        return 0;
    }
    case DAPO__MSG_TYPE__MSG_HEARTBEAT:
        w->coord_version = ((Dapo__Heartbeat *)m->msg)->policy_version;
        w->coord_incarnation = ((Dapo__Heartbeat *)m->msg)->incarnation;
        return 0;
    case DAPO__MSG_TYPE__MSG_ERROR: {
        Dapo__ErrorReply *e = (Dapo__ErrorReply *)m->msg;
        if (e->code == ERR_NOTFOUND) { reconnect(w, "coordinator does not know this worker"); return 0; }
        log_warn("%s: coordinator error %d on %s: %s", w->worker_id, e->code,
                 net_type_name((Dapo__MsgType)e->in_reply_to), e->message);
        return 0;
    }
    default:
        if (w->state != WORKER_READY) {
            log_warn("%s: %s before registration, dropped", w->worker_id, net_type_name(m->type));
            return 0;
        }
        return 1;
    }
}

/* The liveness file: rewritten with the worker's state ("ready" once registered, else "connecting"), so its mtime
 * is now; a failure is logged once (the probe then restarts us, which is what a daemon that cannot write its own
 * health file needs anyway). */
static void touch_health(Worker *w, int64_t now) {
    if (!w->health_file[0] || now < w->next_health_ms) return;
    w->next_health_ms = now + 1000;
    int fd = open(w->health_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const char *state = w->state == WORKER_READY && !w->o.config_only ? "ready\n" : "connecting\n";     /* for a readiness probe */
    if (fd >= 0 && write(fd, state, strlen(state)) == (ssize_t)strlen(state)) {
        close(fd);
        w->health_warned = 0;
        return;
    }
    if (!w->health_warned)
        log_warn("%s: cannot write cluster.health_file %s: %s", w->worker_id, w->health_file, strerror(errno));
    w->health_warned = 1;
    if (fd >= 0) close(fd);
}

/* Sends what the schedule says is due. */
static void run_timers(Worker *w) {
    int64_t now = clock_ms();
    touch_health(w, now);
    if (w->state == WORKER_CONNECTING && now >= w->next_hello_ms) {
        int rc = send_hello(w);
        if (rc && rc != ERR_AGAIN) log_warn("%s: hello not sent: %s", w->worker_id, err_str(rc));
    }
    if (w->state == WORKER_CONNECTING && now >= w->next_warn_ms) {   /* issue 18: say it, every few seconds */
        int curve = w->o.curve && w->o.curve->on;
        log_warn("%s: no answer from the coordinator at %s for %.0f s (cluster.coordinator: is it up and reachable? %s)",
                 w->worker_id, w->coordinator, (now - w->connecting_since) / 1000.0,
                 curve ? "CURVE is on: is cluster.curve.server_public_key the coordinator's, and this worker's public "
                         "key in its authorized_keys under this worker's id?"
                       : "CURVE is off here: if the coordinator uses CURVE, set cluster.curve.*");
        w->next_warn_ms = now + 10000;
        reopen(w);
    }
    if (w->state != WORKER_READY || w->o.config_only) return;
    flush_credit(w);
    if (now - w->last_rx_ms > (int64_t)(w->o.lease_timeout_s * 1000)) {
        reconnect(w, "coordinator silent past the lease timeout");
        return;
    }
    if (now >= w->next_hb_ms) {
        Dapo__Heartbeat hb = DAPO__HEARTBEAT__INIT;
        hb.seq = ++w->hb_seq;
        hb.policy_version = w->policy_version;
        hb.incarnation = w->incarnation;
        hb.busy = w->busy;
        hb.load = w->o.capacity ? (double)w->busy / w->o.capacity : 0;
        hb.handshakes_refused = w->sec[0];
        hb.handshakes_failed = w->sec[1];
        hb.messages_refused = w->sec[2];
        net_send(w->sock, NULL, 0, DAPO__MSG_TYPE__MSG_HEARTBEAT, &hb.base, true);
        w->next_hb_ms = now + w->o.heartbeat_ms;
    }
}

int worker_poll(Worker *w, NetMsg *out, int timeout_ms, char err[ERR_LEN]) {
    if (w->state == WORKER_REFUSED) return err_set(err, ERR_INVAL, "%s: refused by the coordinator", w->worker_id);
    int64_t deadline = clock_ms() + (timeout_ms > 0 ? timeout_ms : 0), version = w->coord_version;
    uint32_t inc = w->coord_incarnation;
    for (;;) {
        run_timers(w);
        int64_t now = clock_ms();
        int64_t next = w->state == WORKER_READY ? w->next_hb_ms : w->next_hello_ms;
        int64_t wait = (deadline < next ? deadline : next) - now;
        if (wait < 0) wait = 0;
        char rerr[ERR_LEN];
        int rc = net_recv(w->sock, out, (int)wait ? (int)wait : 0, (size_t)w->o.max_msg_bytes, rerr);
        if (rc == 0) {
            int r = on_message(w, out, err);
            if (r != 0) return r;        /* work (1) or refusal (<0); out keeps the message on 1 */
            net_msg_free(out);
            if (w->coord_version > version || w->coord_incarnation != inc) return 0;   /* new weights: fetch them now */
        } else if (rc == ERR_VERSION && out->type == DAPO__MSG_TYPE__MSG_WELCOME && out->msg) {
            Dapo__Welcome *wel = (Dapo__Welcome *)out->msg;
            w->state = WORKER_REFUSED;
            rc = err_set(err, ERR_VERSION, "coordinator refused %s: %s (%s)", w->worker_id,
                         wel->reason && wel->reason[0] ? wel->reason : "protocol version mismatch", rerr);
            net_msg_free(out);
            return rc;
        } else if (rc == ERR_DECODE || rc == ERR_TOO_BIG || rc == ERR_VERSION) {
            log_warn("%s: dropped a bad frame from the coordinator: %s", w->worker_id, rerr);
            net_msg_free(out);
        } else if (rc != ERR_TIMEOUT && rc != ERR_AGAIN) {
            return err_set(err, rc, "%s: receive failed: %s", w->worker_id, rerr);
        }
        if (clock_ms() >= deadline) {
            run_timers(w);
            return 0;
        }
    }
}

int worker_send(Worker *w, Dapo__MsgType type, const ProtobufCMessage *m) {
    int64_t limit = w->o.send_wait_ms > 0 ? w->o.send_wait_ms : (int64_t)(w->o.lease_timeout_s * 1000);
    int64_t end = clock_ms() + limit;
    for (;;) {
        int rc = net_send(w->sock, NULL, 0, type, m, true);
        if (rc != ERR_AGAIN || w->state != WORKER_READY) return rc;   /* not registered: nothing holds a lease */
        /* The send queue is at ZeroMQ's high-water mark (the coordinator reads slower than results come): wait for
         * room instead of dropping a result whose lease our heartbeats would keep renewing. */
        int64_t left = end - clock_ms();
        if (left <= 0) {
            /* nothing of ours was read for that long: the coordinator is gone or stuck, and has stopped counting
             * our heartbeats; register again (and send without waiting until then) */
            log_warn("%s: %s not sent: the send queue stayed full for %lld ms", w->worker_id, net_type_name(type),
                     (long long)limit);
            reconnect(w, "send queue full past the wait limit");
            return ERR_AGAIN;
        }
        w->full_waits++;
        zmq_pollitem_t it = {.socket = w->sock, .events = ZMQ_POLLOUT};
        if (zmq_poll(&it, 1, (long)(left < 100 ? left : 100)) < 0 && zmq_errno() != EINTR)
            return -zmq_errno();
    }
}

int worker_add_credit(Worker *w, uint32_t n) {
    uint64_t total = (uint64_t)w->pending_credit + n;
    w->pending_credit = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    return flush_credit(w);              /* not READY: announced with the credit that follows the next Welcome */
}

uint64_t worker_full_waits(const Worker *w) { return w->full_waits; }

void worker_set_security(Worker *w, uint64_t handshakes_refused, uint64_t handshakes_failed, uint64_t messages_refused) {
    w->sec[0] = handshakes_refused;
    w->sec[1] = handshakes_failed;
    w->sec[2] = messages_refused;
}

void worker_set_status(Worker *w, uint32_t busy, int64_t policy_version) {
    w->busy = busy;
    w->policy_version = policy_version;
}

WorkerState worker_state(const Worker *w) { return w->state; }

const char *worker_state_name(WorkerState s) {
    static const char *names[] = {"connecting", "ready", "refused", "closed"};
    return (unsigned)s < 4 ? names[s] : "?";
}

const Dapo__Welcome *worker_welcome(const Worker *w) { return w->welcome; }
int worker_sessions(const Worker *w) { return w->sessions; }
int64_t worker_coordinator_version(const Worker *w) { return w->coord_version; }
uint32_t worker_coordinator_incarnation(const Worker *w) { return w->coord_incarnation; }
void worker_set_incarnation(Worker *w, uint32_t incarnation) { w->incarnation = incarnation; }
void worker_set_fresh(Worker *w, int fresh) { w->fresh = fresh; }
void *worker_socket(Worker *w) { return w->sock; }

void worker_close(Worker *w, const char *reason) {
    if (!w) return;
    if (w->sock) {
        if (w->state == WORKER_READY && !w->o.config_only) {
            Dapo__Goodbye g = DAPO__GOODBYE__INIT;
            g.reason = (char *)(reason ? reason : "shutdown");
            net_send(w->sock, NULL, 0, DAPO__MSG_TYPE__MSG_GOODBYE, &g.base, true);
            int linger = 500;        /* let the goodbye leave before the socket goes */
            zmq_setsockopt(w->sock, ZMQ_LINGER, &linger, sizeof linger);
        }
        zmq_close(w->sock);
    }
    w->state = WORKER_CLOSED;
    if (w->welcome) protobuf_c_message_free_unpacked(&w->welcome->base, NULL);
    xfree(w->worker_id);
    xfree(w->coordinator);
    xfree(w->build_info);
    xfree(w->run_config);
    xfree(w);
}
