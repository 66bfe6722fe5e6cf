/* tests/support/fake_coord.h: a scripted fake coordinator for tests of workers and the worker state machine.
 * A ROUTER bound on loopback that the test drives step by step from its own thread: expect a message of a
 * type, reply to its sender, send anything to a peer, or send raw (malformed) frames.
 * Test support only (libdapo_testsup.a, linked into the test programs, never into a daemon). */
#ifndef DAPO_FAKE_COORD_H
#define DAPO_FAKE_COORD_H

#include "net/net.h"

typedef struct {
    void   *sock;
    char    endpoint[128];      /* resolved, e.g. "tcp://127.0.0.1:41234" */
    NetMsg  last;               /* the last expected message (owned; freed by the next expect/close) */
} FakeCoord;

/* Binds a ROUTER on endpoint ("tcp://127.0.0.1:0" for an ephemeral port). 0 or ERR_IO with a message. */
int fake_coord_open(FakeCoord *f, void *zctx, const char *endpoint, char err[ERR_LEN]);
/* Receives messages until one of `type` arrives (others are dropped and counted in *skipped when non-NULL) or
 * timeout_ms passes. A daemon's config probe (Hello.config_only) is answered on the way with an accepting Welcome
 * that carries no config (the daemon keeps its own keys). Returns the message (borrowed, valid until the next expect) or NULL on timeout. */
NetMsg *fake_coord_expect(FakeCoord *f, Dapo__MsgType type, int timeout_ms, int *skipped);
/* Sends m of type to the sender of the last expected message (or to peer/peer_len when given). */
int fake_coord_reply(FakeCoord *f, Dapo__MsgType type, const ProtobufCMessage *m);
int fake_coord_send(FakeCoord *f, const uint8_t *peer, size_t peer_len, Dapo__MsgType type, const ProtobufCMessage *m);
/* Sends raw bytes as the body frame to the last sender (for garbage/truncated-frame tests). */
int fake_coord_send_raw(FakeCoord *f, const void *buf, size_t len);
/* Answers the last Hello with an accepting Welcome (heartbeat_ms, lease_timeout_s as given). */
int fake_coord_welcome(FakeCoord *f, int heartbeat_ms, double lease_timeout_s);
/* Runs a command line through the shell (as tests/testutil.h tu_run: stdout+stderr into out, NUL-terminated; the
 * exit code), answering a daemon's config probes while it runs. */
int fake_coord_run(FakeCoord *f, const char *cmd, char *out, size_t n);
void fake_coord_close(FakeCoord *f);

#endif
