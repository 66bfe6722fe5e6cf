/* tests/integration/longtest_dashboard_browser.c: the dashboard page in a real browser. A coordinator records
 * DEMO_STEPS synthetic steps (tests/support/bin/dapo-coordinator-demo --demo-steps, one per 200 ms) while headless
 * Chromium (Debian's chromium package) shows the page, driven through the DevTools protocol over
 * --remote-debugging-pipe (fd 3: our commands, fd 4: its answers; JSON messages ended by NUL; no websocket, no
 * Python). Checked, on the live page:
 * Chart.js loaded, one canvas per chart, the plots hold points and their count grows when a step completes
 * (#steps-seen, #points-plotted and the Chart.js datasets themselves), pixels were drawn, the final point count
 * equals the finite values in /api/metrics exactly, every metric got a chart, the worker-free table and the
 * samples render, HTML in a response stays text (the page title is not rewritten by the <script> in it), and a
 * pause through the control endpoint shows the badge; issue 33: the header's headline is the held-out accuracy with
 * its change, the funnel is four series (issue 41: refilled), a flat tiny series (actor/lr = 1e-6) gets a y range around its value, and
 * the event list after a coordinator restart still holds the event from before it (events.jsonl). A PNG screenshot
 * goes to $DAPO_BUILD/dashboard.png.
 * A long test (make check-long), not part of make test: Chromium is a ~350 MB install. Needs `apt-get install
 * chromium`; DAPO_CHROMIUM overrides the binary. Build and run alone:
 *   make BUILD=build build/tests/longtest_dashboard_browser && DAPO_BUILD=build build/tests/longtest_dashboard_browser */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <poll.h>

#include "core/clock.h"
#include "tests/testutil.h"

#define DEMO_STEPS 20
#define TOKEN      "browser-test-token-42"

typedef struct {
    pid_t  coord, chrome, bare;   /* bare: a coordinator without Chart.js */
    int    hport;
    int    to_fd, from_fd;       /* our ends of the DevTools pipe */
    int    next_id;
    char  *rbuf;                 /* bytes read from Chromium, not yet split */
    size_t rlen, rcap;
    char   session[128];
    char   logdir[200], profile[220];
} Browser;

static Browser g;

/* ------------------------------------------------------------------------------------------ DevTools pipe */

/* Sends {id, method, params, sessionId?}; returns the id. */
static int cdp_send(const char *method, json_t *params, int in_session) {
    json_t *m = json_pack("{s:i, s:s, s:o}", "id", ++g.next_id, "method", method, "params", params ? params : json_object());
    if (in_session) json_object_set_new(m, "sessionId", json_string(g.session));
    char *s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    size_t n = strlen(s) + 1;                        /* the NUL ends the message */
    for (size_t off = 0; off < n;) {
        ssize_t w = write(g.to_fd, s + off, n - off);
        if (w <= 0) { free(s); fail_msg("DevTools pipe: write failed"); }
        off += (size_t)w;
    }
    free(s);
    return g.next_id;
}

/* The next NUL-ended message from Chromium (decoded), or NULL after ms. */
static json_t *cdp_read(int ms) {
    int64_t end = clock_ms() + ms;
    for (;;) {
        char *nul = g.rlen ? memchr(g.rbuf, 0, g.rlen) : NULL;
        if (nul) {
            size_t n = (size_t)(nul - g.rbuf);
            json_t *j = json_loadb(g.rbuf, n, 0, NULL);
            memmove(g.rbuf, nul + 1, g.rlen - n - 1);
            g.rlen -= n + 1;
            if (j) return j;
            continue;
        }
        int left = (int)(end - clock_ms());
        if (left <= 0) return NULL;
        struct pollfd p = {.fd = g.from_fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) continue;
        if (g.rcap - g.rlen < 65536) { g.rcap = g.rcap * 2 + 65536; g.rbuf = realloc(g.rbuf, g.rcap); }
        ssize_t r = read(g.from_fd, g.rbuf + g.rlen, g.rcap - g.rlen);
        if (r <= 0) return NULL;
        g.rlen += (size_t)r;
    }
}

/* Sends a command and waits for its answer's "result" (events in between are dropped); fails on an error. */
static json_t *cdp_call(const char *method, json_t *params, int in_session) {
    int id = cdp_send(method, params, in_session);
    int64_t end = clock_ms() + 20000;
    while (clock_ms() < end) {
        json_t *m = cdp_read((int)(end - clock_ms()));
        if (!m) break;
        json_t *mid = json_object_get(m, "id");
        if (mid && json_integer_value(mid) == id) {
            json_t *err = json_object_get(m, "error");
            if (err) {
                char *s = json_dumps(err, 0);
                fail_msg("%s: %s", method, s);
            }
            json_t *res = json_incref(json_object_get(m, "result"));
            json_decref(m);
            return res;
        }
        json_decref(m);
    }
    fail_msg("%s: no answer from Chromium in 20 s", method);
    return NULL;
}

/* Evaluates expr (which must give a JSON string) in the page; returns the parsed value. */
static json_t *page_eval(const char *expr) {
    json_t *res = cdp_call("Runtime.evaluate", json_pack("{s:s, s:b, s:b}", "expression", expr, "returnByValue", 1,
                                                         "awaitPromise", 1), 1);
    json_t *v = json_object_get(json_object_get(res, "result"), "value");
    if (!json_is_string(v)) {
        char *s = json_dumps(res, 0);
        fail_msg("evaluate gave no string: %s", s);
    }
    json_t *j = json_loads(json_string_value(v), 0, NULL);
    json_decref(res);
    assert_non_null(j);
    return j;
}

/* The page's state as JSON: counters, canvases, Chart.js instances and their point counts, drawn pixels. */
static const char *STATE_JS =
    "(() => { if (!document.getElementById('points-plotted')) return JSON.stringify({steps: -1});"
    " const t = id => document.getElementById(id).textContent;"
    " const all = typeof Chart === 'undefined' ? [] : Object.values(Chart.instances);"
    " const charts = all.filter(ch => !ch.canvas.closest('#panel-charts'));"
    " const panels = all.filter(ch => ch.canvas.closest('#panel-charts'));"
    " const first = document.querySelector('#main-charts canvas');"
    " const scoreChart = charts.find(ch => ch.canvas === first);"
    " let drawn = 0; const c = document.querySelector('#main-charts canvas');"
    " if (c) { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
    "   for (let i = 3; i < d.length; i += 4) if (d[i]) drawn++; }"
    " return JSON.stringify({steps: +t('steps-seen'), points: +t('points-plotted'), charts_count: +t('charts-count'),"
    "  canvases: document.querySelectorAll('canvas').length, chart_js: typeof Chart !== 'undefined',"
    "  instances: all.length, data_points: charts.reduce((a, ch) => a + ch.data.datasets.reduce((b, d) => b + d.data.length, 0), 0),"
    "  score_points: scoreChart ? scoreChart.data.datasets.reduce((b, d) => b + d.data.length, 0) : 0,"
    "  panel_steps: +t('panel-steps'), panel_charts: panels.length,"
    "  panel_points: panels.reduce((a, ch) => a + ch.data.datasets.reduce((b, d) => b + d.data.filter(v => v !== null).length, 0), 0),"
    "  drawn: drawn, title: document.title, samples: document.querySelectorAll('.sample').length,"
    "  sample_text: (document.querySelector('.sample pre.response') || {}).textContent || '',"
    "  paused: !document.getElementById('paused-badge').hidden, status_line: t('status-line'),"
    "  workers_row: document.querySelector('#workers tbody').textContent,"
    "  config: t('config').length, error_hidden: document.getElementById('chart-error').hidden,"
    "  errors: window.__errors ? window.__errors.join('; ') : 'the error hook is missing',"
    "  headline: t('headline-acc'), headline_delta: t('headline-delta'), events: t('events'),"
    "  funnel_series: (panels.find(ch => ch.canvas.closest('.card').querySelector('h3').textContent.includes('funnel'))"
    "                  || {data: {datasets: []}}).data.datasets.length,"
    "  lr_min: (all.find(ch => ch.data.datasets.some(d => d.label === 'actor/lr')) || {scales: {y: {}}}).scales.y.min,"
    "  lr_max: (all.find(ch => ch.data.datasets.some(d => d.label === 'actor/lr')) || {scales: {y: {}}}).scales.y.max"
    " }); })()";

static int state_int(json_t *s, const char *key) { return (int)json_number_value(json_object_get(s, key)); }

/* Polls the page state until cond holds (or ms pass); returns the last state (owned). */
static json_t *wait_state(int (*cond)(json_t *, int), int arg, int ms) {
    int64_t end = clock_ms() + ms;
    json_t *s = NULL;
    while (clock_ms() < end) {
        json_decref(s);
        s = page_eval(STATE_JS);
        if (cond(s, arg)) return s;
        usleep(100000);
    }
    char *txt = json_dumps(s, 0);
    fail_msg("page state never reached the condition: %s", txt);
    return s;
}

static int steps_at_least(json_t *s, int n) { return state_int(s, "steps") >= n; }
static int steps_more_than(json_t *s, int n) { return state_int(s, "steps") > n; }
/* /api/metrics and /api/panels are polled separately: both must hold n steps */
static int steps_and_samples(json_t *s, int n) { return state_int(s, "steps") >= n && state_int(s, "samples") >= n; }
static int steps_and_panels(json_t *s, int n) { return state_int(s, "steps") >= n && state_int(s, "panel_steps") >= n; }
static int paused_is(json_t *s, int want) { return json_is_true(json_object_get(s, "paused")) == want; }

/* ------------------------------------------------------------------------------------------ setup */

static int move_fd_high(int fd) {
    int h = fcntl(fd, F_DUPFD, 10);
    close(fd);
    return h;
}

static int setup(void **state) {
    (void)state;
    const char *chrome = getenv("DAPO_CHROMIUM");
    if (!chrome || !*chrome) chrome = "/usr/bin/chromium";
    if (access(chrome, X_OK)) {
        fprintf(stderr, "%s not found: this test needs Debian's chromium (apt-get install chromium)\n", chrome);
        return -1;
    }
    snprintf(g.logdir, sizeof g.logdir, "%s/test-logs/dashboard-browser", tu_build());
    snprintf(g.profile, sizeof g.profile, "%s/profile", g.logdir);
    char cmd[600], bin[256], log[300], bind[96], http[96], demo[64], tokfile[260], tokarg[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", g.logdir, g.profile);
    if (system(cmd)) return -1;
    snprintf(tokfile, sizeof tokfile, "%s/token", g.logdir);
    FILE *f = fopen(tokfile, "w");
    if (!f) return -1;
    fprintf(f, "%s\n", TOKEN);
    fclose(f);
    g.hport = tu_free_port();
    snprintf(bind, sizeof bind, "cluster.bind=tcp://127.0.0.1:%d", tu_free_port());
    snprintf(http, sizeof http, "cluster.http=127.0.0.1:%d", g.hport);
    snprintf(demo, sizeof demo, "%d", DEMO_STEPS);
    snprintf(tokarg, sizeof tokarg, "cluster.token_file=%s", tokfile);
    snprintf(log, sizeof log, "%s/coordinator.log", g.logdir);
    char dir[260];
    snprintf(dir, sizeof dir, "trainer.default_local_dir=%s/ckpt", g.logdir);
    snprintf(bin, sizeof bin, "%s/tests/dapo-coordinator-demo", tu_build());
    char *cargv[] = {bin, "--demo-steps", demo, bind, http, tokarg, dir, NULL};
    g.coord = tu_spawn(cargv, log);
    if (g.coord <= 0) return -1;

    int to[2], from[2];
    if (pipe(to) || pipe(from)) return -1;
    to[0] = move_fd_high(to[0]); to[1] = move_fd_high(to[1]);
    from[0] = move_fd_high(from[0]); from[1] = move_fd_high(from[1]);
    snprintf(log, sizeof log, "%s/chromium.log", g.logdir);
    char prof[300];
    snprintf(prof, sizeof prof, "--user-data-dir=%s", g.profile);
    g.chrome = fork();
    if (g.chrome == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        dup2(to[0], 3);
        dup2(from[1], 4);
        close(to[0]); close(to[1]); close(from[0]); close(from[1]);
        execl(chrome, chrome, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
              "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
              "--disable-background-networking", "--disable-component-update", "--mute-audio",
              "--hide-scrollbars", prof, "about:blank", (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    g.to_fd = to[1];
    g.from_fd = from[0];
    return g.chrome > 0 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (g.chrome > 0) { kill(g.chrome, SIGKILL); tu_wait(g.chrome, 5000); }
    if (g.coord > 0) { kill(g.coord, SIGKILL); tu_wait(g.coord, 3000); }
    if (g.bare > 0) { kill(g.bare, SIGKILL); tu_wait(g.bare, 3000); }
    close(g.to_fd);
    close(g.from_fd);
    free(g.rbuf);
    return 0;
}

/* ------------------------------------------------------------------------------------------ helpers */

static size_t b64_decode(const char *in, unsigned char *out) {
    static signed char map[256];
    static const char *alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    memset(map, -1, sizeof map);
    for (int i = 0; i < 64; i++) map[(unsigned char)alpha[i]] = (signed char)i;
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (const char *p = in; *p && *p != '='; p++) {
        if (map[(unsigned char)*p] < 0) continue;
        acc = (acc << 6) | (uint32_t)map[(unsigned char)*p];
        bits += 6;
        if (bits >= 8) { bits -= 8; out[n++] = (unsigned char)(acc >> bits); }
    }
    return n;
}

/* Finite values (step excluded) in the coordinator's whole history: what the page must have plotted. */
static int expected_points(void) {
    static char body[1 << 20];
    assert_int_equal(tu_http(g.hport, "GET", "/api/metrics?since=0", NULL, body, sizeof body), 200);
    json_t *j = json_loads(body, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "total")), DEMO_STEPS);
    int n = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(j, "entries"), i, e) {
        const char *k;
        json_t *v;
        json_object_foreach(e, k, v) if (strcmp(k, "step") && json_is_number(v)) n++;
    }
    json_decref(j);
    return n;
}

/* ------------------------------------------------------------------------------------------ the test */

static void test_page_renders_and_updates(void **state) {
    (void)state;
    static char body[1 << 16];
    int64_t t0 = clock_ms();
    /* A page target and a flat session on it. */
    json_t *r = cdp_call("Target.createTarget", json_pack("{s:s}", "url", "about:blank"), 0);
    const char *target = json_string_value(json_object_get(r, "targetId"));
    assert_non_null(target);
    json_t *a = cdp_call("Target.attachToTarget", json_pack("{s:s, s:b}", "targetId", target, "flatten", 1), 0);
    snprintf(g.session, sizeof g.session, "%s", json_string_value(json_object_get(a, "sessionId")));
    json_decref(a);
    json_decref(r);
    json_decref(cdp_call("Page.enable", NULL, 1));
    /* Before any page script: record uncaught errors, rejected promises and Content-Security-Policy violations. */
    json_decref(cdp_call("Page.addScriptToEvaluateOnNewDocument", json_pack("{s:s}", "source",
        "window.__errors = [];"
        "window.addEventListener('error', e => window.__errors.push('error: ' + e.message));"
        "window.addEventListener('unhandledrejection', e => window.__errors.push('rejection: ' + e.reason));"
        "document.addEventListener('securitypolicyviolation', e => window.__errors.push('csp: ' + e.violatedDirective));"), 1));
    json_decref(cdp_call("Emulation.setDeviceMetricsOverride",
                         json_pack("{s:i, s:i, s:f, s:b}", "width", 1400, "height", 2600, "deviceScaleFactor", 1.0,
                                   "mobile", 0), 1));
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/?poll_ms=250", g.hport);
    json_decref(cdp_call("Page.navigate", json_pack("{s:s}", "url", url), 1));

    /* First plots: a few steps in, Chart.js drew them. */
    json_t *s1 = wait_state(steps_at_least, 3, 15000);
    assert_true(json_is_true(json_object_get(s1, "chart_js")));
    assert_true(json_is_true(json_object_get(s1, "error_hidden")));
    assert_int_equal(state_int(s1, "canvases"), state_int(s1, "charts_count"));
    assert_int_equal(state_int(s1, "instances"), state_int(s1, "canvases"));
    assert_true(state_int(s1, "charts_count") >= 7 + 10 + 5);     /* 7 Run health panels, the 10 groups, small charts */
    assert_int_equal(state_int(s1, "data_points"), state_int(s1, "points"));
    assert_true(state_int(s1, "score_points") >= 3);
    assert_true(state_int(s1, "drawn") > 1000);                    /* pixels on the first chart's canvas */
    int steps1 = state_int(s1, "steps"), points1 = state_int(s1, "points");
    assert_true(points1 > 0);

    /* A step completes: the same page (no reload) gets it on its next poll and plots it. */
    json_t *s2 = wait_state(steps_more_than, steps1, 5000);
    assert_true(state_int(s2, "points") > points1);
    assert_true(state_int(s2, "data_points") > points1);
    assert_true(state_int(s2, "score_points") > state_int(s1, "score_points"));

    /* All steps: exactly the finite values of /api/metrics, and a chart for every metric. */
    json_t *s3 = wait_state(steps_and_panels, DEMO_STEPS, 15000);
    assert_int_equal(state_int(s3, "steps"), DEMO_STEPS);
    assert_int_equal(state_int(s3, "points"), expected_points());
    assert_int_equal(state_int(s3, "data_points"), state_int(s3, "points"));
    assert_int_equal(state_int(s3, "charts_count"), 7 + 10 + 25); /* dashboard_demo.c: 25 ungrouped names */
    /* The Run health panels (/api/panels): one entry per step; every series of the 5 step charts has a point per step
     * (throughput 3, time split 6, length percentiles 4, funnel 4, log-prob mismatch 4 = 21 series), the staleness
     * bars none (the demo's steps record no batch/groups_staleness), and the histogram the latest step's 20 bins. */
    assert_int_equal(state_int(s3, "panel_charts"), 7);
    assert_int_equal(state_int(s3, "panel_steps"), DEMO_STEPS);
    assert_int_equal(state_int(s3, "panel_points"), 21 * DEMO_STEPS + 20);
    assert_int_equal(state_int(s3, "funnel_series"), 4);               /* trained, surplus, filtered, refilled */
    /* the headline: dashboard_demo.c's val-core/math_dapo/acc/mean@4 = 0.1 + 0.3 (1 - exp(-k/20)) at k = 5..20 */
    char want[64];
    snprintf(want, sizeof want, "%.1f%%", 100 * (0.1 + 0.3 * (1 - exp(-20 / 20.0))));
    assert_string_equal(json_string_value(json_object_get(s3, "headline")), want);
    snprintf(want, sizeof want, "(+%.1f since step 5, at step 20)", 100 * 0.3 * (exp(-5 / 20.0) - exp(-1.0)));
    assert_string_equal(json_string_value(json_object_get(s3, "headline_delta")), want);
    double lr_min = json_number_value(json_object_get(s3, "lr_min")), lr_max = json_number_value(json_object_get(s3, "lr_max"));
    if (!(lr_min < 1e-6 && lr_max > 1e-6 && lr_max - lr_min < 1e-5))
        fail_msg("actor/lr = 1e-6 on a y range of [%g, %g]", lr_min, lr_max);
    assert_non_null(strstr(json_string_value(json_object_get(s3, "events")), "demo: a synthetic event (restart 0)"));
    assert_true(state_int(s3, "samples") >= 10);
    assert_string_equal(json_string_value(json_object_get(s3, "title")), "dapo dashboard");   /* no script ran */
    assert_non_null(strstr(json_string_value(json_object_get(s3, "sample_text")), "<script>document.title='pwned'</script>"));
    assert_non_null(strstr(json_string_value(json_object_get(s3, "sample_text")), "\xEF\xBF\xBD"));
    assert_non_null(strstr(json_string_value(json_object_get(s3, "workers_row")), "no worker has registered yet"));
    assert_true(state_int(s3, "config") > 1000);
    assert_false(json_is_true(json_object_get(s3, "paused")));
    assert_string_equal(json_string_value(json_object_get(s3, "errors")), "");   /* no JS error, no CSP violation */

    /* The Content-Security-Policy holds (an injected inline script does not run) and the hook sees violations. */
    json_t *csp = page_eval("(async () => { const s = document.createElement('script');"
                            " s.textContent = 'window.__inline = 1'; document.body.appendChild(s);"
                            " await new Promise(r => setTimeout(r, 200));"
                            " return JSON.stringify({ran: !!window.__inline, errors: window.__errors.join('; ')}); })()");
    assert_true(json_is_false(json_object_get(csp, "ran")));
    assert_non_null(strstr(json_string_value(json_object_get(csp, "errors")), "csp: script-src"));
    json_decref(csp);

    /* Pause through the control endpoint: the badge appears. */
    char hdr[128];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", TOKEN);
    assert_int_equal(tu_http(g.hport, "POST", "/api/control/pause", hdr, body, sizeof body), 200);
    json_decref(wait_state(paused_is, 1, 15000));

    /* The screenshot, for a person to look at. */
    json_t *shot = cdp_call("Page.captureScreenshot", json_pack("{s:s, s:b}", "format", "png", "captureBeyondViewport", 1), 1);
    const char *b64 = json_string_value(json_object_get(shot, "data"));
    assert_non_null(b64);
    unsigned char *png = malloc(strlen(b64));
    size_t n = b64_decode(b64, png);
    assert_true(n > 10000);
    assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
    char path[300];
    snprintf(path, sizeof path, "%s/dashboard.png", tu_build());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(png, 1, n, f), n);
    fclose(f);
    free(png);
    json_decref(shot);
    fprintf(stderr, "screenshot: %s (%zu bytes) after %.1f s\n", path, n, (clock_ms() - t0) / 1000.0);
    json_decref(s1);
    json_decref(s2);
    json_decref(s3);

    /* Without Chart.js (503 for /js/chart.min.js): the page says so, and the tables and counters still work. */
    char bin[256], log[300], bind[96], http[96], dir[260];
    int bport = tu_free_port();
    snprintf(bind, sizeof bind, "cluster.bind=tcp://127.0.0.1:%d", tu_free_port());
    snprintf(http, sizeof http, "cluster.http=127.0.0.1:%d", bport);
    snprintf(dir, sizeof dir, "trainer.default_local_dir=%s/ckpt-bare", g.logdir);
    snprintf(log, sizeof log, "%s/coordinator-bare.log", g.logdir);
    snprintf(bin, sizeof bin, "%s/tests/dapo-coordinator-demo", tu_build());
    char *bargv[] = {bin, bind, http, dir, "--demo-steps", "3", NULL};
    setenv("DAPO_CHARTJS", "/nonexistent/chart.min.js", 1);
    g.bare = tu_spawn(bargv, log);
    unsetenv("DAPO_CHARTJS");
    assert_true(g.bare > 0);
    int64_t up = clock_ms() + 5000;
    while (clock_ms() < up && tu_http(bport, "GET", "/api/status", NULL, body, sizeof body) != 200) usleep(50000);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/?poll_ms=250", bport);
    json_decref(cdp_call("Page.navigate", json_pack("{s:s}", "url", url), 1));
    json_t *s4 = wait_state(steps_and_samples, 3, 15000);       /* samples come from their own poll */
    assert_true(json_is_false(json_object_get(s4, "chart_js")));
    assert_true(json_is_false(json_object_get(s4, "error_hidden")));          /* the message is shown */
    assert_int_equal(state_int(s4, "instances"), 0);
    assert_int_equal(state_int(s4, "canvases"), state_int(s4, "charts_count"));
    assert_true(state_int(s4, "points") > 0);
    assert_true(state_int(s4, "samples") == 3);
    assert_string_equal(json_string_value(json_object_get(s4, "errors")), "");
    json_decref(s4);
    kill(g.bare, SIGTERM);
    assert_int_equal(tu_wait(g.bare, 5000), 0);
    g.bare = 0;

    /* The coordinator restarted (as its supervisor would: DAPO_RESTARTS=1): the page reloads, and the event list still
     * holds the event from before the restart, read back from events.jsonl, with the restart's own. */
    kill(g.coord, SIGTERM);
    assert_int_equal(tu_wait(g.coord, 5000), 0);
    snprintf(bind, sizeof bind, "cluster.bind=tcp://127.0.0.1:%d", tu_free_port());
    snprintf(http, sizeof http, "cluster.http=127.0.0.1:%d", g.hport);
    snprintf(dir, sizeof dir, "trainer.default_local_dir=%s/ckpt", g.logdir);
    snprintf(log, sizeof log, "%s/coordinator.log", g.logdir);
    char *rargv[] = {bin, bind, http, dir, "--demo-steps", "5", NULL};
    setenv("DAPO_RESTARTS", "1", 1);
    g.coord = tu_spawn(rargv, log);
    unsetenv("DAPO_RESTARTS");
    assert_true(g.coord > 0);
    up = clock_ms() + 5000;
    while (clock_ms() < up && tu_http(g.hport, "GET", "/api/status", NULL, body, sizeof body) != 200) usleep(50000);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/?poll_ms=250", g.hport);
    json_decref(cdp_call("Page.navigate", json_pack("{s:s}", "url", url), 1));
    json_t *s5 = wait_state(steps_at_least, 4, 15000);
    const char *ev = json_string_value(json_object_get(s5, "events"));
    if (!strstr(ev, "demo: a synthetic event (restart 0)") || !strstr(ev, "coordinator restarted by its supervisor"))
        fail_msg("the event list after the restart: %s", ev);
    json_decref(s5);

    cdp_send("Browser.close", NULL, 0);
    assert_int_equal(tu_wait(g.chrome, 10000), 0);
    fprintf(stderr, "the browser test took %.1f s\n", (clock_ms() - t0) / 1000.0);
    g.chrome = 0;
    kill(g.coord, SIGTERM);
    assert_int_equal(tu_wait(g.coord, 5000), 0);
    g.coord = 0;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_renders_and_updates),
    };
    return cmocka_run_group_tests_name("dashboard_browser", tests, setup, teardown);
}
