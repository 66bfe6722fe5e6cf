/* services/coordinator/view.c: the snapshot the dashboard and /metrics read (view.h; issue 35). The event loop
 * (run.c) publishes it before each HTTP request is answered: /api/status's object and the /metrics text built from
 * the state, the metric history, samples and config borrowed from it, and the control requests as callbacks that
 * hand events to the loop. The dashboard never sees the Coord.
 * Not here: the routes (dashboard.c), the Prometheus text (prom.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "coord.h"
#include "net/monitor.h"
#include "reward/math_dapo.h"

/* A JSON string from n bytes that may be invalid UTF-8 (U+FFFD per maximal invalid subpart, as Python's
 * errors="replace"), cut to at most max bytes at a code point boundary; *cut says whether it was cut. */
json_t *jt_text(const char *s, size_t n, size_t max, int *cut) {
    char *buf = xmalloc(3 * n + 1);
    size_t m = math_dapo_utf8_repair(s, n, buf);
    int was_cut = 0;
    if (m > max) {
        m = max;
        while (m > 0 && ((unsigned char)buf[m] & 0xC0) == 0x80) m--;   /* back to a lead byte */
        was_cut = 1;
    }
    if (cut) *cut = was_cut;
    json_t *j = json_stringn_nocheck(buf, m);
    xfree(buf);
    return j;
}

json_t *jt_str(const char *s) { return jt_text(s ? s : "", s ? strlen(s) : 0, (size_t)-1 / 4, NULL); }

json_t *jt_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* The worker's routing id as text: printable ASCII kept, other bytes as \xNN. */
static void rid_text(const WorkerEntry *w, char *out, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < w->rid_len && k + 5 < n; i++) {
        unsigned char ch = w->rid[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') out[k++] = (char)ch;
        else k += (size_t)snprintf(out + k, n - k, "\\x%02x", ch);
    }
    out[k] = 0;
}

static json_t *status_json(Coord *c) {
    int64_t now = clock_ms();
    json_t *workers = json_array();
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        char rid[4 * NET_PEER_MAX + 1];
        rid_text(w, rid, sizeof rid);
        json_t *o = json_object();
        json_object_set_new(o, "id", jt_str(w->id));
        json_object_set_new(o, "role", json_string(role_name(w->role)));
        json_object_set_new(o, "state", json_string(life_name(w->life)));
        json_object_set_new(o, "policy_version", json_integer(w->policy_version));
        json_object_set_new(o, "last_heartbeat_s", json_real((now - w->last_seen_ms) / 1000.0));
        json_object_set_new(o, "capacity", json_integer(w->capacity));
        json_object_set_new(o, "credit", json_integer(w->credit));
        json_object_set_new(o, "busy", json_integer(w->busy));
        json_object_set_new(o, "load", jt_num(w->load));
        json_object_set_new(o, "rank", json_integer(w->rank));
        json_object_set_new(o, "restarts", json_integer(w->restarts));
        json_object_set_new(o, "build", jt_str(w->build_info));
        json_object_set_new(o, "key", jt_str(w->key));          /* CURVE key fingerprint; "" without CURVE */
        if (w->role == DAPO__ROLE__ROLE_ROLLOUT)                /* issue 42: the weight probe of its last version */
            json_object_set_new(o, "probe", w->probe_diff < 0 ? json_null() :
                                json_pack("{s:f, s:I, s:b}", "max_abs_diff", w->probe_diff, "version",
                                          (json_int_t)w->probe_version, "failed", w->probe_failed));
        if (w->role == DAPO__ROLE__ROLE_LEARNER)                /* its weight server's and collective's (issue 38) */
            json_object_set_new(o, "security", json_pack("{s:I, s:I, s:I}", "handshakes_refused",
                                                         (json_int_t)w->handshakes_refused, "handshakes_failed",
                                                         (json_int_t)w->handshakes_failed, "messages_refused",
                                                         (json_int_t)w->messages_refused));
        /* the peer address, else (ipc: local peers) the routing id; the routing id is not shown otherwise (issue 38:
         * the ROUTER's ids count up, and a client that could read them could try to take the next one) */
        json_object_set_new(o, "address", jt_str(w->address[0] ? w->address : rid));
        json_array_append_new(workers, o);
    }
    json_t *alive = json_object();
    static const Dapo__Role roles[] = {DAPO__ROLE__ROLE_ROLLOUT, DAPO__ROLE__ROLE_VERIFIER, DAPO__ROLE__ROLE_LEARNER};
    for (int i = 0; i < 3; i++)
        json_object_set_new(alive, role_name(roles[i]), json_integer(registry_count(c, roles[i], WORKER_ALIVE)));
    json_t *j = json_object();
    json_object_set_new(j, "run_id", jt_str(c->run_id));
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)c->config_hash);
    json_object_set_new(j, "config_hash", json_string(hash));      /* the run keys' (config_run_keys) */
    /* a resumed run waiting for learner rank 0: its step and version are not restored yet (null, not a false 0) */
    json_object_set_new(j, "resuming", json_boolean(c->ckpt.undecided));
    json_object_set_new(j, "step", c->ckpt.undecided ? json_null() : json_integer(c->step));
    json_object_set_new(j, "policy_version", c->ckpt.undecided ? json_null() : json_integer(c->policy_version));
    json_object_set_new(j, "uptime_s", json_real(coord_run_seconds(c)));                 /* the run's, all processes */
    json_object_set_new(j, "coordinator_uptime_s", json_real((now - c->started_ms) / 1000.0));
    json_object_set_new(j, "alive", alive);
    json_object_set_new(j, "workers", workers);
    json_object_set_new(j, "messages_in", json_integer((json_int_t)c->msgs_in));
    json_object_set_new(j, "messages_bad", json_integer((json_int_t)c->msgs_bad));
    json_object_set_new(j, "heap_bytes", json_integer((json_int_t)xmalloc_used()));
    json_object_set_new(j, "paused", json_boolean(c->paused));
    json_object_set_new(j, "stopping", json_boolean(c->stopping));
    json_object_set_new(j, "status_line", jt_str(c->status_line));
    json_object_set_new(j, "controls_enabled", json_boolean(c->token != NULL));   /* cluster.token_file is set */
    NetMonitorStats ms;
    net_monitor_stats(c->monitor, &ms);
    /* counts of this coordinator process (counted_for_s: since it started; a restart starts them at 0) */
    json_object_set_new(j, "security", json_pack("{s:b, s:b, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                                                 "curve", c->keys.on, "insecure", c->cfg.insecure,
                                                 "counted_for_s", (clock_ms() - c->started_ms) / 1000.0,
                                                 "handshakes_accepted", (json_int_t)zap_accepted(c->zap),
                                                 "handshakes_refused", (json_int_t)zap_refused(c->zap),
                                                 "handshakes_plaintext", (json_int_t)ms.plaintext,
                                                 "handshakes_failed", (json_int_t)ms.protocol,
                                                 "connections_accepted", (json_int_t)ms.accepted,
                                                 "hellos_refused", (json_int_t)c->hellos_refused,
                                                 "messages_foreign", (json_int_t)c->msgs_foreign,
                                                 "messages_wrong_role", (json_int_t)c->msgs_wrong_role,
                                                 "messages_unregistered", (json_int_t)c->msgs_unregistered));
    json_t *ev = json_array();                    /* newest first */
    for (int i = 0; i < COORD_EVENTS && i < c->nevents; i++) {
        int k = (c->nevents - 1 - i) % COORD_EVENTS;
        json_array_append_new(ev, json_pack("{s:f, s:I, s:s}", "t", c->event_t[k], "step", (json_int_t)c->event_step[k],
                                            "text", c->events[k]));
    }
    json_object_set_new(j, "events", ev);
    json_object_set_new(j, "history", json_integer(c->nhistory));
    json_object_set_new(j, "control", json_boolean(c->token != NULL));
    engine_status_fill(c, j);
    if (c->engine) {                      /* the checkpoint's state (ckpt.c) and the steps both sides hold */
        const CkptState *k = &c->ckpt;
        json_object_set_new(j, "checkpoint", json_pack("{s:s, s:o, s:o}", "state", ckpt_phase_name(ckpt_phase(c)),
                                                       "saved_step", k->has_saved ? json_integer(k->saved.step) : json_null(),
                                                       "pending_step", k->has_pending ? json_integer(k->pending.step)
                                                                                       : json_null()));
    }             /* phase and group accounting (steps.c) */
    return j;
}

/* A control request as an event, through run.c's entry (logged, its actions carried out at once); engine_on alone
 * where there is no loop. */
static int view_control(void *ctx, ViewControl what, int *paused, char err[ERR_LEN]) {
    Coord *c = ctx;
    static const EventKind kinds[] = {[VIEW_PAUSE] = EV_PAUSE, [VIEW_RESUME] = EV_RESUME,
                                      [VIEW_CHECKPOINT] = EV_CHECKPOINT, [VIEW_STOP] = EV_STOP};
    Event ev = {.kind = kinds[what]};
    int rc = c->control ? c->control(c, &ev, err) : engine_on(c, &ev, err);
    if (paused) *paused = c->paused;
    return rc;
}

static void view_stop(void *ctx) { view_control(ctx, VIEW_STOP, NULL, NULL); }

void view_publish(Coord *c, CoordView *v) {
    memset(v, 0, sizeof *v);
    v->status = status_json(c);
    v->prometheus = prom_text(c, &v->prometheus_len);
    v->run_id = c->run_id;
    v->history = c->history;
    v->nhistory = c->nhistory;
    v->len_hist = c->len_hist;
    v->nlen_hist = c->nlen_hist;
    v->samples = c->samples;
    v->nsamples = c->nsamples;
    v->sample_next = c->sample_next;
    v->config_yaml = c->config_yaml;
    v->token = c->token;
    v->ready = c->ready;
    v->failed = engine_phase(c) == PH_FAILED;
    v->http_public = c->http_public;
    v->paused = c->paused;
    v->control = view_control;
    v->stop = view_stop;
    v->ctx = c;
}

void view_release(CoordView *v) {
    json_decref(v->status);
    xfree(v->prometheus);
    v->status = NULL;
    v->prometheus = NULL;
}
