/* common/net/monitor.c: the socket-monitor thread of a server socket (monitor.h). */
#include "net/monitor.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <zmq.h>

#include "core/log.h"

#define PENDING 64            /* connections accepted and not yet through their handshake, remembered for the address */

typedef struct { int fd; char addr[64]; } Pending;

struct NetMonitor {
    void          *pair;
    pthread_t      th;
    atomic_int     stop;
    atomic_ullong  accepted, plaintext, protocol, auth;
    char           name[32], endpoint[128];
    Pending        pending[PENDING];
    int            npending;
    LogLimit       warn_plaintext, warn_protocol;
};

/* "IP:PORT" of the peer of a connected socket fd, or "" when the fd is gone. */
static void peer_of(int fd, char out[64]) {
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "";
    out[0] = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &n)) return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        snprintf(out, 64, "%s:%u", ip, ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        snprintf(out, 64, "[%s]:%u", ip, ntohs(a->sin6_port));
    }
}

static void forget(NetMonitor *m, int k) {
    m->pending[k] = m->pending[--m->npending];
}

/* The address of the connection most likely behind a handshake event (the one accepted last and still pending),
 * which is done with: "" when none is known. */
static void take_latest(NetMonitor *m, char out[64]) {
    out[0] = 0;
    if (!m->npending) return;
    snprintf(out, 64, "%s", m->pending[m->npending - 1].addr);
    m->npending--;
}

static void on_event(NetMonitor *m, uint16_t event, uint32_t value) {
    char addr[64];
    switch (event) {
    case ZMQ_EVENT_ACCEPTED:
        atomic_fetch_add(&m->accepted, 1);
        if (m->npending == PENDING) forget(m, 0);
        m->pending[m->npending].fd = (int)value;
        peer_of((int)value, m->pending[m->npending].addr);
        m->npending++;
        break;
    case ZMQ_EVENT_DISCONNECTED:
        for (int k = 0; k < m->npending; k++)
            if (m->pending[k].fd == (int)value) { forget(m, k); break; }
        break;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        take_latest(m, addr);
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:          /* ZAP refused the key; zap.c logged it with the fingerprint */
        take_latest(m, addr);
        atomic_fetch_add(&m->auth, 1);
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        take_latest(m, addr);
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
            atomic_fetch_add(&m->plaintext, 1);
            log_warn_limited(&m->warn_plaintext, 10000, "%s: refused a client from %s: it does not speak this "
                             "socket's security mechanism (a plaintext client at a CURVE server, or the other way "
                             "round)", m->name, addr[0] ? addr : m->endpoint);
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
            atomic_fetch_add(&m->protocol, 1);
            log_warn_limited(&m->warn_protocol, 10000, "%s: a handshake from %s failed (ZeroMQ protocol error 0x%x)",
                             m->name, addr[0] ? addr : m->endpoint, value);
        } else {                                   /* value: an errno; a plaintext client that saw this side's
                                                      CURVE greeting and hung up gives EPIPE or ECONNRESET */
            atomic_fetch_add(&m->protocol, 1);
            log_warn_limited(&m->warn_protocol, 10000, "%s: a handshake from %s failed: %s (a client of another "
                             "security mechanism hangs up so, as does one that gave up)", m->name,
                             addr[0] ? addr : m->endpoint, strerror((int)value));
        }
        break;
    default:
        break;
    }
}

static void *run(void *arg) {
    NetMonitor *m = arg;
    while (!atomic_load(&m->stop)) {
        zmq_pollitem_t it = {m->pair, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 200) <= 0) {
            log_limit_flush(&m->warn_plaintext, "refused clients that do not speak the security mechanism");
            log_limit_flush(&m->warn_protocol, "failed handshakes");
            continue;
        }
        zmq_msg_t head, where;
        zmq_msg_init(&head);
        zmq_msg_init(&where);
        if (zmq_msg_recv(&head, m->pair, 0) >= 6 && zmq_msg_more(&head) && zmq_msg_recv(&where, m->pair, 0) >= 0) {
            const uint8_t *d = zmq_msg_data(&head);
            uint16_t event;
            uint32_t value;
            memcpy(&event, d, 2);                  /* v1 monitor: native-endian u16 event, u32 value */
            memcpy(&value, d + 2, 4);
            if (!m->endpoint[0])
                snprintf(m->endpoint, sizeof m->endpoint, "%.*s", (int)zmq_msg_size(&where),
                         (const char *)zmq_msg_data(&where));
            on_event(m, event, value);
        }
        zmq_msg_close(&head);
        zmq_msg_close(&where);
    }
    return NULL;
}

NetMonitor *net_monitor_start(void *zctx, void *sock, const char *name, char err[ERR_LEN]) {
    static atomic_int seq;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://dapo-monitor-%d", atomic_fetch_add(&seq, 1));
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor(sock, ep, events)) {
        err_set(err, ERR_IO, "%s: zmq_socket_monitor: %s", name, zmq_strerror(zmq_errno()));
        return NULL;
    }
    NetMonitor *m = xcalloc(1, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->pair = zmq_socket(zctx, ZMQ_PAIR);
    int zero = 0;
    if (!m->pair || zmq_setsockopt(m->pair, ZMQ_LINGER, &zero, sizeof zero) || zmq_connect(m->pair, ep) ||
        pthread_create(&m->th, NULL, run, m)) {
        err_set(err, ERR_IO, "%s: the socket monitor: %s", name, zmq_strerror(zmq_errno()));
        if (m->pair) zmq_close(m->pair);
        zmq_socket_monitor(sock, NULL, 0);
        xfree(m);
        return NULL;
    }
    return m;
}

void net_monitor_stats(const NetMonitor *m, NetMonitorStats *out) {
    memset(out, 0, sizeof *out);
    if (!m) return;
    NetMonitor *w = (NetMonitor *)m;
    out->accepted = atomic_load(&w->accepted);
    out->plaintext = atomic_load(&w->plaintext);
    out->protocol = atomic_load(&w->protocol);
    out->auth = atomic_load(&w->auth);
}

void net_monitor_stop(NetMonitor *m) {
    if (!m) return;
    atomic_store(&m->stop, 1);
    pthread_join(m->th, NULL);
    zmq_close(m->pair);
    xfree(m);
}
