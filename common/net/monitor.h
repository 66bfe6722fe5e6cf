/* common/net/monitor.h: the peers a server socket turned away before any message (issue 38). libzmq drops a client
 * whose handshake fails — a plaintext client at a CURVE server (mechanism mismatch), a protocol error, a key ZAP
 * refused — before the application sees a byte; its socket monitor still reports it. A NetMonitor is a thread reading
 * one ROUTER's monitor events (libzmq 4.3's v1 monitor: ACCEPTED with the connection's fd, then HANDSHAKE_SUCCEEDED or
 * a HANDSHAKE_FAILED_*, then DISCONNECTED), counting each failure and logging it rate-limited (one line per kind per
 * 10 s, with how many more), naming the peer's address where it is known (getpeername on the fd of the connection
 * accepted last and not yet done; else the bound endpoint).
 * Not here: which keys ZAP lets in (zap.h). */
#ifndef DAPO_NET_MONITOR_H
#define DAPO_NET_MONITOR_H

#include <stdint.h>

#include "core/err.h"

typedef struct NetMonitor NetMonitor;

typedef struct {
    uint64_t accepted;      /* TCP connections accepted */
    uint64_t plaintext;     /* handshakes failed on the security mechanism: a plaintext client at a CURVE server (or
                               the other way round), when this side read the client's greeting first */
    uint64_t protocol;      /* other failed handshakes: protocol errors (garbage, a wrong ZMTP version, ...) and
                               connections closed during the handshake — which is how a plaintext client shows when
                               it read this side's CURVE greeting first and hung up (libzmq reports either) */
    uint64_t auth;          /* handshakes ZAP refused (a key not on the allow-list; zap.h logs the key) */
} NetMonitorStats;

/* Starts monitoring sock (a socket of zctx, called on the thread that owns sock, before it is used elsewhere); name
 * is how the log lines call the server ("coordinator", "weights"). NULL with err when libzmq refuses. */
NetMonitor *net_monitor_start(void *zctx, void *sock, const char *name, char err[ERR_LEN]);

/* The counts so far (safe from any thread). NULL-safe: zeros. */
void net_monitor_stats(const NetMonitor *m, NetMonitorStats *out);

/* Stops the thread and closes its socket; call before zmq_ctx_term of the context. NULL-safe. */
void net_monitor_stop(NetMonitor *m);

#endif
