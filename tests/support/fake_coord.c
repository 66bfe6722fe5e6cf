/* tests/support/fake_coord.c: the scripted fake coordinator (see fake_coord.h). */
#include "tests/support/fake_coord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"

int fake_coord_open(FakeCoord *f, void *zctx, const char *endpoint, char err[ERR_LEN]) {
    memset(f, 0, sizeof *f);
    NetOpts o = {.bind = true};
    f->sock = net_socket(zctx, ZMQ_ROUTER, endpoint, &o, err);
    if (!f->sock) return ERR_IO;
    return net_last_endpoint(f->sock, f->endpoint, sizeof f->endpoint);
}

NetMsg *fake_coord_expect(FakeCoord *f, Dapo__MsgType type, int timeout_ms, int *skipped) {
    int64_t deadline = clock_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - clock_ms();
        if (left <= 0) return NULL;
        net_msg_free(&f->last);
        char err[ERR_LEN];
        int rc = net_recv(f->sock, &f->last, (int)left, 0, err);
        if (rc == 0 && f->last.type == DAPO__MSG_TYPE__MSG_HELLO && ((Dapo__Hello *)f->last.msg)->config_only) {
            fake_coord_welcome(f, 100, 5);          /* a daemon's config probe: no run keys to take */
            continue;
        }
        if (rc == 0 && f->last.type == type) return &f->last;
        if (rc == ERR_VERSION && f->last.type == type && f->last.msg) return &f->last;
        if (skipped && (rc == 0 || rc == ERR_DECODE || rc == ERR_VERSION)) (*skipped)++;
    }
}

int fake_coord_send(FakeCoord *f, const uint8_t *peer, size_t peer_len, Dapo__MsgType type, const ProtobufCMessage *m) {
    return net_send(f->sock, peer, peer_len, type, m, false);
}

int fake_coord_reply(FakeCoord *f, Dapo__MsgType type, const ProtobufCMessage *m) {
    return fake_coord_send(f, f->last.peer, f->last.peer_len, type, m);
}

int fake_coord_send_raw(FakeCoord *f, const void *buf, size_t len) {
    if (zmq_send(f->sock, f->last.peer, f->last.peer_len, ZMQ_SNDMORE) < 0) return -zmq_errno();
    return zmq_send(f->sock, buf, len, 0) < 0 ? -zmq_errno() : 0;
}

int fake_coord_welcome(FakeCoord *f, int heartbeat_ms, double lease_timeout_s) {
    Dapo__Welcome w = DAPO__WELCOME__INIT;
    w.accepted = true;
    w.protocol_version = DAPO_PROTOCOL_VERSION;
    w.run_id = "fake-run";
    w.heartbeat_ms = (uint32_t)heartbeat_ms;
    w.lease_timeout_s = lease_timeout_s;
    return fake_coord_reply(f, DAPO__MSG_TYPE__MSG_WELCOME, &w.base);
}

int fake_coord_run(FakeCoord *f, const char *cmd, char *out, size_t n) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int fd = fileno(p);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    size_t len = 0;
    for (;;) {
        ssize_t k = read(fd, out + len, n - 1 - len);
        if (k > 0) { len += (size_t)k; if (len == n - 1) break; continue; }
        if (k == 0 || (errno != EAGAIN && errno != EINTR)) break;
        fake_coord_expect(f, DAPO__MSG_TYPE__MSG_UNKNOWN, 20, NULL);    /* answers its config probe meanwhile */
    }
    out[len] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void fake_coord_close(FakeCoord *f) {
    net_msg_free(&f->last);
    if (f->sock) zmq_close(f->sock);
    f->sock = NULL;
}
