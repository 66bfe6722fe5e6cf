/* services/coordinator/outbox.c: the coordinator's sends, as actions (issue 35). The engine's files never touch a
 * socket: out_send and its siblings encode a message at once (the caller's structures may go away) and append it to
 * c->out; run.c carries the actions out after every event, in order (outbox_flush), and turns a send that failed
 * into an event for the engine (EV_SEND_FAILED). The run directory's files are actions too (metrics rows, event lines,
 * coordinator.json: persist.c writes them). The bottom of the coordinator's files: it calls no other.
 * Not here: the socket (run.c). */
#include <string.h>

#include "core/log.h"
#include "coord.h"

static OutAction *push(Coord *c, OutKind kind) {
    XGROW(c->out, c->nout, c->cap_out, 32);
    OutAction *a = &c->out[c->nout++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->worker = -1;
    return a;
}

/* A frame to send: to workers[worker], or (worker -1) to the peer rid. */
static OutAction *push_send(Coord *c, int worker, Dapo__MsgType type, uint8_t *frame, size_t len, ZcBuf *zb,
                            uint64_t item, uint32_t attempt) {
    OutAction *a = push(c, OUT_SEND);
    a->worker = worker;
    a->type = type;
    a->frame = frame;
    a->len = len;
    a->zb = zb;
    a->item = item;
    a->attempt = attempt;
    return a;
}

static int push_frame(Coord *c, int worker, const uint8_t *rid, size_t rid_len, Dapo__MsgType type,
                      const ProtobufCMessage *m, uint64_t item, uint32_t attempt) {
    size_t len;
    uint8_t *frame = net_encode(type, m, &len);
    if (!frame) {
        log_warn("%s not sent: over the 4 GiB a message can hold", net_type_name(type));
        return ERR_TOO_BIG;
    }
    OutAction *a = push_send(c, worker, type, frame, len, NULL, item, attempt);
    if (rid && rid_len <= sizeof a->rid) {
        memcpy(a->rid, rid, rid_len);
        a->rid_len = rid_len;
    }
    return 0;
}

int out_send(Coord *c, const WorkerEntry *w, Dapo__MsgType type, const ProtobufCMessage *m) {
    return push_frame(c, (int)(w - c->workers), NULL, 0, type, m, 0, 0);
}

int out_send_item(Coord *c, const WorkerEntry *w, Dapo__MsgType type, const ProtobufCMessage *m, uint64_t item,
                  uint32_t attempt) {
    return push_frame(c, (int)(w - c->workers), NULL, 0, type, m, item, attempt);
}

int out_send_peer(Coord *c, const uint8_t *rid, size_t rid_len, Dapo__MsgType type, const ProtobufCMessage *m) {
    return push_frame(c, -1, rid, rid_len, type, m, 0, 0);
}

void out_send_error(Coord *c, const uint8_t *rid, size_t rid_len, int code, Dapo__MsgType in_reply_to,
                    const char *msg) {
    Dapo__ErrorReply e = DAPO__ERROR_REPLY__INIT;
    e.code = code;
    e.message = (char *)msg;
    e.in_reply_to = (uint32_t)in_reply_to;
    out_send_peer(c, rid, rid_len, DAPO__MSG_TYPE__MSG_ERROR, &e.base);
}

uint8_t *out_zc_frame(Coord *c, size_t len, ZcBuf **zb) {
    *zb = NULL;
    for (int i = 0; i < COORD_ZC_BUFS && !*zb; i++)
        if (!atomic_load_explicit(&c->zc[i].busy, memory_order_acquire)) *zb = &c->zc[i];
    if (!*zb) return xmalloc(len ? len : 1);            /* all in flight: a one-off buffer */
    ZcBuf *b = *zb;
    if (b->cap < len) {                                 /* grow (contents need not survive) */
        xfree(b->p);
        b->cap = len + len / 8;
        b->p = xmalloc(b->cap);
    }
    atomic_store_explicit(&b->busy, 1, memory_order_relaxed);   /* ours until sent (or released on failure) */
    return b->p;
}

void out_zc_send(Coord *c, const WorkerEntry *w, Dapo__MsgType type, uint8_t *frame, size_t len, ZcBuf *zb,
                 uint64_t item, uint32_t attempt) {
    push_send(c, (int)(w - c->workers), type, frame, len, zb, item, attempt);
}

/* Tells the workers (learners too, or not) that the coordinator is going away: work in flight is dropped, and they
 * register again when it comes back (their state machine does that on its own). */
void out_tell_stopping(Coord *c, int learners) {
    Dapo__Control m = DAPO__CONTROL__INIT;
    m.cmd = DAPO__CONTROL_CMD__CONTROL_PAUSE;
    m.reason = "coordinator stopping: drop work in flight; register again when it is back";
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].life == WORKER_ALIVE && (learners || c->workers[i].role != DAPO__ROLE__ROLE_LEARNER))
            out_send(c, &c->workers[i], DAPO__MSG_TYPE__MSG_CONTROL, &m.base);
}

void out_exit(Coord *c) {
    if (c->stopping > 1) return;
    c->stopping = 2;
    out_tell_stopping(c, 1);
    push(c, OUT_EXIT);
}

void out_release(void *frame, void *zb) {
    if (zb) atomic_store_explicit(&((ZcBuf *)zb)->busy, 0, memory_order_release);
    else xfree(frame);
}

void out_metrics_row(Coord *c, long step, const Metrics *m) {
    OutAction *a = push(c, OUT_METRICS_ROW);
    a->item = (uint64_t)step;
    a->metrics = xcalloc(1, sizeof *a->metrics);
    for (int i = 0; i < m->n; i++) metrics_set(a->metrics, m->m[i].name, m->m[i].value);
}

void out_metrics_truncate(Coord *c, long step) { push(c, OUT_METRICS_TRUNCATE)->item = (uint64_t)step; }

void out_text(Coord *c, OutKind kind, char *text, long step, uint32_t attempt) {
    OutAction *a = push(c, kind);
    a->text = text;
    a->item = (uint64_t)step;
    a->attempt = attempt;
}

int out_ckpt_then_send(Coord *c, char *text, long step, CkptWrite why, const WorkerEntry *w, Dapo__MsgType type,
                       const ProtobufCMessage *m) {
    size_t len;
    uint8_t *frame = net_encode(type, m, &len);
    if (!frame) {
        xfree(text);
        return ERR_TOO_BIG;
    }
    out_text(c, OUT_CKPT_FILE, text, step, why);
    OutAction *a = &c->out[c->nout - 1];
    a->worker = (int)(w - c->workers);
    a->type = type;
    a->frame = frame;
    a->len = len;
    return 0;
}

void out_action_free(OutAction *a) {
    if (a->frame) out_release(a->frame, a->zb);
    if (a->metrics) metrics_free(a->metrics);
    xfree(a->metrics);
    xfree(a->text);
    a->frame = NULL;
    a->metrics = NULL;
    a->text = NULL;
}

void outbox_clear(Coord *c) {
    for (int i = 0; i < c->nout; i++) out_action_free(&c->out[i]);
    c->nout = 0;
}
