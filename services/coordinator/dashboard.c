/* services/coordinator/dashboard.c: the coordinator's HTTP routes (served by http.c on the coordinator's loop):
 *   GET  /                        the page (static/index.html; dashboard.js and dashboard.css beside it), embedded
 *                                 into the binary at build time (static_files_coordinator, common/core/embed.h)
 *   GET  /<file>                  any other embedded static file
 *   GET  /js/chart.min.js         Debian's libjs-chart.js, read from disk on each request (DAPO_CHARTJS overrides
 *                                 the path); 503 with a message naming the package when it is missing
 *   GET  /api/status              run, step, workers, paused, status line, heap, messages (JSON)
 *   GET  /api/metrics?since=N&limit=M   the metric history entries [N, N+M) (M <= 1000, default 1000) as
 *                                 objects of verl metric names -> values (non-finite values: null), and "next"
 *   GET  /api/panels?since=N&limit=M   the RL panels' data per training step (panels.c): throughputs, the time
 *                                 split of a step, response-length percentiles and histogram, the dynamic-sampling
 *                                 funnel, the rollout/learner log-prob mismatch
 *   GET  /api/samples             the latest sampled responses, newest first (JSON; text made valid UTF-8)
 *   GET  /api/config              the resolved config (YAML text)
 *   GET  /metrics                 Prometheus text exposition format 0.0.4: the latest value of every step metric
 *                                 (prom_step_name: dapo_<sanitized name>, units as base-unit suffixes), coordinator
 *                                 and per-worker gauges, and the run's accounting as counters (prom_counters)
 *   GET  /healthz                 200 "ok" while the event loop serves, 503 once the run failed (a liveness probe:
 *                                 the kubelet restarts it and it resumes; no token needed, says nothing more)
 *   GET  /readyz                  200 "ready" once the config is loaded, the data read and the checkpoint restored,
 *                                 else 503 (a readiness / startup probe; no token needed)
 *   POST /api/control/{pause,resume,checkpoint,stop}  with `Authorization: Bearer <token>` (cluster.token_file):
 *                                 403 when no token is configured, 401 without / with a wrong token
 * (The dashboard tests' synthetic steps are test code: tests/support/dashboard_demo.c through coord_run's hooks.)
 * Every string that reaches JSON goes through jansson after invalid UTF-8 is replaced by U+FFFD.
 * Not here: the HTTP server (http.c), what the metrics mean (their producers), the page's logic (static/). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/embed.h"
#include "core/err.h"
#include "core/log.h"
#include "coord.h"
#include "engine.h"
#include "net/daemon.h"
#include "reward/math_dapo.h"

#define DASH_METRICS_LIMIT   1000          /* history entries per /api/metrics answer */
#define DASH_TEXT_MAX        (64 << 10)    /* bytes of each sample text put in JSON */
#define DASH_CHARTJS_DEFAULT "/usr/share/javascript/chart.js/chart.min.js"
#define DASH_CHARTJS_MAX     (16 << 20)

extern const EmbeddedFile static_files_coordinator[];

/* A map from strings to ints (open addressing, FNV-1a; strmap_* below). */
typedef struct { char *key; int val; } StrSlot;
typedef struct { StrSlot *slot; size_t cap, n; } StrMap;

/* The latest value of one step metric, under its Prometheus name (for /metrics). */
typedef struct {
    char   name[METRIC_NAME_MAX];       /* the verl name of the newest entry that set it */
    char   prom[METRIC_NAME_MAX + 16];  /* prom_step_name */
    double value;
    long   step;
} LatestMetric;

/* The dashboard's own state: one coordinator per process. The latest-value table is brought up to date from
 * the (append-only) history on each /metrics request, so a scrape costs the new entries, not the whole run;
 * it lives as long as the process (reachable, so not a leak). */
static struct {
    LatestMetric *latest;
    int           nlatest, cap_latest, latest_upto;   /* history entries [0, latest_upto) are in it */
    StrMap        latest_index;                        /* prom name -> index into latest */
} g_dash;

/* ------------------------------------------------------------------------------------------ helpers */

/* Encodes j (taking it) as the answer, reals with `digits` significant digits (17: metric values round-trip
 * exactly; 15: times like 3.546 print as such). */
static void reply_json_digits(HttpResponse *r, int status, json_t *j, int digits) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(digits));
    json_decref(j);
    if (!s) { http_reply(r, 500, NULL, "JSON encoding failed\n"); return; }
    http_reply(r, status, "application/json", s);
    free(s);
}

static void reply_json(HttpResponse *r, int status, json_t *j) { reply_json_digits(r, status, j, 17); }

/* A JSON string from n bytes that may be invalid UTF-8 (U+FFFD per maximal invalid subpart, as Python's
 * errors="replace"), cut to at most max bytes at a code point boundary; *cut says whether it was cut. */
static json_t *json_text(const char *s, size_t n, size_t max, int *cut) {
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

static json_t *json_str(const char *s) { return json_text(s ? s : "", s ? strlen(s) : 0, (size_t)-1 / 4, NULL); }

static json_t *json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* A growable text buffer (xmalloc'd), for /metrics. */
typedef struct { char *s; size_t n, cap; } Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        b->s = xrealloc(b->s, cap);
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { buf_add(b, tmp, (size_t)n); return; }
    char *big = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_add(b, big, (size_t)n);
    xfree(big);
}

/* Query parameter `name` of q ("a=1&b=2") as a non-negative integer: 1 found and valid, 0 absent, -1 bad. */
static int query_long(const char *q, const char *name, long *out) {
    size_t nl = strlen(name);
    for (const char *p = q; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
        if (strncmp(p, name, nl) != 0 || p[nl] != '=') continue;
        const char *v = p + nl + 1;
        if (*v < '0' || *v > '9') return -1;
        errno = 0;
        char *end;
        long x = strtol(v, &end, 10);
        if (errno || (*end && *end != '&')) return -1;
        *out = x;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ /api/status */

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
        json_object_set_new(o, "id", json_str(w->id));
        json_object_set_new(o, "role", json_string(role_name(w->role)));
        json_object_set_new(o, "state", json_string(life_name(w->life)));
        json_object_set_new(o, "policy_version", json_integer(w->policy_version));
        json_object_set_new(o, "last_heartbeat_s", json_real((now - w->last_seen_ms) / 1000.0));
        json_object_set_new(o, "capacity", json_integer(w->capacity));
        json_object_set_new(o, "credit", json_integer(w->credit));
        json_object_set_new(o, "busy", json_integer(w->busy));
        json_object_set_new(o, "load", json_num(w->load));
        json_object_set_new(o, "rank", json_integer(w->rank));
        json_object_set_new(o, "restarts", json_integer(w->restarts));
        json_object_set_new(o, "build", json_str(w->build_info));
        json_object_set_new(o, "routing_id", json_str(rid));
        json_object_set_new(o, "key", json_str(w->key));          /* CURVE key fingerprint; "" without CURVE */
        json_object_set_new(o, "address", json_str(w->address[0] ? w->address : rid));   /* peer address, else rid */
        json_array_append_new(workers, o);
    }
    json_t *alive = json_object();
    static const Dapo__Role roles[] = {DAPO__ROLE__ROLE_ROLLOUT, DAPO__ROLE__ROLE_VERIFIER, DAPO__ROLE__ROLE_LEARNER};
    for (int i = 0; i < 3; i++)
        json_object_set_new(alive, role_name(roles[i]), json_integer(registry_count(c, roles[i], WORKER_ALIVE)));
    json_t *j = json_object();
    json_object_set_new(j, "run_id", json_str(c->run_id));
    json_object_set_new(j, "step", json_integer(c->step));
    json_object_set_new(j, "policy_version", json_integer(c->policy_version));
    json_object_set_new(j, "uptime_s", json_real(coord_run_seconds(c)));                 /* the run's, all processes */
    json_object_set_new(j, "coordinator_uptime_s", json_real((now - c->started_ms) / 1000.0));
    json_object_set_new(j, "alive", alive);
    json_object_set_new(j, "workers", workers);
    json_object_set_new(j, "messages_in", json_integer((json_int_t)c->msgs_in));
    json_object_set_new(j, "messages_bad", json_integer((json_int_t)c->msgs_bad));
    json_object_set_new(j, "heap_bytes", json_integer((json_int_t)xmalloc_used()));
    json_object_set_new(j, "paused", json_boolean(c->paused));
    json_object_set_new(j, "stopping", json_boolean(c->stopping));
    json_object_set_new(j, "status_line", json_str(c->status_line));
    json_object_set_new(j, "controls_enabled", json_boolean(c->token != NULL));   /* cluster.token_file is set */
    json_object_set_new(j, "security", json_pack("{s:b, s:b, s:I, s:I}", "curve", c->keys.on, "insecure",
                                                 c->cfg.insecure, "handshakes_accepted", (json_int_t)zap_accepted(c->zap),
                                                 "handshakes_refused", (json_int_t)zap_refused(c->zap)));
    json_t *ev = json_array();                    /* newest first */
    for (int i = 0; i < COORD_EVENTS && i < c->nevents; i++) {
        int k = (c->nevents - 1 - i) % COORD_EVENTS;
        json_array_append_new(ev, json_pack("{s:f, s:I, s:s}", "t", c->event_t[k], "step", (json_int_t)c->event_step[k],
                                            "text", c->events[k]));
    }
    json_object_set_new(j, "events", ev);
    json_object_set_new(j, "history", json_integer(c->nhistory));
    json_object_set_new(j, "control", json_boolean(c->token != NULL));
    engine_status_fill(c, j);             /* phase and group accounting (steps.c) */
    return j;
}

/* ------------------------------------------------------------------------------------------ /api/metrics */

/* The ?since=N&limit=M of the history routes: since clamped to the history, limit to DASH_METRICS_LIMIT. Returns 0,
 * or -1 after answering 400. */
static int history_page(const Coord *c, const HttpRequest *req, HttpResponse *r, long *since, long *limit) {
    *since = 0;
    *limit = DASH_METRICS_LIMIT;
    int a = query_long(req->query, "since", since), b = query_long(req->query, "limit", limit);
    if (a < 0 || b < 0 || *limit < 1) {
        http_reply(r, 400, NULL, "since and limit must be non-negative integers (limit >= 1)\n");
        return -1;
    }
    if (*limit > DASH_METRICS_LIMIT) *limit = DASH_METRICS_LIMIT;
    if (*since > c->nhistory) *since = c->nhistory;
    return 0;
}

static void route_metrics_json(Coord *c, const HttpRequest *req, HttpResponse *r) {
    long since, limit;
    if (history_page(c, req, r, &since, &limit)) return;
    long end = since + limit < c->nhistory ? since + limit : c->nhistory;
    json_t *entries = json_array();
    for (long i = since; i < end; i++) {
        const Metrics *m = &c->history[i];
        json_t *o = json_object();
        for (int k = 0; k < m->n; k++) {
            json_t *key = json_str(m->m[k].name);
            json_object_set_new_nocheck(o, json_string_value(key), json_num(m->m[k].value));
            json_decref(key);
        }
        json_array_append_new(entries, o);
    }
    json_t *j = json_object();
    json_object_set_new(j, "run_id", json_str(c->run_id));
    json_object_set_new(j, "since", json_integer(since));
    json_object_set_new(j, "next", json_integer(end));
    json_object_set_new(j, "total", json_integer(c->nhistory));
    json_object_set_new(j, "entries", entries);
    reply_json(r, 200, j);
}

/* GET /api/panels?since=N&limit=M: the RL panels' data for history entries [N, N+M) (panels.c). */
static void route_panels(Coord *c, const HttpRequest *req, HttpResponse *r) {
    long since, limit;
    if (history_page(c, req, r, &since, &limit)) return;
    reply_json(r, 200, coord_panels_json(c, since, limit));
}

/* ------------------------------------------------------------------------------------------ /api/samples */

static void route_samples(Coord *c, HttpResponse *r) {
    json_t *arr = json_array();
    for (int i = 0; i < c->nsamples; i++) {
        const SampleView *s = &c->samples[((c->sample_next - 1 - i) % COORD_SAMPLES + COORD_SAMPLES) % COORD_SAMPLES];
        int cut_p = 0, cut_r = 0;
        const char *p = s->prompt ? s->prompt : "", *resp = s->response ? s->response : "";
        json_t *o = json_object();
        json_object_set_new(o, "step", json_integer(s->step));
        json_object_set_new(o, "data_source", json_str(s->data_source));
        json_object_set_new(o, "score", json_num(s->score));
        json_object_set_new(o, "acc", json_integer(s->acc));
        json_object_set_new(o, "pred", json_str(s->pred));
        json_object_set_new(o, "ground_truth", json_str(s->ground_truth));
        json_object_set_new(o, "response_tokens", json_integer(s->response_tokens));
        char fr[sizeof s->finish_reason + 1];
        snprintf(fr, sizeof fr, "%.*s", (int)sizeof s->finish_reason, s->finish_reason);
        json_object_set_new(o, "finish_reason", json_str(fr));
        json_object_set_new(o, "prompt", json_text(p, strlen(p), DASH_TEXT_MAX, &cut_p));
        json_object_set_new(o, "response", json_text(resp, strlen(resp), DASH_TEXT_MAX, &cut_r));
        json_object_set_new(o, "prompt_truncated", json_boolean(cut_p));
        json_object_set_new(o, "response_truncated", json_boolean(cut_r));
        json_array_append_new(arr, o);
    }
    json_t *j = json_object();
    json_object_set_new(j, "samples", arr);
    reply_json(r, 200, j);
}

/* ------------------------------------------------------------------------------------------ /metrics */

/* StrMap (strings -> ints; see the typedef at the top): names already written, and the latest-value table. */

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The value of key, or -1. */
static int strmap_get(const StrMap *t, const char *key) {
    if (!t->cap) return -1;
    for (size_t k = str_hash(key) & (t->cap - 1); t->slot[k].key; k = (k + 1) & (t->cap - 1))
        if (strcmp(t->slot[k].key, key) == 0) return t->slot[k].val;
    return -1;
}

/* Inserts key -> val (key copied); returns 1 when key was new, 0 when already there (its value kept). */
static int strmap_put(StrMap *t, const char *key, int val) {
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        StrMap g = {xcalloc(cap, sizeof(StrSlot)), cap, 0};
        for (size_t i = 0; i < t->cap; i++)
            if (t->slot[i].key) {
                size_t k = str_hash(t->slot[i].key) & (cap - 1);
                while (g.slot[k].key) k = (k + 1) & (cap - 1);
                g.slot[k] = t->slot[i];
                g.n++;
            }
        xfree(t->slot);
        *t = g;
    }
    size_t k = str_hash(key) & (t->cap - 1);
    for (; t->slot[k].key; k = (k + 1) & (t->cap - 1))
        if (strcmp(t->slot[k].key, key) == 0) return 0;
    t->slot[k].key = xstrdup(key);
    t->slot[k].val = val;
    t->n++;
    return 1;
}

static int strset_add(StrMap *t, const char *key) { return strmap_put(t, key, 0); }

static void strmap_free(StrMap *t) {
    for (size_t i = 0; i < t->cap; i++) xfree(t->slot[i].key);
    xfree(t->slot);
    memset(t, 0, sizeof *t);
}

/* "dapo_" + name with every character outside [a-zA-Z0-9_:] replaced by '_' (Prometheus metric names). */
static void prom_name(const char *name, char *out, size_t n) {
    size_t k = (size_t)snprintf(out, n, "dapo_");
    for (const char *p = name; *p && k + 1 < n; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == ':';
        out[k++] = ok ? ch : '_';
    }
    out[k] = 0;
}

/* The Prometheus name of a step metric, with Prometheus's naming rules (promtool check metrics): units spelled out
 * as a suffix in base units ("timing_s/step" -> dapo_timing_step_seconds; "timing_per_token_ms/x" ->
 * dapo_timing_per_token_x_seconds with *scale 1e-3), and no "_total" on a gauge ("actor/skipped_updates_total" ->
 * dapo_actor_skipped_updates). The HELP line keeps the verl name. */
static void prom_step_name(const char *name, char *out, size_t n, double *scale) {
    static const struct { const char *prefix, *base; double scale; } unit[] = {
        {"timing_s/", "timing/", 1.0}, {"timing_per_token_ms/", "timing_per_token/", 1e-3},
    };
    *scale = 1.0;
    char tmp[METRIC_NAME_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s", name);
    const char *suffix = "";
    for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
        size_t k = strlen(unit[i].prefix);
        if (strncmp(name, unit[i].prefix, k) == 0 && name[k]) {
            snprintf(tmp, sizeof tmp, "%s%s", unit[i].base, name + k);
            suffix = "_seconds";
            *scale = unit[i].scale;
        }
    }
    size_t len = strlen(tmp);
    if (len > 6 && !strcmp(tmp + len - 6, "_total")) tmp[len - 6] = 0;
    prom_name(tmp, out, n);
    len = strlen(out);
    snprintf(out + len, n - len, "%s", suffix);
}

/* Text for HELP lines (\\ and \n escaped) or label values (also \"), from bytes made valid UTF-8. */
static void prom_escape(Buf *b, const char *s, int label) {
    size_t n = strlen(s);
    char *u = xmalloc(3 * n + 1);
    size_t m = math_dapo_utf8_repair(s, n, u);
    for (size_t i = 0; i < m; i++) {
        char ch = u[i];
        if (ch == '\\') buf_add(b, "\\\\", 2);
        else if (ch == '\n') buf_add(b, "\\n", 2);
        else if (ch == '"' && label) buf_add(b, "\\\"", 2);
        else buf_add(b, &ch, 1);
    }
    xfree(u);
}

static void prom_value(Buf *b, double v) {
    if (isnan(v)) buf_add(b, "NaN", 3);
    else if (isinf(v)) buf_printf(b, "%cInf", v > 0 ? '+' : '-');
    else buf_printf(b, "%.17g", v);
}

static void prom_family(Buf *b, const char *name, const char *type, const char *help) {
    buf_printf(b, "# HELP %s ", name);
    prom_escape(b, help, 0);
    buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

static void prom_simple(Buf *b, StrMap *seen, const char *name, const char *type, const char *help, double v) {
    if (!strset_add(seen, name)) return;
    prom_family(b, name, type, help);
    buf_printf(b, "%s ", name);
    prom_value(b, v);
    buf_add(b, "\n", 1);
}

/* The entry shown for worker i: among entries with the same (id, role), the alive one, else the latest seen. */
static int worker_shown(const Coord *c, int i) {
    const WorkerEntry *w = &c->workers[i];
    for (int j = 0; j < c->nworkers; j++) {
        const WorkerEntry *o = &c->workers[j];
        if (j == i || o->role != w->role || strcmp(o->id, w->id) != 0) continue;
        int wa = w->life == WORKER_ALIVE, oa = o->life == WORKER_ALIVE;
        if (oa != wa) { if (oa) return 0; continue; }
        if (o->last_seen_ms > w->last_seen_ms || (o->last_seen_ms == w->last_seen_ms && j > i)) return 0;
    }
    return 1;
}

typedef enum { WG_UP, WG_LOAD, WG_CREDIT, WG_BUSY, WG_CAPACITY, WG_VERSION, WG_HEARTBEAT, WG_COUNT } WorkerGauge;

static void prom_workers(Coord *c, Buf *b, StrMap *seen) {
    static const struct { const char *name, *help; } g[WG_COUNT] = {
        {"dapo_worker_up", "1 while the worker is registered and heartbeating, 0 once lost or gone."},
        {"dapo_worker_load", "The worker's load from its last heartbeat."},
        {"dapo_worker_credit", "Items the coordinator may still send the worker."},
        {"dapo_worker_busy", "Items the worker holds (last heartbeat)."},
        {"dapo_worker_capacity", "Items the worker can hold at once (from its hello)."},
        {"dapo_worker_policy_version", "The policy version the worker holds."},
        {"dapo_worker_last_heartbeat_seconds", "Seconds since the worker was last heard from."},
    };
    int64_t now = clock_ms();
    for (int k = 0; k < WG_COUNT; k++) {
        if (!strset_add(seen, g[k].name)) continue;
        prom_family(b, g[k].name, "gauge", g[k].help);
        for (int i = 0; i < c->nworkers; i++) {
            if (!worker_shown(c, i)) continue;
            const WorkerEntry *w = &c->workers[i];
            double v = k == WG_UP ? (w->life == WORKER_ALIVE) : k == WG_LOAD ? w->load : k == WG_CREDIT ? w->credit
                     : k == WG_BUSY ? w->busy : k == WG_CAPACITY ? w->capacity
                     : k == WG_VERSION ? (double)w->policy_version : (now - w->last_seen_ms) / 1000.0;
            buf_printf(b, "%s{id=\"", g[k].name);
            prom_escape(b, w->id, 1);
            buf_printf(b, "\",role=\"%s\"} ", role_name(w->role));
            prom_value(b, v);
            buf_add(b, "\n", 1);
        }
    }
}

/* One labelled sample: name{label="value"} v. */
static void prom_labelled(Buf *b, const char *name, const char *label, const char *value, double v) {
    buf_printf(b, "%s{%s=\"", name, label);
    prom_escape(b, value, 1);
    buf_add(b, "\"} ", 3);
    prom_value(b, v);
    buf_add(b, "\n", 1);
}

/* The run's accounting as counters (monotonic while this coordinator runs; a rollback or restart is a reset) and
 * the groups in flight as gauges: the dynamic-sampling funnel, reward outcomes, leases, restarts, tokens. */
static void prom_counters(Coord *c, Buf *b, StrMap *seen) {
    const Engine *e = c->engine;
    static const struct { const char *name, *help; } fun[] = {
        {"dapo_groups_generated_total", "Training groups generated (every round, filtered ones too)."},
        {"dapo_groups_scored_total", "Training groups scored."},
        {"dapo_groups_solve_none_total", "Scored groups none of whose responses is correct."},
        {"dapo_groups_solve_all_total", "Scored groups all of whose responses are correct."},
        {"dapo_groups_kept_total", "Scored groups kept by dynamic sampling (algorithm.filter_groups)."},
        {"dapo_tokens_generated_total", "Response tokens generated for training groups."},
        {"dapo_tokens_trained_total", "Prompt and response tokens sent to the learners."},
    };
    const uint64_t fv[] = {c->groups_generated_total, c->groups_scored_total, c->groups_solve_none_total,
                           c->groups_solve_all_total, c->groups_kept_total, c->tokens_generated_total,
                           c->tokens_trained_total};
    for (size_t i = 0; i < sizeof fv / sizeof fv[0]; i++) prom_simple(b, seen, fun[i].name, "counter", fun[i].help, (double)fv[i]);
    if (strset_add(seen, "dapo_groups_finished_total")) {
        prom_family(b, "dapo_groups_finished_total", "counter",
                    "Groups by final state over the run (from the checkpointed accounting).");
        static const GroupState fin[] = {GS_FILTERED, GS_SURPLUS, GS_CANCELLED, GS_TRAINED, GS_VALIDATED, GS_STALE};
        for (size_t i = 0; i < sizeof fin / sizeof fin[0]; i++)
            prom_labelled(b, "dapo_groups_finished_total", "state", group_state_name(fin[i]),
                          (double)c->group_counts[fin[i]]);
    }
    if (strset_add(seen, "dapo_groups_in_flight")) {
        prom_family(b, "dapo_groups_in_flight", "gauge", "Groups not finished yet, by state.");
        static const GroupState fly[] = {GS_QUEUED, GS_LEASED, GS_GENERATED, GS_SCORING, GS_KEPT};
        for (size_t i = 0; i < sizeof fly / sizeof fly[0]; i++)
            prom_labelled(b, "dapo_groups_in_flight", "state", group_state_name(fly[i]), (double)c->group_counts[fly[i]]);
    }
    if (e && strset_add(seen, "dapo_reward_responses_total")) {
        prom_family(b, "dapo_reward_responses_total", "counter",
                    "Scored responses by reward outcome (timeout, crash, memory, error: scored reward_model.error_score).");
        static const char *on[5] = {"ok", "timeout", "crash", "memory", "error"};
        for (int o = 0; o < 5; o++) prom_labelled(b, "dapo_reward_responses_total", "outcome", on[o],
                                                  (double)e->reward_outcomes_total[o]);
    }
    if (e) {
        prom_simple(b, seen, "dapo_leases_reclaimed_total", "counter",
                    "Leases taken back past cluster.max_lease_s / max_score_lease_s.", (double)e->leases_reclaimed);
        prom_simple(b, seen, "dapo_leases_requeued_total", "counter",
                    "Leases of lost or re-registered workers put back in the queue.", (double)e->leases_requeued);
        prom_simple(b, seen, "dapo_rollbacks_total", "counter", "Rollbacks to a checkpoint after a lost learner rank.",
                    (double)e->rollbacks);
    }
    prom_simple(b, seen, "dapo_results_abandoned_total", "counter",
                "Group results dropped: generated with the weights of an abandoned run incarnation.",
                (double)c->results_abandoned);
    prom_simple(b, seen, "dapo_coordinator_restarts_total", "counter", "Times the coordinator's supervisor restarted it.",
                (double)daemon_restarts());
    if (strset_add(seen, "dapo_worker_restarts_total")) {
        prom_family(b, "dapo_worker_restarts_total", "counter", "Times a worker's supervisor restarted it (its hello).");
        for (int i = 0; i < c->nworkers; i++) {
            if (!worker_shown(c, i)) continue;
            const WorkerEntry *w = &c->workers[i];
            buf_printf(b, "dapo_worker_restarts_total{id=\"");
            prom_escape(b, w->id, 1);
            buf_printf(b, "\",role=\"%s\"} %u\n", role_name(w->role), w->restarts);
        }
    }
}

/* Brings the latest-value table up to date with the history (rebuilt if the history shrank). */
static void latest_update(Coord *c) {
    if (c->nhistory < g_dash.latest_upto) {
        strmap_free(&g_dash.latest_index);
        g_dash.nlatest = g_dash.latest_upto = 0;
    }
    for (int i = g_dash.latest_upto; i < c->nhistory; i++) {
        const Metrics *m = &c->history[i];
        long step = (long)metrics_get(m, "step", i);
        for (int k = 0; k < m->n; k++) {
            char prom[METRIC_NAME_MAX + 16];
            double scale;
            prom_step_name(m->m[k].name, prom, sizeof prom, &scale);
            int idx = strmap_get(&g_dash.latest_index, prom);
            if (idx < 0) {
                XGROW(g_dash.latest, g_dash.nlatest, g_dash.cap_latest, 64);
                idx = g_dash.nlatest++;
                strmap_put(&g_dash.latest_index, prom, idx);
                snprintf(g_dash.latest[idx].prom, sizeof g_dash.latest[idx].prom, "%s", prom);
            }
            LatestMetric *l = &g_dash.latest[idx];
            snprintf(l->name, sizeof l->name, "%s", m->m[k].name);
            l->value = m->m[k].value * scale;
            l->step = step;
        }
    }
    g_dash.latest_upto = c->nhistory;
}

static void route_prometheus(Coord *c, HttpResponse *r) {
    Buf b = {0};
    StrMap seen = {0};
    int64_t now = clock_ms();
    prom_simple(&b, &seen, "dapo_coordinator_step", "gauge", "The coordinator's current training step.", (double)c->step);
    prom_simple(&b, &seen, "dapo_coordinator_policy_version", "gauge", "The current policy version.", (double)c->policy_version);
    prom_simple(&b, &seen, "dapo_coordinator_paused", "gauge", "1 while dispatch is paused from the dashboard.", c->paused);
    prom_simple(&b, &seen, "dapo_coordinator_uptime_seconds", "gauge", "Seconds since the coordinator started.",
                (now - c->started_ms) / 1000.0);
    prom_simple(&b, &seen, "dapo_coordinator_heap_bytes", "gauge", "Live bytes of the counted heap (xmalloc).",
                (double)xmalloc_used());
    prom_simple(&b, &seen, "dapo_coordinator_messages_in_total", "counter", "Worker messages received and decoded.",
                (double)c->msgs_in);
    prom_simple(&b, &seen, "dapo_coordinator_messages_bad_total", "counter", "Worker messages dropped as malformed.",
                (double)c->msgs_bad);
    prom_simple(&b, &seen, "dapo_coordinator_history_entries", "gauge", "Entries in the metric history.",
                (double)c->nhistory);
    if (strset_add(&seen, "dapo_workers_alive")) {
        prom_family(&b, "dapo_workers_alive", "gauge", "Workers alive, by role.");
        static const Dapo__Role roles[] = {DAPO__ROLE__ROLE_ROLLOUT, DAPO__ROLE__ROLE_VERIFIER, DAPO__ROLE__ROLE_LEARNER};
        for (int i = 0; i < 3; i++)
            buf_printf(&b, "dapo_workers_alive{role=\"%s\"} %d\n", role_name(roles[i]),
                       registry_count(c, roles[i], WORKER_ALIVE));
    }
    prom_workers(c, &b, &seen);
    prom_counters(c, &b, &seen);
    /* Step metrics: the latest value of each name (names first seen first). */
    latest_update(c);
    for (int i = 0; i < g_dash.nlatest; i++) {
        const LatestMetric *l = &g_dash.latest[i];
        char help[METRIC_NAME_MAX + 64];
        if (!strset_add(&seen, l->prom)) continue;       /* a coordinator or worker gauge has that name */
        snprintf(help, sizeof help, "Step metric %s (latest value, step %ld).", l->name, l->step);
        prom_family(&b, l->prom, "gauge", help);
        buf_printf(&b, "%s ", l->prom);
        prom_value(&b, l->value);
        buf_add(&b, "\n", 1);
    }
    strmap_free(&seen);
    if (!b.s) buf_add(&b, "", 0);
    http_reply_owned(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.s, b.n);
}

/* ------------------------------------------------------------------------------------------ control */

/* 1 when auth is "Bearer <token>" (scheme case-insensitive); the comparison takes the same time wherever the
 * first difference is. */
static int bearer_ok(const char *auth, const char *token) {
    if (strncasecmp(auth, "Bearer ", 7) != 0) return 0;
    const char *t = auth + 7;
    while (*t == ' ') t++;
    size_t n = strlen(t), m = strlen(token);
    while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t')) n--;
    unsigned diff = n != m;
    for (size_t i = 0; i < m; i++) diff |= (unsigned char)token[i] ^ (unsigned char)(i < n ? t[i] : 0);
    return diff == 0;
}

/* A control request as an event, through run.c (logged, its actions carried out at once). The stop runs after the
 * answer is written. */
static int control(Coord *c, const Event *ev, char err[ERR_LEN]) {
    return c->control ? c->control(c, ev, err) : engine_on(c, ev, err);
}

static void after_stop(void *coord) {
    Event ev = {.kind = EV_STOP};
    control(coord, &ev, NULL);
}

static void route_control(Coord *c, const HttpRequest *req, const char *action, HttpResponse *r) {
    static const char *const actions[] = {"pause", "resume", "checkpoint", "stop"};
    int a = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(action, actions[i]) == 0) a = i;
    if (a < 0) { http_reply(r, 404, NULL, "unknown control action (pause, resume, checkpoint, stop)\n"); return; }
    if (strcmp(req->method, "POST") != 0) {
        http_reply(r, 405, NULL, "POST only\n");
        r->extra_headers = "Allow: POST\r\n";
        return;
    }
    if (!c->token) { http_reply(r, 403, NULL, "no token configured (set cluster.token_file)\n"); return; }
    if (!bearer_ok(req->authorization, c->token)) {
        http_reply(r, 401, NULL, req->authorization[0] ? "wrong bearer token\n" : "missing Authorization: Bearer <token>\n");
        return;
    }
    json_t *j = json_object();
    json_object_set_new(j, "action", json_string(action));
    int status = 200;
    if (a <= 1) {
        Event ev = {.kind = a == 0 ? EV_PAUSE : EV_RESUME};
        control(c, &ev, NULL);
    } else if (a == 2) {
        char err[ERR_LEN] = "";
        Event ev = {.kind = EV_CHECKPOINT};
        int rc = control(c, &ev, err);
        if (rc) {
            status = rc == ERR_UNSUPPORTED ? 501 : 500;
            json_object_set_new(j, "error", json_str(err));
        }
    } else {
        log_info("stop requested from the dashboard");
        r->after = after_stop;                       /* after the answer is written */
        r->after_ud = c;
    }
    json_object_set_new(j, "ok", json_boolean(status == 200));
    json_object_set_new(j, "paused", json_boolean(c->paused));
    reply_json(r, status, j);
}

/* ------------------------------------------------------------------------------------------ static files */

static const char *content_type_of(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot) return "application/octet-stream";
    if (!strcmp(dot, ".html")) return "text/html; charset=utf-8";
    if (!strcmp(dot, ".js")) return "text/javascript; charset=utf-8";
    if (!strcmp(dot, ".css")) return "text/css; charset=utf-8";
    if (!strcmp(dot, ".svg")) return "image/svg+xml";
    if (!strcmp(dot, ".png")) return "image/png";
    if (!strcmp(dot, ".json")) return "application/json";
    return "application/octet-stream";
}

static void route_chartjs(HttpResponse *r) {
    const char *path = getenv("DAPO_CHARTJS");
    if (!path || !*path) path = DASH_CHARTJS_DEFAULT;
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    size_t n = 0;
    if (f) {
        data = xmalloc(DASH_CHARTJS_MAX + 1);
        n = fread(data, 1, DASH_CHARTJS_MAX + 1, f);
        int bad = ferror(f) || n == 0 || n > DASH_CHARTJS_MAX;
        fclose(f);
        if (bad) { xfree(data); data = NULL; }
    }
    if (!data) {
        char msg[512];
        snprintf(msg, sizeof msg, "Chart.js is not available: %s cannot be read. Install Debian's libjs-chart.js "
                 "(apt-get install libjs-chart.js) and reload.\n", path);
        http_reply(r, 503, NULL, msg);
        return;
    }
    data = xrealloc(data, n + 1);
    data[n] = 0;
    http_reply_owned(r, 200, "text/javascript; charset=utf-8", data, n);
}

/* ------------------------------------------------------------------------------------------ routing */

void dashboard_handle(void *coord, const HttpRequest *req, HttpResponse *resp) {
    Coord *c = coord;
    const char *p = req->path;
    if (!strcmp(p, "/healthz") || !strcmp(p, "/readyz")) {          /* probes: a kubelet sends no bearer token */
        if (engine_phase(c) == PH_FAILED)            /* a failed run restarts (and resumes) rather than sit there */
            http_reply(resp, 503, NULL, "the run failed (see /api/status and the log)\n");
        else if (!strcmp(p, "/healthz")) http_reply(resp, 200, NULL, "ok\n");
        else if (c->ready) http_reply(resp, 200, NULL, "ready\n");
        else http_reply(resp, 503, NULL, "starting\n");
        return;
    }
    if (c->http_public && (!c->token || !bearer_ok(req->authorization, c->token))) {   /* issue 18: off loopback */
        http_reply(resp, 401, NULL, "this dashboard is off loopback: every request needs Authorization: Bearer <token> "
                                    "(cluster.token_file)\n");
        resp->extra_headers = "WWW-Authenticate: Bearer\r\n";
        return;
    }
    if (strncmp(p, "/api/control/", 13) == 0) { route_control(c, req, p + 13, resp); return; }
    int get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;   /* HEAD: http.c drops the body */
    const EmbeddedFile *f = embed_find(static_files_coordinator, strcmp(p, "/") == 0 ? "/index.html" : p);
    int known = f || !strcmp(p, "/api/status") || !strcmp(p, "/api/metrics") || !strcmp(p, "/api/samples") ||
                !strcmp(p, "/api/config") || !strcmp(p, "/metrics") || !strcmp(p, "/js/chart.min.js") ||
                !strcmp(p, "/api/panels");
    if (!known) { http_reply(resp, 404, NULL, "not found\n"); return; }
    if (!get) {
        http_reply(resp, 405, NULL, "GET only\n");
        resp->extra_headers = "Allow: GET, HEAD\r\n";
        return;
    }
    if (f) {
        http_reply_bytes(resp, 200, content_type_of(f->path), f->data, f->len);
        resp->extra_headers = "Content-Security-Policy: default-src 'self'; img-src 'self' data:; object-src 'none'; "
                              "base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n";
    }
    else if (!strcmp(p, "/api/status")) reply_json_digits(resp, 200, status_json(c), 15);
    else if (!strcmp(p, "/api/metrics")) route_metrics_json(c, req, resp);
    else if (!strcmp(p, "/api/panels")) route_panels(c, req, resp);
    else if (!strcmp(p, "/api/samples")) route_samples(c, resp);
    else if (!strcmp(p, "/api/config")) http_reply(resp, 200, "text/plain; charset=utf-8", c->config_yaml ? c->config_yaml : "");
    else if (!strcmp(p, "/metrics")) route_prometheus(c, resp);
    else route_chartjs(resp);
}
