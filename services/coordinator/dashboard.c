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
#include "view.h"

#define DASH_METRICS_LIMIT   1000          /* history entries per /api/metrics answer */
#define DASH_TEXT_MAX        (64 << 10)    /* bytes of each sample text put in JSON */
#define DASH_CHARTJS_DEFAULT "/usr/share/javascript/chart.js/chart.min.js"
#define DASH_CHARTJS_MAX     (16 << 20)

extern const EmbeddedFile static_files_coordinator[];

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

/* ------------------------------------------------------------------------------------------ /api/metrics */

/* The ?since=N&limit=M of the history routes: since clamped to the history, limit to DASH_METRICS_LIMIT. Returns 0,
 * or -1 after answering 400. */
static int history_page(const CoordView *v, const HttpRequest *req, HttpResponse *r, long *since, long *limit) {
    *since = 0;
    *limit = DASH_METRICS_LIMIT;
    int a = query_long(req->query, "since", since), b = query_long(req->query, "limit", limit);
    if (a < 0 || b < 0 || *limit < 1) {
        http_reply(r, 400, NULL, "since and limit must be non-negative integers (limit >= 1)\n");
        return -1;
    }
    if (*limit > DASH_METRICS_LIMIT) *limit = DASH_METRICS_LIMIT;
    if (*since > v->nhistory) *since = v->nhistory;
    return 0;
}

static void route_metrics_json(const CoordView *v, const HttpRequest *req, HttpResponse *r) {
    long since, limit;
    if (history_page(v, req, r, &since, &limit)) return;
    long end = since + limit < v->nhistory ? since + limit : v->nhistory;
    json_t *entries = json_array();
    for (long i = since; i < end; i++) {
        const Metrics *m = &v->history[i];
        json_t *o = json_object();
        for (int k = 0; k < m->n; k++) {
            json_t *key = jt_str(m->m[k].name);
            json_object_set_new_nocheck(o, json_string_value(key), jt_num(m->m[k].value));
            json_decref(key);
        }
        json_array_append_new(entries, o);
    }
    json_t *j = json_object();
    json_object_set_new(j, "run_id", jt_str(v->run_id));
    json_object_set_new(j, "since", json_integer(since));
    json_object_set_new(j, "next", json_integer(end));
    json_object_set_new(j, "total", json_integer(v->nhistory));
    json_object_set_new(j, "entries", entries);
    reply_json(r, 200, j);
}

/* GET /api/panels?since=N&limit=M: the RL panels' data for history entries [N, N+M) (panels.c). */
static void route_panels(const CoordView *v, const HttpRequest *req, HttpResponse *r) {
    long since, limit;
    if (history_page(v, req, r, &since, &limit)) return;
    reply_json(r, 200, coord_panels_json(v, since, limit));
}

/* ------------------------------------------------------------------------------------------ /api/samples */

static void route_samples(const CoordView *v, HttpResponse *r) {
    json_t *arr = json_array();
    for (int i = 0; i < v->nsamples; i++) {
        const SampleView *s = &v->samples[((v->sample_next - 1 - i) % COORD_SAMPLES + COORD_SAMPLES) % COORD_SAMPLES];
        int cut_p = 0, cut_r = 0;
        const char *p = s->prompt ? s->prompt : "", *resp = s->response ? s->response : "";
        json_t *o = json_object();
        json_object_set_new(o, "step", json_integer(s->step));
        json_object_set_new(o, "data_source", jt_str(s->data_source));
        json_object_set_new(o, "score", jt_num(s->score));
        json_object_set_new(o, "acc", json_integer(s->acc));
        json_object_set_new(o, "pred", jt_str(s->pred));
        json_object_set_new(o, "ground_truth", jt_str(s->ground_truth));
        json_object_set_new(o, "response_tokens", json_integer(s->response_tokens));
        char fr[sizeof s->finish_reason + 1];
        snprintf(fr, sizeof fr, "%.*s", (int)sizeof s->finish_reason, s->finish_reason);
        json_object_set_new(o, "finish_reason", jt_str(fr));
        json_object_set_new(o, "prompt", jt_text(p, strlen(p), DASH_TEXT_MAX, &cut_p));
        json_object_set_new(o, "response", jt_text(resp, strlen(resp), DASH_TEXT_MAX, &cut_r));
        json_object_set_new(o, "prompt_truncated", json_boolean(cut_p));
        json_object_set_new(o, "response_truncated", json_boolean(cut_r));
        json_array_append_new(arr, o);
    }
    json_t *j = json_object();
    json_object_set_new(j, "samples", arr);
    reply_json(r, 200, j);
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

static void route_control(const CoordView *v, const HttpRequest *req, const char *action, HttpResponse *r) {
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
    if (!v->token) { http_reply(r, 403, NULL, "no token configured (set cluster.token_file)\n"); return; }
    if (!bearer_ok(req->authorization, v->token)) {
        http_reply(r, 401, NULL, req->authorization[0] ? "wrong bearer token\n" : "missing Authorization: Bearer <token>\n");
        return;
    }
    json_t *j = json_object();
    json_object_set_new(j, "action", json_string(action));
    int status = 200, paused = v->paused;
    if (a <= 1) {
        v->control(v->ctx, a == 0 ? VIEW_PAUSE : VIEW_RESUME, &paused, NULL);
    } else if (a == 2) {
        char err[ERR_LEN] = "";
        int rc = v->control(v->ctx, VIEW_CHECKPOINT, &paused, err);
        if (rc) {
            status = rc == ERR_UNSUPPORTED ? 501 : 500;
            json_object_set_new(j, "error", jt_str(err));
        }
    } else {
        log_info("stop requested from the dashboard");
        r->after = v->stop;                          /* after the answer is written */
        r->after_ud = v->ctx;
    }
    json_object_set_new(j, "ok", json_boolean(status == 200));
    json_object_set_new(j, "paused", json_boolean(paused));
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

void dashboard_handle(const CoordView *v, const HttpRequest *req, HttpResponse *resp) {
    const char *p = req->path;
    if (!strcmp(p, "/healthz") || !strcmp(p, "/readyz")) {          /* probes: a kubelet sends no bearer token */
        if (v->failed)                             /* a failed run restarts (and resumes) rather than sit there */
            http_reply(resp, 503, NULL, "the run failed (see /api/status and the log)\n");
        else if (!strcmp(p, "/healthz")) http_reply(resp, 200, NULL, "ok\n");
        else if (v->ready) http_reply(resp, 200, NULL, "ready\n");
        else http_reply(resp, 503, NULL, "starting\n");
        return;
    }
    if (v->http_public && (!v->token || !bearer_ok(req->authorization, v->token))) {   /* issue 18: off loopback */
        http_reply(resp, 401, NULL, "this dashboard is off loopback: every request needs Authorization: Bearer <token> "
                                    "(cluster.token_file)\n");
        resp->extra_headers = "WWW-Authenticate: Bearer\r\n";
        return;
    }
    if (strncmp(p, "/api/control/", 13) == 0) { route_control(v, req, p + 13, resp); return; }
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
    else if (!strcmp(p, "/api/status")) reply_json_digits(resp, 200, json_incref(v->status), 15);
    else if (!strcmp(p, "/api/metrics")) route_metrics_json(v, req, resp);
    else if (!strcmp(p, "/api/panels")) route_panels(v, req, resp);
    else if (!strcmp(p, "/api/samples")) route_samples(v, resp);
    else if (!strcmp(p, "/api/config")) http_reply(resp, 200, "text/plain; charset=utf-8", v->config_yaml ? v->config_yaml : "");
    else if (!strcmp(p, "/metrics"))
        http_reply_bytes(resp, 200, "text/plain; version=0.0.4; charset=utf-8", v->prometheus, v->prometheus_len);
    else route_chartjs(resp);
}
