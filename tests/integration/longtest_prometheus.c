/* tests/integration/longtest_prometheus.c (make check-long): a real Prometheus (Debian's prometheus package)
 * scrapes the coordinator's /metrics every second while the loopback cluster (tests/support/cluster_job.h) trains 3
 * steps, then the test reads the series back through Prometheus's HTTP API (/api/v1/query): the scrape target is up,
 * the counters of the run's accounting hold its final values (12 groups trained, 18 generated and scored, every
 * response scored ok), the step gauges (dapo_timing_step_seconds, dapo_perf_effective_throughput, ...) have one
 * sample per scrape, and dapo_groups_generated_total only grows. Prometheus's own log: test-logs/prometheus/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>

#include "core/clock.h"
#include "tests/support/cluster_job.h"
#include "tests/testutil.h"

static Job j;
static pid_t g_prom;
static int g_pport;

static int teardown(void **state) {
    (void)state;
    job_stop_all(&j);
    if (g_prom > 0) { kill(g_prom, SIGTERM); if (tu_wait(g_prom, 10000) < 0) { kill(g_prom, SIGKILL); tu_wait(g_prom, 2000); } }
    g_prom = 0;
    return 0;
}

/* GET http://127.0.0.1:port + path through python3's urllib (Prometheus keeps connections alive, tu_http reads to
 * the end of the stream). The parsed JSON answer, or NULL. */
static json_t *api_get(const char *path) {
    static char out[1 << 20];
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
             "\"http://127.0.0.1:%d\" + sys.argv[1], timeout=10).read().decode())' '%s' 2>/dev/null", g_pport, path);
    if (tu_run(cmd, out, sizeof out)) return NULL;
    return json_loads(out, 0, NULL);
}

/* The value of an instant query's single result, or NAN (none, several, or an error). */
static double query1(const char *expr) {
    char path[1024], enc[900];
    size_t k = 0;
    for (const char *p = expr; *p && k + 4 < sizeof enc; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_') enc[k++] = *p;
        else k += (size_t)snprintf(enc + k, sizeof enc - k, "%%%02X", (unsigned char)*p);
    }
    enc[k] = 0;
    snprintf(path, sizeof path, "/api/v1/query?query=%s", enc);
    json_t *j = api_get(path);
    json_t *res = json_object_get(json_object_get(j, "data"), "result");
    double v = NAN;
    if (json_array_size(res) == 1)
        v = atof(json_string_value(json_array_get(json_object_get(json_array_get(res, 0), "value"), 1)));
    json_decref(j);
    return v;
}

static void test_prometheus_scrapes_a_run(void **state) {
    (void)state;
    job_setup(&j, "prometheus");
    char dir[400], cfg[500], cmd[2000], tsdb[500], listen[64], log[500];
    snprintf(dir, sizeof dir, "%s", j.dir);
    snprintf(cfg, sizeof cfg, "%s/prometheus.yml", dir);
    snprintf(tsdb, sizeof tsdb, "--storage.tsdb.path=%s/tsdb", dir);
    g_pport = tu_free_port();
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", g_pport);
    snprintf(log, sizeof log, "%s/prometheus.log", dir);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: dapo\n"
               "    static_configs:\n      - targets: ['127.0.0.1:%d']\n", j.hport);
    fclose(f);
    char cfgarg[600];
    snprintf(cfgarg, sizeof cfgarg, "--config.file=%s", cfg);
    g_prom = tu_spawn((char *[]){"/usr/bin/prometheus", cfgarg, tsdb, listen, NULL}, log);
    assert_true(g_prom > 0);
    job_start_all(&j, "3");
    json_t *st = job_wait_for(&j, job_done, 180000, "3 steps done");
    json_decref(st);
    /* a few more scrapes of the finished run, then the API */
    int64_t end = clock_ms() + 30000;
    while (clock_ms() < end && !(query1("up{job=\"dapo\"}") == 1 &&
                                 query1("dapo_groups_finished_total{state=\"trained\"}") == 12))
        usleep(500000);
    assert_true(query1("up{job=\"dapo\"}") == 1);
    assert_true(query1("dapo_groups_finished_total{state=\"trained\"}") == 12);   /* 3 steps x 4 groups */
    assert_true(query1("dapo_groups_generated_total") == 18);                      /* 3 x gen_batch_size 6 */
    assert_true(query1("dapo_groups_scored_total") == 18);
    assert_true(query1("dapo_reward_responses_total{outcome=\"ok\"}") == 72);     /* 18 groups x n 4 */
    assert_true(query1("dapo_reward_responses_total{outcome=\"timeout\"}") == 0);
    assert_true(query1("dapo_coordinator_step") == 3);
    assert_true(query1("dapo_timing_step_seconds") > 0);
    assert_true(query1("dapo_perf_effective_throughput") > 0);
    assert_true(query1("dapo_workers_alive{role=\"rollout\"}") == 2);
    assert_true(query1("dapo_tokens_trained_total") > 0);
    /* history: more than one scrape, and the generated counter never went down */
    double samples = query1("count_over_time(dapo_groups_generated_total[5m])");
    assert_true(samples >= 3);
    assert_true(query1("resets(dapo_groups_generated_total[5m])") == 0);
    snprintf(cmd, sizeof cmd, "grep -c 'level=error' %s >/dev/null && grep 'level=error' %s | head -5", log, log);
    char out[4096];
    if (tu_run(cmd, out, sizeof out) == 0) fprintf(stderr, "prometheus logged errors:\n%s", out);
    fprintf(stderr, "prometheus: %.0f scrapes of dapo_groups_generated_total\n", samples);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_prometheus_scrapes_a_run, teardown),
    };
    return cmocka_run_group_tests_name("prometheus", tests, NULL, NULL);
}
