/* tests/curve_client.h: an outsider's client for the CURVE tests (issue 18): a DEALER on its own context (a CURVE
 * client when keys are given), one message, and whether anything at all came back. Header-only (after <zmq.h> and
 * net/net.h); no cmocka calls, so it also runs in a forked child (test_multihost's intruder namespace). */
#ifndef DAPO_TESTS_CURVE_CLIENT_H
#define DAPO_TESTS_CURVE_CLIENT_H

#include <string.h>

/* A DEALER on ctx connected to ep: routing id rid (NULL: ZeroMQ's), a CURVE client of server_pub with the pair
 * pub/sec when server_pub is given (40-character Z85 each). NULL when the connect fails. */
static inline void *tu_dealer(void *ctx, const char *ep, const char *rid, const char *server_pub, const char *pub,
                              const char *sec) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (rid) zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, strlen(rid));
    if (server_pub) {
        zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_pub, 40);
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40);
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40);
    }
    if (zmq_connect(s, ep) != 0) { zmq_close(s); return NULL; }
    return s;
}

/* Sends m (of type) from a fresh DEALER (as tu_dealer, routing id "intruder") and waits up to ms: 1 when anything
 * came back, 0 when nothing did, -1 when the socket could not connect. */
static inline int tu_answered(const char *ep, const char *server_pub, const char *pub, const char *sec,
                              Dapo__MsgType type, const ProtobufCMessage *m, int ms) {
    void *ctx = zmq_ctx_new(), *s = tu_dealer(ctx, ep, "intruder", server_pub, pub, sec);
    int got = -1;
    if (s) {
        net_send(s, NULL, 0, type, m, true);
        zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
        got = zmq_poll(&it, 1, ms) > 0;
        zmq_close(s);
    }
    zmq_ctx_term(ctx);
    return got;
}

/* A Hello of this build's protocol for worker id in role. */
static inline Dapo__Hello tu_hello(const char *id, Dapo__Role role, uint32_t capacity) {
    Dapo__Hello h = DAPO__HELLO__INIT;
    h.protocol_version = DAPO_PROTOCOL_VERSION;
    h.role = role;
    h.worker_id = (char *)id;
    h.capacity = capacity;
    return h;
}

#endif
