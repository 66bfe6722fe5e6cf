/* tests/integration/test_supervise.c: dapo-supervise's restart rules on plain shell processes (issue 31): a daemon
 * that keeps failing the same way is given up on even when each start lives longer than --min-uptime (the learner
 * that waited out its join timeout every 20 s was restarted for ever), while deaths from outside (SIGKILL) do not
 * count; and the test-only DAPO_SUPERVISE_RESTART_DELAY starts a named daemon that many seconds late after a death.
 * Bad values of the new flags and of the variable are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>

#include "core/clock.h"
#include "tests/testutil.h"

static char dir[400];

/* A run directory with a spec of a "coordinator" running coord_sh (NULL: a long sleep) and one worker running
 * `worker_sh`. */
static void make_spec_coord(const char *name, const char *coord_sh, const char *worker_sh) {
    snprintf(dir, sizeof dir, "%s/test-logs/%s", tu_build(), name);
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    assert_int_equal(system(cmd), 0);
    json_t *procs = json_pack("[{s:s, s:[s,s,s]}, {s:s, s:[s,s,s]}]", "name", "coordinator", "argv", "/bin/sh", "-c",
                              coord_sh ? coord_sh : "exec sleep 60", "name", "worker", "argv", "/bin/sh", "-c", worker_sh);
    json_t *o = json_pack("{s:o}", "procs", procs);
    char spec[500];
    snprintf(spec, sizeof spec, "%s/procs.json", dir);
    assert_int_equal(json_dump_file(o, spec, 0), 0);
    json_decref(o);
}

static void make_spec(const char *name, const char *worker_sh) { make_spec_coord(name, NULL, worker_sh); }

/* Runs the supervisor on the spec with extra flags (NULL-terminated); its exit status, its output in out. */
static int supervise(char *const *extra, int ms, char *out, size_t cap) {
    char bin[300], spec[500], log[500];
    snprintf(spec, sizeof spec, "%s/procs.json", dir);
    snprintf(log, sizeof log, "%s/supervisor.out", dir);
    remove(log);
    char *argv[24] = {(char *)tu_bin(bin, sizeof bin, "dapo-supervise"), "--run-dir", dir, "--spec", spec};
    int n = 5;
    for (int i = 0; extra && extra[i] && n < 22; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t p = tu_spawn(argv, log);
    assert_true(p > 0);
    int rc = tu_wait(p, ms);
    if (rc < 0) { kill(p, SIGKILL); tu_wait(p, 2000); }
    FILE *f = fopen(log, "r");
    size_t k = f ? fread(out, 1, cap - 1, f) : 0;
    out[k] = 0;
    if (f) fclose(f);
    return rc;
}

/* Exits with status 1 after 0.4 s, every start: past --min-uptime 0.2, so only --max-same stops it. */
static void test_same_failure_given_up(void **state) {
    (void)state;
    make_spec("supervise-same", "echo this start says hello; sleep 0.4; exit 1");
    char out[1 << 14], *extra[] = {"--min-uptime", "0.2", "--max-same", "3", "--same-window", "60", NULL};
    double t0 = clock_s();
    int rc = supervise(extra, 20000, out, sizeof out);
    assert_int_equal(rc, 1);
    assert_true(clock_s() - t0 < 10);
    if (!strstr(out, "worker exited with status 1, the same way 3 times within 60 s: giving up on it"))
        fail_msg("no give-up line in:\n%s", out);
    /* the end of the log shown is this start's only (issue 33): from its marker on, one hello */
    const char *tail = strstr(out, "dapo: the end of");
    assert_non_null(tail);
    assert_non_null(strstr(tail, "==== dapo-supervise: start 3 of worker at "));
    assert_null(strstr(tail, "start 2 of worker"));
    assert_non_null(strstr(tail, "this start says hello"));
    assert_null(strstr(strstr(tail, "this start says hello") + 1, "this start says hello"));
    char cmd[1000], n[32];
    snprintf(cmd, sizeof cmd, "grep -c '\"event\":\"gave_up\",\"name\":\"worker\"' %s/logs/supervisor.jsonl", dir);
    tu_run(cmd, n, sizeof n);
    assert_int_equal(atoi(n), 1);
    snprintf(cmd, sizeof cmd, "grep -c '\"event\":\"restart\",\"name\":\"worker\"' %s/logs/supervisor.jsonl", dir);
    tu_run(cmd, n, sizeof n);
    assert_int_equal(atoi(n), 2);                    /* restarted twice, given up on at the third death */
}

/* Killed with SIGKILL every start (from outside, as a chaos test does): restarted each time, never given up on by
 * --max-same; the supervisor is stopped with SIGTERM after 8 deaths. DAPO_SUPERVISE_RESTART_DELAY=worker=0.5 makes
 * every restart wait 0.5 s (at once without it: the first restart of a streak). */
static void test_kills_do_not_count_and_delay(void **state) {
    (void)state;
    char sh[700];
    snprintf(dir, sizeof dir, "%s/test-logs/supervise-kill", tu_build());
    snprintf(sh, sizeof sh, "date +%%s.%%N >> %s/starts; sleep 0.3; kill -9 $$", dir);
    make_spec("supervise-kill", sh);
    setenv("DAPO_SUPERVISE_RESTART_DELAY", "worker=0.5", 1);
    char bin[300], spec[500], log[500];
    snprintf(spec, sizeof spec, "%s/procs.json", dir);
    snprintf(log, sizeof log, "%s/supervisor.out", dir);
    char *argv[] = {(char *)tu_bin(bin, sizeof bin, "dapo-supervise"), "--run-dir", dir, "--spec", spec,
                    "--min-uptime", "0.2", "--max-same", "2", NULL};
    pid_t p = tu_spawn(argv, log);
    unsetenv("DAPO_SUPERVISE_RESTART_DELAY");
    assert_true(p > 0);
    usleep(6500000);
    kill(p, SIGTERM);
    tu_wait(p, 10000);
    char path[500], line[64];
    snprintf(path, sizeof path, "%s/starts", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    double t[64];
    int n = 0;
    while (n < 64 && fgets(line, sizeof line, f)) t[n++] = atof(line);
    fclose(f);
    assert_true(n >= 5);                             /* 0.3 s up + 0.5 s down: about 8 starts in 6.5 s */
    for (int i = 1; i < n; i++)
        if (t[i] - t[i - 1] < 0.75) fail_msg("start %d came %.2f s after start %d (want >= 0.8: 0.3 up, 0.5 delay)", i,
                                             t[i] - t[i - 1], i - 1);
    char cmd[1000], k[32];
    snprintf(cmd, sizeof cmd, "grep -c gave_up %s/logs/supervisor.jsonl", dir);
    tu_run(cmd, k, sizeof k);
    assert_int_equal(atoi(k), 0);
}

/* The coordinator stopped as asked without its last checkpoint (stopped twice: exit DAPO_EXIT_STOPPED) ends the run,
 * failed, and is not restarted (a helper's break test saw a double stop restart the run from its last checkpoint). */
static void test_coordinator_stopped_not_restarted(void **state) {
    (void)state;
    make_spec_coord("supervise-stopped", "sleep 0.5; exit 76", "exec sleep 60");
    char out[1 << 14];
    int rc = supervise(NULL, 20000, out, sizeof out);
    assert_int_equal(rc, 1);
    if (!strstr(out, "coordinator stopped as asked, the run not ended well (status 76"))
        fail_msg("no stop line in:\n%s", out);
    if (!strstr(out, "the run was stopped before it ended well"))
        fail_msg("no closing line for a stop in:\n%s", out);
    char cmd[1000], n[32];
    snprintf(cmd, sizeof cmd, "grep -c '\"event\":\"restart\"' %s/logs/supervisor.jsonl", dir);
    tu_run(cmd, n, sizeof n);
    assert_int_equal(atoi(n), 0);
}

static void test_bad_values(void **state) {
    (void)state;
    make_spec("supervise-bad", "sleep 5");
    char out[4096];
    char *a1[] = {"--max-same", "2.5", NULL}, *a2[] = {"--same-window", "0", NULL};
    assert_int_equal(supervise(a1, 5000, out, sizeof out), 2);
    assert_non_null(strstr(out, "--max-same needs a whole number"));
    assert_int_equal(supervise(a2, 5000, out, sizeof out), 2);
    assert_non_null(strstr(out, "--same-window needs a number"));
    const char *bad[] = {"nobody=1", "worker=-1", "worker", "worker=1x", "worker=1,coordinator=", "worker=1,",
                         ",worker=1", "worker=1,,coordinator=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("DAPO_SUPERVISE_RESTART_DELAY", bad[i], 1);
        int rc = supervise(NULL, 5000, out, sizeof out);
        unsetenv("DAPO_SUPERVISE_RESTART_DELAY");
        if (rc != 2 || !strstr(out, "DAPO_SUPERVISE_RESTART_DELAY needs name=seconds"))
            fail_msg("'%s': status %d, output:\n%s", bad[i], rc, out);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_failure_given_up),
        cmocka_unit_test(test_kills_do_not_count_and_delay),
        cmocka_unit_test(test_coordinator_stopped_not_restarted),
        cmocka_unit_test(test_bad_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
