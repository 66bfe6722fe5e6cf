/* tests/integration/test_dashboard.c: the coordinator's HTTP dashboard, against real dapo-coordinator processes on
 * ephemeral ports. Coordinator A has a bearer token and records 10 synthetic steps (the test hook
 * tests/support/bin/dapo-coordinator-demo --demo-steps, one step per 200 ms); coordinator B has no token and a Chart.js path that does not
 * exist (DAPO_CHARTJS). Checked: every route's status, content type and content (the embedded page and assets
 * byte for byte against services/coordinator/static/, Chart.js against Debian's file), /api/metrics paging and
 * the exact synthetic values, /api/samples newest first with invalid UTF-8 replaced by U+FFFD (jansson refuses
 * invalid UTF-8, so parsing proves it), /api/config, /metrics as Prometheus text 0.0.4 (every line parsed: HELP and
 * TYPE before each family's samples, names, escaped labels, values), the control endpoints (401 without / with a
 * wrong token, 403 with none configured, 200 and the effect on /api/status and /metrics, 405, 404, checkpoint's
 * error answer, stop exits 0), and malformed HTTP (400, 413 for a 2 MB body sent in full, 414, 431, a half
 * request, idle connections), after all of which the coordinator still answers. Not here: the page in a browser
 * (tests/integration/longtest_dashboard_browser.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <netinet/tcp.h>
#include <sys/time.h>
#include <zmq.h>

#include "core/clock.h"
#include "net/net.h"
#include "tests/testutil.h"

#define TOKEN      "dash-test-token-0123456789"
#define DEMO_STEPS 10
#define CHARTJS    "/usr/share/javascript/chart.js/chart.min.js"

typedef struct {
    pid_t a, b;                 /* A: token + demo steps; B: no token, missing Chart.js */
    int   ha, hb, za, zb;       /* HTTP and ZeroMQ ports */
    char  logdir[160];
} Dash;

static Dash g;

/* ------------------------------------------------------------------------------------------ HTTP client */

typedef struct {
    int    status;
    char   head[4096];          /* status line + headers */
    char  *body;                /* into the static buffer */
    size_t body_len;
} Resp;

/* Sends raw (len bytes) to 127.0.0.1:port and reads the answer until the server closes. Returns the status or -1. */
static int http_raw(int port, const char *raw, size_t len, Resp *r) {
    static char buf[4 << 20];
    memset(r, 0, sizeof *r);
    r->status = -1;
    r->body = buf;
    buf[0] = 0;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = 10};
    if (s < 0) return -1;
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(s, (struct sockaddr *)&a, sizeof a)) { close(s); return -1; }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(s, raw + off, len - off);
        if (w <= 0) break;                           /* the server may answer (413) before reading it all */
        off += (size_t)w;
    }
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 && (n = read(s, buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)n;
    close(s);
    buf[got] = 0;
    char *end = strstr(buf, "\r\n\r\n");
    if (!end || sscanf(buf, "HTTP/1.1 %d", &r->status) != 1) return -1;
    snprintf(r->head, sizeof r->head, "%.*s", (int)(end + 2 - buf), buf);
    r->body = end + 4;
    r->body_len = got - (size_t)(end + 4 - buf);
    return r->status;
}

static int http_req(int port, const char *method, const char *path, const char *headers, Resp *r) {
    char req[2048];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: 0\r\n\r\n", method, path,
                     headers ? headers : "");
    return http_raw(port, req, (size_t)n, r);
}

static json_t *get_json(int port, const char *path) {
    Resp r;
    if (http_req(port, "GET", path, NULL, &r) != 200) return NULL;
    if (!strstr(r.head, "Content-Type: application/json\r\n")) return NULL;
    json_error_t e;
    json_t *j = json_loadb(r.body, r.body_len, 0, &e);
    if (!j) fprintf(stderr, "%s: not JSON: %s\n", path, e.text);
    return j;
}

/* The value of header name (case-sensitive, as we write it) into out; 1 when present. */
static int header(const Resp *r, const char *name, char *out, size_t n) {
    char key[128];
    snprintf(key, sizeof key, "\r\n%s: ", name);
    const char *p = strstr(r->head, key);
    if (!p) return 0;
    p += strlen(key);
    snprintf(out, n, "%.*s", (int)strcspn(p, "\r\n"), p);
    return 1;
}

/* The whole file at path into a malloc'd buffer (*n bytes), or NULL. */
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    b[*n] = 0;
    return b;
}

/* ------------------------------------------------------------------------------------------ setup */

/* dapo-coordinator, or with demo_steps > 0 the same coordinator with the synthetic steps of tests/support/dashboard_demo.h
 * ($DAPO_BUILD/tests/dapo-coordinator-demo --demo-steps N). */
static pid_t start_coord(int zport, int hport, const char *name, const char *extra1, int demo_steps) {
    char bin[256], log[256], bind[96], http[96], dir[256], steps[16];
    snprintf(dir, sizeof dir, "trainer.default_local_dir=%s/%s-ckpt", g.logdir, name);   /* never the repo's cwd */
    snprintf(bind, sizeof bind, "cluster.bind=tcp://127.0.0.1:%d", zport);
    snprintf(http, sizeof http, "cluster.http=127.0.0.1:%d", hport);
    snprintf(log, sizeof log, "%s/%s.log", g.logdir, name);
    snprintf(steps, sizeof steps, "%d", demo_steps);
    if (demo_steps > 0) snprintf(bin, sizeof bin, "%s/tests/dapo-coordinator-demo", tu_build());
    else tu_bin(bin, sizeof bin, "dapo-coordinator");
    char *argv[] = {bin, TU_DAPO_RECIPE, bind, http, "cluster.lease_timeout_s=60", dir, (char *)extra1, NULL, NULL, NULL};
    const size_t k = sizeof argv / sizeof argv[0] - 3;          /* the slots after extra1 */
    if (demo_steps > 0) { argv[k] = "--demo-steps"; argv[k + 1] = steps; }
    return tu_spawn(argv, log);
}

/* Waits until GET /api/status on port answers with needle in it. */
static int wait_for(int port, const char *needle, int ms) {
    int64_t end = clock_ms() + ms;
    Resp r;
    while (clock_ms() < end) {
        if (http_req(port, "GET", "/api/status", NULL, &r) == 200 && strstr(r.body, needle)) return 1;
        usleep(50000);
    }
    return 0;
}

static int setup(void **state) {
    (void)state;
    snprintf(g.logdir, sizeof g.logdir, "%s/test-logs/dashboard", tu_build());
    char cmd[512], tokfile[256], tokarg[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && rm -f %s/*.log", g.logdir, g.logdir);
    if (system(cmd)) return -1;
    snprintf(tokfile, sizeof tokfile, "%s/token", g.logdir);
    FILE *f = fopen(tokfile, "w");
    if (!f) return -1;
    fprintf(f, "%s\n", TOKEN);
    fclose(f);
    snprintf(tokarg, sizeof tokarg, "cluster.token_file=%s", tokfile);
    g.ha = tu_free_port(); g.hb = tu_free_port(); g.za = tu_free_port(); g.zb = tu_free_port();
    g.a = start_coord(g.za, g.ha, "coordinator-a", tokarg, DEMO_STEPS);
    setenv("DAPO_CHARTJS", "/nonexistent/chart.min.js", 1);
    g.b = start_coord(g.zb, g.hb, "coordinator-b", "cluster.run_id=dash-b", 0);
    unsetenv("DAPO_CHARTJS");
    if (g.a <= 0 || g.b <= 0) return -1;
    return wait_for(g.ha, "\"run_id\"", 10000) && wait_for(g.hb, "\"run_id\":\"dash-b\"", 10000) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (g.a > 0) { kill(g.a, SIGKILL); tu_wait(g.a, 3000); }
    if (g.b > 0) { kill(g.b, SIGKILL); tu_wait(g.b, 3000); }
    return 0;
}

/* ------------------------------------------------------------------------------------------ tests */

static void check_embedded(const char *path, const char *file, const char *ctype) {
    Resp r;
    char want[512], ct[128];
    assert_int_equal(http_req(g.ha, "GET", path, NULL, &r), 200);
    assert_true(header(&r, "Content-Type", ct, sizeof ct));
    assert_string_equal(ct, ctype);
    snprintf(want, sizeof want, "%s/services/coordinator/static/%s", tu_root(), file);
    size_t n;
    char *disk = slurp(want, &n);
    assert_non_null(disk);
    assert_int_equal(r.body_len, n);
    assert_memory_equal(r.body, disk, n);
    free(disk);
}

static void test_static_routes(void **state) {
    (void)state;
    Resp r;
    check_embedded("/", "index.html", "text/html; charset=utf-8");
    check_embedded("/index.html", "index.html", "text/html; charset=utf-8");
    check_embedded("/dashboard.js", "dashboard.js", "text/javascript; charset=utf-8");
    check_embedded("/dashboard.css", "dashboard.css", "text/css; charset=utf-8");
    assert_int_equal(http_req(g.ha, "GET", "/", NULL, &r), 200);
    assert_non_null(strstr(r.body, "<script src=\"/js/chart.min.js\"></script>"));
    assert_non_null(strstr(r.body, "id=\"points-plotted\""));
    assert_non_null(strstr(r.head, "Connection: close\r\n"));
    assert_non_null(strstr(r.head, "Cache-Control: no-store\r\n"));
    assert_non_null(strstr(r.head, "Content-Security-Policy: default-src 'self';"));
    assert_int_equal(http_req(g.ha, "GET", "/metrics", NULL, &r), 200);   /* mid-run: the latest-value table grows */
    assert_int_equal(http_req(g.ha, "GET", "/healthz", NULL, &r), 200);   /* the probes (deploy/k8s) */
    assert_string_equal(r.body, "ok\n");
    assert_int_equal(http_req(g.ha, "GET", "/readyz", NULL, &r), 200);
    assert_string_equal(r.body, "ready\n");
    /* Chart.js: Debian's file byte for byte (503 naming the package when it is missing, as on B). */
    size_t n;
    char *chart = slurp(CHARTJS, &n);
    int st = http_req(g.ha, "GET", "/js/chart.min.js", NULL, &r);
    if (chart) {
        assert_int_equal(st, 200);
        assert_int_equal(r.body_len, n);
        assert_memory_equal(r.body, chart, n);
        assert_non_null(strstr(r.head, "Content-Type: text/javascript; charset=utf-8\r\n"));
        free(chart);
    } else {
        assert_int_equal(st, 503);
    }
    assert_int_equal(http_req(g.hb, "GET", "/js/chart.min.js", NULL, &r), 503);
    assert_non_null(strstr(r.body, "/nonexistent/chart.min.js cannot be read"));
    assert_non_null(strstr(r.body, "libjs-chart.js"));
    /* Unknown paths, wrong methods, query strings on static files. */
    assert_int_equal(http_req(g.ha, "GET", "/nope", NULL, &r), 404);
    assert_int_equal(http_req(g.ha, "GET", "/static/../index.html", NULL, &r), 404);
    assert_int_equal(http_req(g.ha, "POST", "/", NULL, &r), 405);
    assert_non_null(strstr(r.head, "Allow: GET, HEAD\r\n"));
    assert_int_equal(http_req(g.ha, "DELETE", "/api/status", NULL, &r), 405);
    assert_int_equal(http_req(g.ha, "GET", "/dashboard.css?v=3", NULL, &r), 200);
    /* HEAD: the GET answer's headers, no body. */
    char len[32];
    assert_int_equal(http_req(g.ha, "HEAD", "/dashboard.js", NULL, &r), 200);
    assert_true(header(&r, "Content-Length", len, sizeof len));
    assert_true(atoi(len) > 1000);
    assert_int_equal(r.body_len, 0);
}

static double num(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    assert_non_null(v);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

/* critic/score/mean of synthetic step k (dashboard.c demo_step). */
static double demo_score(int k) { return -1 + 1.6 * (1 - exp(-(double)k / 8)) + 0.05 * sin((double)k); }

static void test_status_and_metrics(void **state) {
    (void)state;
    char needle[64];
    snprintf(needle, sizeof needle, "\"history\":%d,", DEMO_STEPS);
    assert_true(wait_for(g.ha, needle, 10000));
    json_t *st = get_json(g.ha, "/api/status");
    assert_non_null(st);
    assert_int_equal((int)num(st, "step"), DEMO_STEPS);
    assert_true(json_is_false(json_object_get(st, "paused")));
    assert_true(json_is_true(json_object_get(st, "control")));
    assert_string_equal(json_string_value(json_object_get(st, "status_line")), "demo: all 10 synthetic steps recorded");
    assert_true(json_is_array(json_object_get(st, "workers")));
    assert_true(num(st, "heap_bytes") > 0);
    /* Group accounting (steps.c): every state counted, adding up to "created". */
    json_t *groups = json_object_get(st, "groups");
    assert_true(json_is_object(groups) && json_object_size(groups) >= 2);
    double sum = 0;
    const char *gk;
    json_t *gv;
    json_object_foreach(groups, gk, gv) if (strcmp(gk, "created")) sum += json_number_value(gv);
    assert_true(sum == num(groups, "created"));
    json_decref(st);
    st = get_json(g.hb, "/api/status");
    assert_true(json_is_false(json_object_get(st, "control")));
    assert_int_equal((int)num(st, "history"), 0);
    json_decref(st);

    json_t *m = get_json(g.ha, "/api/metrics");
    assert_non_null(m);
    assert_int_equal((int)num(m, "next"), DEMO_STEPS);
    assert_int_equal((int)num(m, "total"), DEMO_STEPS);
    json_t *entries = json_object_get(m, "entries");
    assert_int_equal(json_array_size(entries), DEMO_STEPS);
    for (int i = 0; i < DEMO_STEPS; i++) {
        json_t *e = json_array_get(entries, (size_t)i);
        int k = i + 1;
        assert_int_equal((int)num(e, "step"), k);
        assert_true(num(e, "demo/synthetic") == 1.0);
        assert_true(num(e, "train/num_gen_batches") == 1 + k % 3);
        assert_true(fabs(num(e, "critic/score/mean") - demo_score(k)) < 1e-12);
        assert_true(num(e, "response_length/mean") == 800 + 20 * k);
        assert_int_equal(json_object_get(e, "val-core/math_dapo/acc/mean@4") != NULL, k % 5 == 0);
        assert_true(num(e, "demo/odd \"name\"\\ \xc3\xa9\xef\xbf\xbd") == 7);   /* the 0xFF byte became U+FFFD */
        if (k == 2) assert_true(json_is_null(json_object_get(e, "demo/nan")));   /* NaN at the source */
        else assert_null(json_object_get(e, "demo/nan"));
    }
    json_decref(m);
    /* Paging: since and limit. */
    m = get_json(g.ha, "/api/metrics?since=7");
    assert_int_equal(json_array_size(json_object_get(m, "entries")), 3);
    assert_int_equal((int)num(json_array_get(json_object_get(m, "entries"), 0), "step"), 8);
    assert_int_equal((int)num(m, "next"), 10);
    json_decref(m);
    m = get_json(g.ha, "/api/metrics?limit=2&since=7");
    assert_int_equal(json_array_size(json_object_get(m, "entries")), 2);
    assert_int_equal((int)num(m, "next"), 9);
    json_decref(m);
    m = get_json(g.ha, "/api/metrics?since=500");
    assert_int_equal(json_array_size(json_object_get(m, "entries")), 0);
    assert_int_equal((int)num(m, "next"), 10);
    json_decref(m);
    Resp r;
    assert_int_equal(http_req(g.ha, "GET", "/api/metrics?since=abc", NULL, &r), 400);
    assert_int_equal(http_req(g.ha, "GET", "/api/metrics?since=-1", NULL, &r), 400);
    assert_int_equal(http_req(g.ha, "GET", "/api/metrics?since=3x", NULL, &r), 400);
    assert_int_equal(http_req(g.ha, "GET", "/api/metrics?limit=0", NULL, &r), 400);
    assert_int_equal(http_req(g.ha, "GET", "/api/metrics?since=99999999999999999999999", NULL, &r), 400);
    m = get_json(g.hb, "/api/metrics?since=0");
    assert_int_equal(json_array_size(json_object_get(m, "entries")), 0);
    assert_int_equal((int)num(m, "next"), 0);
    json_decref(m);
}

/* /api/panels: the Run health panels' data per step from the demo's metrics (tests/support/dashboard_demo.c): the
 * time split derived as panels.c says, the funnel, percentiles with the histogram, paging, and 400 on bad input. */
static void test_panels(void **state) {
    (void)state;
    char needle[64];
    snprintf(needle, sizeof needle, "\"history\":%d,", DEMO_STEPS);
    assert_true(wait_for(g.ha, needle, 10000));
    json_t *p = get_json(g.ha, "/api/panels");
    assert_non_null(p);
    assert_int_equal((int)num(p, "next"), DEMO_STEPS);
    assert_int_equal((int)num(p, "len_bins"), 20);
    json_t *steps = json_object_get(p, "steps");
    assert_int_equal(json_array_size(steps), DEMO_STEPS);
    for (int i = 0; i < DEMO_STEPS; i++) {
        json_t *e = json_array_get(steps, (size_t)i), *t = json_object_get(e, "time_split");
        double k = i + 1;
        assert_int_equal((int)num(e, "step"), i + 1);
        assert_true(fabs(num(t, "generation") - (40 + 2 * sin(k) - 2)) < 1e-9);
        assert_true(num(t, "scoring_wait") == 2 && num(t, "old_log_prob") == 6 && num(t, "update") == 20);
        assert_true(num(t, "weight_sync") == 1.5 && num(t, "idle") == 0.25);
        json_t *fu = json_object_get(e, "funnel");
        assert_true(num(fu, "generated") == 12 && num(fu, "kept") == 8 && num(fu, "dropped") == 4);
        assert_true(num(fu, "solve_none") == 3 && num(fu, "solve_all") == 1 && num(fu, "trained") == 8);
        assert_true(json_is_null(json_object_get(fu, "refilled")));        /* the demo records none: null, not 0 */
        assert_int_equal(json_array_size(json_object_get(e, "staleness")), 0);
        json_t *rl = json_object_get(e, "response_length"), *h = json_object_get(rl, "hist");
        assert_true(num(rl, "p50") == 700 + 15 * k && num(rl, "mean") == 800 + 20 * k);
        assert_int_equal((int)num(h, "max_len"), 20480);
        json_t *counts = json_object_get(h, "counts");
        assert_int_equal(json_array_size(counts), 20);
        assert_int_equal(json_integer_value(json_array_get(counts, 0)), 200);
        assert_int_equal(json_integer_value(json_array_get(counts, 19)), (int)(200 * exp(-19 / 3.0)) + i + 1);
        assert_true(fabs(num(json_object_get(e, "throughput"), "effective") - (300 + 10 * k)) < 1e-9);
        assert_true(num(json_object_get(e, "logprob_mismatch"), "kl") > 0);
    }
    json_decref(p);
    p = get_json(g.ha, "/api/panels?since=8&limit=1");
    assert_int_equal(json_array_size(json_object_get(p, "steps")), 1);
    assert_int_equal((int)num(json_array_get(json_object_get(p, "steps"), 0), "step"), 9);
    assert_int_equal((int)num(p, "next"), 9);
    json_decref(p);
    Resp r;
    assert_int_equal(http_req(g.ha, "GET", "/api/panels?since=x", NULL, &r), 400);
    p = get_json(g.hb, "/api/panels");                       /* no history: no steps */
    assert_int_equal(json_array_size(json_object_get(p, "steps")), 0);
    json_decref(p);
}

static void test_samples_and_config(void **state) {
    (void)state;
    char needle[64];
    snprintf(needle, sizeof needle, "\"history\":%d,", DEMO_STEPS);
    assert_true(wait_for(g.ha, needle, 10000));
    json_t *j = get_json(g.ha, "/api/samples");       /* parses: jansson accepts only valid UTF-8 */
    assert_non_null(j);
    json_t *s = json_object_get(j, "samples");
    assert_int_equal(json_array_size(s), DEMO_STEPS);
    for (int i = 0; i < DEMO_STEPS; i++) {
        json_t *e = json_array_get(s, (size_t)i);
        int k = DEMO_STEPS - i;                          /* newest first */
        assert_int_equal((int)num(e, "step"), k);
        char truth[16], pred[16], resp[200];
        snprintf(truth, sizeof truth, "%d", 2 * k);
        snprintf(pred, sizeof pred, "%d", k % 3 ? 2 * k : 2 * k + 1);
        assert_string_equal(json_string_value(json_object_get(e, "ground_truth")), truth);
        assert_string_equal(json_string_value(json_object_get(e, "pred")), pred);
        assert_int_equal((int)num(e, "acc"), k % 3 != 0);
        assert_true(num(e, "score") == (k % 3 ? 1.0 : -1.0));
        assert_string_equal(json_string_value(json_object_get(e, "data_source")), "math_dapo");
        assert_string_equal(json_string_value(json_object_get(e, "finish_reason")), "stop");
        /* The 0xFF byte became U+FFFD; HTML stays text (the page puts it in through textContent). */
        snprintf(resp, sizeof resp, "Synthetic response for step %d. Invalid byte: \xEF\xBF\xBD here. "
                 "<script>document.title='pwned'</script>\nAnswer: \\boxed{%s}", k, pred);
        assert_string_equal(json_string_value(json_object_get(e, "response")), resp);
        assert_non_null(strstr(json_string_value(json_object_get(e, "prompt")), "<b>bold</b> & \"quotes\""));
        assert_true(json_is_false(json_object_get(e, "response_truncated")));
    }
    json_decref(j);
    j = get_json(g.hb, "/api/samples");
    assert_int_equal(json_array_size(json_object_get(j, "samples")), 0);
    json_decref(j);

    Resp r;
    assert_int_equal(http_req(g.ha, "GET", "/api/config", NULL, &r), 200);
    assert_non_null(strstr(r.head, "Content-Type: text/plain; charset=utf-8\r\n"));
    assert_non_null(strstr(r.body, "\ncluster:\n"));
    assert_non_null(strstr(r.body, "\n  token_file: "));
    assert_non_null(strstr(r.body, "\n    clip_ratio_high: 0.28\n"));
    assert_null(strstr(r.body, TOKEN));                  /* the file name is shown, never the token */
}

/* ------------------------------------------------------------------------------------------ /metrics */

typedef struct {
    char   name[160];
    char   labels[512];          /* raw, between the braces (unescaped below into `id`, `role`) */
    char   id[256], role[256];
    double value;
} PromSample;

static int name_ok(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i && c >= '0' && c <= '9');
        if (!ok) return 0;
    }
    return 1;
}

/* Parses label pairs k="v" (escapes \\ \" \n) into id/role; 0 on a syntax error. */
static int parse_labels(const char *p, PromSample *s) {
    while (*p) {
        const char *eq = strchr(p, '=');
        if (!eq || !name_ok(p, (size_t)(eq - p)) || eq[1] != '"') return 0;
        char key[64], val[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
        size_t k = 0;
        const char *q = eq + 2;
        for (; *q && *q != '"'; q++) {
            char c = *q;
            if (c == '\\') {
                q++;
                if (*q == 'n') c = '\n'; else if (*q == '\\' || *q == '"') c = *q; else return 0;
            } else if (c == '\n') {
                return 0;
            }
            if (k + 1 < sizeof val) val[k++] = c;
        }
        if (*q != '"') return 0;
        val[k] = 0;
        if (!strcmp(key, "id")) snprintf(s->id, sizeof s->id, "%s", val);
        if (!strcmp(key, "role")) snprintf(s->role, sizeof s->role, "%s", val);
        p = q + 1;
        if (*p == ',') p++; else if (*p) return 0;
    }
    return 1;
}

/* Checks the whole exposition (format 0.0.4) and returns its samples (malloc'd, *n). */
static PromSample *prom_parse(char *text, int *n) {
    PromSample *out = calloc(4096, sizeof *out);
    char typed[512][160];
    int ntyped = 0, count = 0;
    char current[160] = "";                  /* the family whose samples may follow */
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(count < 4096 && ntyped < 512);
        if (line[0] == '#') {
            char kind[8], name[160], rest[512] = "";
            assert_true(sscanf(line, "# %7s %159s %511[^\n]", kind, name, rest) >= 2);
            assert_true(name_ok(name, strlen(name)));
            if (!strcmp(kind, "HELP")) {
                assert_true(strlen(rest) > 0);
                for (const char *c = rest; *c; c++)
                    if (*c == '\\') { assert_true(c[1] == '\\' || c[1] == 'n'); c++; }
            } else {
                assert_string_equal(kind, "TYPE");
                assert_true(!strcmp(rest, "gauge") || !strcmp(rest, "counter"));
                for (int i = 0; i < ntyped; i++) assert_string_not_equal(typed[i], name);   /* one TYPE per family */
                snprintf(typed[ntyped++], 160, "%s", name);
                snprintf(current, sizeof current, "%s", name);
            }
            continue;
        }
        PromSample *s = &out[count++];
        size_t nl = strcspn(line, "{ ");
        assert_true(nl < sizeof s->name && name_ok(line, nl));
        snprintf(s->name, sizeof s->name, "%.*s", (int)nl, line);
        assert_string_equal(s->name, current);  /* samples follow their family's TYPE line, contiguously */
        char *p = line + nl;
        if (*p == '{') {
            char *close = p + 1;                 /* the closing brace: the first '}' outside quotes */
            for (int inq = 0; *close && (inq || *close != '}'); close++) {
                if (*close == '\\' && inq) close++;
                else if (*close == '"') inq = !inq;
            }
            assert_int_equal(*close, '}');
            snprintf(s->labels, sizeof s->labels, "%.*s", (int)(close - p - 1), p + 1);
            assert_true(parse_labels(s->labels, s));
            p = close + 1;
        }
        assert_int_equal(*p, ' ');
        p++;
        if (!strcmp(p, "NaN")) s->value = NAN;
        else if (!strcmp(p, "+Inf")) s->value = INFINITY;
        else if (!strcmp(p, "-Inf")) s->value = -INFINITY;
        else {
            char *end;
            s->value = strtod(p, &end);
            assert_true(end != p && *end == 0);
        }
    }
    *n = count;
    return out;
}

static const PromSample *prom_find(const PromSample *s, int n, const char *name, const char *id) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i].name, name) && (!id || !strcmp(s[i].id, id))) return &s[i];
    return NULL;
}

static double prom_value(const PromSample *s, int n, const char *name) {
    const PromSample *p = prom_find(s, n, name, NULL);
    if (!p) fail_msg("no sample %s", name);
    return p->value;
}

/* A fake rollout worker registers through the real protocol: an id with a quote, a backslash and a line break is
 * refused (issue 38: ids go into logs and labels), one with every punctuation allowed is taken; its odd build text
 * still needs escaping in JSON. */
#define WEIRD_ID "w.eird_id:x@host-1"
static void *fake_worker(void **ctx_out) {
    void *ctx = zmq_ctx_new();
    char err[ERR_LEN], ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", g.za);
    NetOpts o = {.routing_id = "weird-worker"};
    void *s = net_socket(ctx, ZMQ_DEALER, ep, &o, err);
    assert_non_null(s);
    Dapo__Hello h = DAPO__HELLO__INIT;
    h.protocol_version = DAPO_PROTOCOL_VERSION;
    h.role = DAPO__ROLE__ROLE_ROLLOUT;
    h.worker_id = "w\"eird\\id\nx";
    h.capacity = 4;
    h.build_info = "test \xff build";
    NetMsg m;
    assert_int_equal(net_send(s, NULL, 0, DAPO__MSG_TYPE__MSG_HELLO, &h.base, false), 0);
    assert_int_equal(net_recv(s, &m, 5000, 0, err), 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_WELCOME);
    assert_false(((Dapo__Welcome *)m.msg)->accepted);
    assert_non_null(strstr(((Dapo__Welcome *)m.msg)->reason, "worker id (11 bytes) is not"));
    net_msg_free(&m);
    h.worker_id = WEIRD_ID;
    assert_int_equal(net_send(s, NULL, 0, DAPO__MSG_TYPE__MSG_HELLO, &h.base, false), 0);
    assert_int_equal(net_recv(s, &m, 5000, 0, err), 0);
    assert_int_equal(m.type, DAPO__MSG_TYPE__MSG_WELCOME);
    assert_true(((Dapo__Welcome *)m.msg)->accepted);
    net_msg_free(&m);
    *ctx_out = ctx;
    return s;
}

static void test_prometheus(void **state) {
    (void)state;
    char needle[64];
    snprintf(needle, sizeof needle, "\"history\":%d,", DEMO_STEPS);
    assert_true(wait_for(g.ha, needle, 10000));
    void *ctx, *wsock = fake_worker(&ctx);
    assert_true(wait_for(g.ha, "\"rollout\":1", 5000));
    json_t *st = get_json(g.ha, "/api/status");          /* the odd id and build survive JSON too */
    json_t *w = json_array_get(json_object_get(st, "workers"), 0);
    assert_string_equal(json_string_value(json_object_get(w, "id")), WEIRD_ID);
    assert_string_equal(json_string_value(json_object_get(w, "build")), "test \xEF\xBF\xBD build");
    assert_null(json_object_get(w, "routing_id"));       /* not shown (issue 38) */
    /* the table shows the connection's peer address (ZeroMQ's Peer-Address: the IP over TCP), not the routing id */
    assert_string_equal(json_string_value(json_object_get(w, "address")), "127.0.0.1");
    json_decref(st);

    Resp r;
    assert_int_equal(http_req(g.ha, "GET", "/metrics", NULL, &r), 200);
    assert_non_null(strstr(r.head, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
    assert_true(r.body_len > 0 && r.body[r.body_len - 1] == '\n');
    /* A name needing escapes: sanitized in the metric name, escaped (\\) and made valid UTF-8 in HELP. */
    assert_non_null(strstr(r.body, "\n# HELP dapo_demo_odd__name______ Step metric demo/odd \"name\"\\\\ \xc3\xa9\xef\xbf\xbd "
                                   "(latest value, step 10).\n# TYPE dapo_demo_odd__name______ gauge\ndapo_demo_odd__name______ 7\n"));
    /* promtool (Debian's prometheus package) finds nothing to complain about (before
     * prom_parse, which cuts the body up in place). */
    char path[300], cmd[400], out[4096];
    snprintf(path, sizeof path, "%s/metrics.prom", g.logdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(r.body, 1, r.body_len, f), r.body_len);
    fclose(f);
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
    int rc = tu_run(cmd, out, sizeof out);
    if (rc || out[0]) fail_msg("promtool check metrics: exit %d\n%s", rc, out);
    int n;
    PromSample *s = prom_parse(r.body, &n);
    assert_true(n > 40);
    assert_true(prom_value(s, n, "dapo_demo_synthetic") == 1);
    assert_true(prom_value(s, n, "dapo_step") == DEMO_STEPS);
    assert_true(prom_value(s, n, "dapo_train_num_gen_batches") == 1 + DEMO_STEPS % 3);
    assert_true(fabs(prom_value(s, n, "dapo_critic_score_mean") - demo_score(DEMO_STEPS)) < 1e-12);
    assert_true(prom_value(s, n, "dapo_val_core_math_dapo_acc_mean_4") > 0);   /* val-core/math_dapo/acc/mean@4 */
    assert_true(isnan(prom_value(s, n, "dapo_demo_nan")));  /* latest value of a metric absent from later steps */
    assert_true(prom_value(s, n, "dapo_timing_step_seconds") > 60);             /* timing_s/step: the unit spelled out */
    assert_null(strstr(r.body, "dapo_timing_s_"));
    assert_true(prom_value(s, n, "dapo_coordinator_step") == DEMO_STEPS);
    assert_true(prom_value(s, n, "dapo_coordinator_paused") == 0);
    assert_true(prom_value(s, n, "dapo_coordinator_heap_bytes") > 0);
    assert_true(prom_value(s, n, "dapo_coordinator_messages_in_total") >= 1);
    assert_true(prom_value(s, n, "dapo_coordinator_messages_bad_total") == 0);
    const PromSample *up = prom_find(s, n, "dapo_worker_up", WEIRD_ID);
    assert_non_null(up);
    assert_string_equal(up->role, "rollout");
    assert_true(up->value == 1);
    assert_non_null(strstr(up->labels, "id=\"" WEIRD_ID "\""));
    assert_non_null(prom_find(s, n, "dapo_worker_capacity", WEIRD_ID));
    assert_true(prom_find(s, n, "dapo_worker_capacity", WEIRD_ID)->value == 4);
    free(s);
    zmq_close(wsock);
    zmq_ctx_term(ctx);

    /* B: no history and no worker: still a valid exposition. */
    assert_int_equal(http_req(g.hb, "GET", "/metrics", NULL, &r), 200);
    s = prom_parse(r.body, &n);
    assert_true(prom_value(s, n, "dapo_coordinator_history_entries") == 0);
    assert_null(prom_find(s, n, "dapo_worker_up", NULL));
    free(s);
}

/* ------------------------------------------------------------------------------------------ control */

static void test_control(void **state) {
    (void)state;
    Resp r;
    const char *right = "Authorization: Bearer " TOKEN "\r\n";
    /* Without a token, with wrong ones. */
    assert_int_equal(http_req(g.ha, "POST", "/api/control/pause", NULL, &r), 401);
    assert_non_null(strstr(r.head, "WWW-Authenticate: Bearer\r\n"));
    assert_int_equal(http_req(g.ha, "POST", "/api/control/pause", "Authorization: Bearer nope\r\n", &r), 401);
    assert_int_equal(http_req(g.ha, "POST", "/api/control/pause", "Authorization: Bearer " TOKEN "x\r\n", &r), 401);
    assert_int_equal(http_req(g.ha, "POST", "/api/control/pause", "Authorization: Bearer dash-test-token\r\n", &r), 401);
    assert_int_equal(http_req(g.ha, "POST", "/api/control/pause", "Authorization: Basic " TOKEN "\r\n", &r), 401);
    assert_int_equal(http_req(g.ha, "POST", "/api/control/pause", "Authorization: " TOKEN "\r\n", &r), 401);
    assert_int_equal(http_req(g.ha, "POST", "/api/control/stop", "Authorization: Bearer \r\n", &r), 401);
    json_t *st = get_json(g.ha, "/api/status");
    assert_true(json_is_false(json_object_get(st, "paused")));
    json_decref(st);
    /* No token configured (B): 403 whatever is sent. */
    assert_int_equal(http_req(g.hb, "POST", "/api/control/pause", NULL, &r), 403);
    assert_non_null(strstr(r.body, "no token configured"));
    assert_int_equal(http_req(g.hb, "POST", "/api/control/stop", right, &r), 403);
    /* Method and action checks come first. */
    assert_int_equal(http_req(g.ha, "GET", "/api/control/pause", right, &r), 405);
    assert_non_null(strstr(r.head, "Allow: POST\r\n"));
    assert_int_equal(http_req(g.ha, "POST", "/api/control/explode", right, &r), 404);
    /* The right token: pause, visible in /api/status and /metrics; resume. */
    assert_int_equal(http_req(g.ha, "POST", "/api/control/pause", right, &r), 200);
    assert_non_null(strstr(r.body, "\"ok\":true"));
    assert_non_null(strstr(r.body, "\"paused\":true"));
    st = get_json(g.ha, "/api/status");
    assert_true(json_is_true(json_object_get(st, "paused")));
    json_decref(st);
    assert_int_equal(http_req(g.ha, "GET", "/metrics", NULL, &r), 200);
    assert_non_null(strstr(r.body, "\ndapo_coordinator_paused 1\n"));
    assert_int_equal(http_req(g.ha, "POST", "/api/control/resume", "Authorization: bearer  " TOKEN " \r\n", &r), 200);
    st = get_json(g.ha, "/api/status");
    assert_true(json_is_false(json_object_get(st, "paused")));
    json_decref(st);
    /* The same request in pieces (the URL, a header name and the token each split across reads). */
    {
        const char *parts[] = {"POST /api/con", "trol/resume HTTP/1.1\r\nHost: x\r\nAuthori",
                               "zation: Bearer dash-test-tok", "en-0123456789\r\nContent-Length: 0\r\n", "\r\n"};
        int sk = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g.ha), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(connect(sk, (struct sockaddr *)&a, sizeof a), 0);
        setsockopt(sk, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        for (int i = 0; i < 5; i++) {
            assert_int_equal(write(sk, parts[i], strlen(parts[i])), (ssize_t)strlen(parts[i]));
            usleep(30000);
        }
        char got[512] = "";
        assert_true(read(sk, got, sizeof got - 1) > 0);
        close(sk);
        assert_int_equal(strncmp(got, "HTTP/1.1 200 OK\r\n", 17), 0);
    }
    /* Checkpoint: 200 when the coordinator can write one, else an error answer with its message. */
    int cs = http_req(g.ha, "POST", "/api/control/checkpoint", right, &r);
    json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
    assert_non_null(j);
    if (cs == 200) {
        assert_true(json_is_true(json_object_get(j, "ok")));
    } else {
        assert_true(cs == 500 || cs == 501);
        assert_true(json_is_false(json_object_get(j, "ok")));
        assert_true(strlen(json_string_value(json_object_get(j, "error"))) > 0);
    }
    json_decref(j);
}

/* ------------------------------------------------------------------------------------------ malformed HTTP */

static void test_malformed_http(void **state) {
    (void)state;
    Resp r;
    const char *garbage = "GARBAGE\r\n\r\n";
    assert_int_equal(http_raw(g.ha, garbage, strlen(garbage), &r), 400);
    assert_non_null(strstr(r.body, "malformed request"));
    const char *bad_len = "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n";
    assert_int_equal(http_raw(g.ha, bad_len, strlen(bad_len), &r), 400);
    const char *no_colon = "GET / HTTP/1.1\r\nHost x\r\n\r\n";
    assert_int_equal(http_raw(g.ha, no_colon, strlen(no_colon), &r), 400);
    const char *bad_version = "GET / HTTP/9.9.9\r\n\r\n";
    assert_int_equal(http_raw(g.ha, bad_version, strlen(bad_version), &r), 400);
    const char *binary = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";   /* a TLS ClientHello */
    assert_int_equal(http_raw(g.ha, binary, 11, &r), 400);
    const char *connect_req = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    assert_int_equal(http_raw(g.ha, connect_req, strlen(connect_req), &r), 400);
    /* An Upgrade header is ignored (RFC 9110 7.8 lets a server do so): a plain answer. */
    const char *upgrade = "GET /api/status HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    assert_int_equal(http_raw(g.ha, upgrade, strlen(upgrade), &r), 200);
    /* A 2 MB body sent in full: 413, and the client can read the answer. */
    size_t big = 2u << 20;
    char *req = malloc(big + 256);
    int hn = sprintf(req, "POST /api/control/pause HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN
                          "\r\nContent-Length: %zu\r\n\r\n", big);
    memset(req + hn, 'a', big);
    assert_int_equal(http_raw(g.ha, req, (size_t)hn + big, &r), 413);
    assert_non_null(strstr(r.body, "too large"));
    /* Exactly 1 MiB of body is read (and the route then says 405). */
    hn = sprintf(req, "POST /api/status HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 1 << 20);
    memset(req + hn, 'a', 1 << 20);
    assert_int_equal(http_raw(g.ha, req, (size_t)hn + (1 << 20), &r), 405);
    /* The same as a chunked body (no Content-Length): cut off once it passes 1 MiB. */
    hn = sprintf(req, "POST /api/status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    size_t off = (size_t)hn;
    for (int i = 0; i < 40; i++) {
        off += (size_t)sprintf(req + off, "%x\r\n", 50000);
        memset(req + off, 'b', 50000);
        off += 50000;
        off += (size_t)sprintf(req + off, "\r\n");
    }
    off += (size_t)sprintf(req + off, "0\r\n\r\n");
    assert_int_equal(http_raw(g.ha, req, off, &r), 413);
    /* A huge announced length, no body. */
    const char *huge = "POST /api/status HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n";
    assert_int_equal(http_raw(g.ha, huge, strlen(huge), &r), 413);
    /* URL over 4 KiB: 414; 100 KB of headers: 431. */
    hn = sprintf(req, "GET /");
    memset(req + hn, 'u', 5000);
    hn += 5000;
    hn += sprintf(req + hn, " HTTP/1.1\r\n\r\n");
    assert_int_equal(http_raw(g.ha, req, (size_t)hn, &r), 414);
    hn = sprintf(req, "GET / HTTP/1.1\r\nX-Big: ");
    memset(req + hn, 'h', 100000);
    hn += 100000;
    hn += sprintf(req + hn, "\r\n\r\n");
    assert_int_equal(http_raw(g.ha, req, (size_t)hn, &r), 431);
    /* A small body is fine (and ignored) on a GET. */
    const char *with_body = "GET /api/status HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
    assert_int_equal(http_raw(g.ha, with_body, strlen(with_body), &r), 200);
    /* HTTP/1.0 and an absolute-form URL. */
    const char *old = "GET http://127.0.0.1/api/status?x=1 HTTP/1.0\r\n\r\n";
    assert_int_equal(http_raw(g.ha, old, strlen(old), &r), 200);
    assert_non_null(strstr(r.body, "\"run_id\""));
    free(req);
    /* Half a request then a close, and idle connections left open: neither blocks anyone. */
    int idle[20];
    for (int i = 0; i < 20; i++) {
        idle[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g.ha), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(connect(idle[i], (struct sockaddr *)&a, sizeof a), 0);
        if (i % 2) assert_int_equal(write(idle[i], "GET /api/sta", 12), 12);
    }
    close(idle[0]);
    close(idle[1]);
    for (int i = 0; i < 5; i++) assert_int_equal(http_req(g.ha, "GET", "/api/status", NULL, &r), 200);
    for (int i = 2; i < 20; i++) close(idle[i]);
    /* More idle connections than the server keeps (256): the oldest give way, a real request still gets in. */
    static int many[300];
    for (int i = 0; i < 300; i++) {
        many[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g.ha), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(connect(many[i], (struct sockaddr *)&a, sizeof a), 0);
    }
    assert_int_equal(http_req(g.ha, "GET", "/api/status", NULL, &r), 200);
    char c1;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(many[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(read(many[0], &c1, 1), 0);          /* the first one was closed by the server */
    for (int i = 0; i < 300; i++) close(many[i]);
    /* Still serving everything. */
    assert_int_equal(http_req(g.ha, "GET", "/", NULL, &r), 200);
    json_t *st = get_json(g.ha, "/api/status");
    assert_non_null(st);
    assert_true(json_is_false(json_object_get(st, "paused")));    /* the 413'd pause did nothing */
    json_decref(st);
}

/* Last: stop through the dashboard; the coordinator answers, then exits 0 (and B exits 0 on SIGTERM). */
static void test_stop(void **state) {
    (void)state;
    Resp r;
    assert_int_equal(http_req(g.ha, "POST", "/api/control/stop", "Authorization: Bearer " TOKEN "\r\n", &r), 200);
    assert_non_null(strstr(r.body, "\"action\":\"stop\""));
    assert_int_equal(tu_wait(g.a, 5000), 0);
    g.a = 0;
    assert_int_equal(http_req(g.ha, "GET", "/api/status", NULL, &r), -1);   /* nobody listens any more */
    kill(g.b, SIGTERM);
    assert_int_equal(tu_wait(g.b, 5000), 0);
    g.b = 0;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_routes),
        cmocka_unit_test(test_status_and_metrics),
        cmocka_unit_test(test_samples_and_config),
        cmocka_unit_test(test_prometheus),
        cmocka_unit_test(test_panels),
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_malformed_http),
        cmocka_unit_test(test_stop),
    };
    return cmocka_run_group_tests_name("dashboard", tests, setup, teardown);
}
