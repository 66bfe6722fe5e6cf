/* common/net/zap.h: the ZAP handler (ZeroMQ RFC 27) that decides which CURVE clients a dapo server lets in
 * (issue 18). One per ZeroMQ context that holds a CURVE server socket (the coordinator's; learner rank 0's weight
 * server and collective share one), started before such a socket binds. It runs in its own thread with its own
 * REP socket on inproc://zeromq.zap.01 of that context, so it answers handshakes whatever the daemon's loop is
 * doing (a learner deep in a step, a coordinator busy with a batch).
 * Our own handler and not czmq's zauth: zauth binds ZAP in czmq's global context (zsys), while the daemons make
 * their own libzmq contexts, so it would authenticate none of their sockets.
 * Rule: a CURVE client is let in when its public key is the content of a *.pub file in the authorized_keys
 * directory, read again at every handshake (a removed file revokes the key from the next connection on). The
 * connection's ZAP user id (the "User-Id" message property) is "NAME FINGERPRINT": the file's name without .pub,
 * which is the worker id the coordinator lets that key register as (registry.c), and curve_fingerprint of the key
 * (the dashboard shows it). A refused key is logged once per key with its fingerprint and the peer address (past
 * 256 distinct keys, one summary line a minute); a file in the directory that is not one key is logged once. Any
 * other mechanism (NULL, PLAIN) is refused. */
#ifndef DAPO_NET_ZAP_H
#define DAPO_NET_ZAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* The ZAP domain (ZMQ_ZAP_DOMAIN) of the learners' collective sockets (common/collective sets the same text): there
 * only keys named for a learner (authorized_keys/learner.pub, learner-NAME.pub) are let in (issue 38); every other
 * server socket uses "dapo". */
#define ZAP_DOMAIN_LEARNERS "dapo-learners"

typedef struct Zap Zap;

/* Starts the handler on zctx (borrowed; it must outlive zap_stop) for the directory dir (copied). NULL with err
 * when the inproc endpoint cannot be bound (another handler on the context) or the thread cannot start. */
Zap *zap_start(void *zctx, const char *dir, char err[ERR_LEN]);

/* Handshakes answered so far: let in, and refused. NULL-safe (0). */
uint64_t zap_accepted(const Zap *z);
uint64_t zap_refused(const Zap *z);

/* The parts of a ROUTER message's NetMsg.peer_key, "NAME FINGERPRINT" (the User-Id this handler gives a client):
 * zap_key_fingerprint the 16 hex digits ("" without CURVE), zap_key_name the name into out (n bytes). */
const char *zap_key_fingerprint(const char *peer_key);
void zap_key_name(const char *peer_key, char *out, size_t n);

/* The role a key's name gives it (dapo-keygen --client NAME): "rollout", "learner" or "verifier" for a name that is
 * the role or the role, '-' and anything (rollout-0, learner-1); NULL for other names. A role key registers only as
 * a worker of its role, and learner rank 0's weight server serves rollout and learner keys only (issue 38). */
const char *zap_key_role(const char *name);

/* Stops the thread and closes its socket. NULL-safe. Call before zmq_ctx_term of its context. */
void zap_stop(Zap *z);

#endif
