/* tests/integration/test_launcher.c: deploy/local/run.sh as a user starts it in the background (`make run &`,
 * `nohup ... &`): a non-interactive shell starts it with SIGINT ignored, which bash cannot trap (issue 17). The
 * launcher becomes dapo-supervise, which resets what it inherited: a rollout killed with SIGKILL is restarted and the
 * pids file names the new pid; SIGINT to the launcher's pid then stops the whole run cleanly (the coordinator
 * checkpoints and exits, then the workers), leaving no process of the run and no pids file; the dashboard token file
 * is made (mode 0600) and its controls are on. The other ways a user stops a run in the foreground go through the
 * same handler and are checked the same way: Ctrl-C (SIGINT to the terminal's foreground process group), SIGTERM
 * (kill, systemd) and SIGHUP (the terminal closed); the daemons report how often they were restarted (DAPO_RESTARTS,
 * the dashboard's "restarts" column); a worker stopped with a plain kill (it exits 0) is restarted as well; and when
 * the supervisor itself is killed with SIGKILL the daemons stop by themselves. A fresh tiny model on the command line skips the SFT preparation.
 * Issue 33: a second launch beside a live run, on one of its ports, fails in under a second before any preparation,
 * naming the key; with --port-base it runs beside the first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "tests/testutil.h"

static char dir[400];
static int hport;

static pid_t pid_of(const char *name) {
    char path[500];
    snprintf(path, sizeof path, "%s/run/pids", dir);
    return tu_pid_in(path, name);
}

static int alive(pid_t p) { return p > 0 && kill(p, 0) == 0; }

/* The launcher's pid, written by the shell that started it in the background. */
static pid_t launcher_pid(void) {
    char path[500], buf[32] = "";
    snprintf(path, sizeof path, "%s/launcher.pid", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
    return (pid_t)atoi(buf);
}

static pid_t g_fg = -1;          /* a foreground launcher: our child (reaped by tu_wait, never a zombie left alive) */

static int teardown(void **state) {
    (void)state;
    pid_t p = g_fg > 0 ? g_fg : launcher_pid();
    if (alive(p)) { kill(p, SIGKILL); }
    if (g_fg > 0) { tu_wait(g_fg, 5000); g_fg = -1; }
    const char *names[] = {"coordinator", "verifier-0", "learner-0", "rollout-0"};
    for (int i = 0; i < 4; i++) if (alive(pid_of(names[i]))) kill(pid_of(names[i]), SIGKILL);
    return 0;
}

/* run.sh's arguments: a fresh tiny model (made here), loopback ports, a fast heartbeat. */
static void run_args(char *out, size_t cap) {
    char cmd[4000], bin[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && %s --config %s/configs/tiny-model/config.json --tokenizer "
             "%s/data/tokenizers/tiny --out %s/model > %s/init.log 2>&1", dir, dir,
             tu_bin(bin, sizeof bin, "dapo-init-model"), tu_root(), tu_root(), dir, dir);
    assert_int_equal(system(cmd), 0);
    hport = tu_free_port();
    int zp = tu_free_port(), wp = tu_free_port(), cp = tu_free_port();
    snprintf(out, cap, "--run-dir %s/run actor_rollout_ref.model.path=%s/model "
             "cluster.bind=tcp://127.0.0.1:%d cluster.coordinator=tcp://127.0.0.1:%d cluster.weights_bind=tcp://127.0.0.1:%d "
             "cluster.weights=tcp://127.0.0.1:%d cluster.collective=tcp://127.0.0.1:%d cluster.http=127.0.0.1:%d "
             "cluster.heartbeat_ms=100 cluster.lease_timeout_s=1.5 trainer.val_before_train=false "
             /* a random model solves nothing: with dynamic sampling a fast machine fails the run (no mixed group
              * after max_num_gen_batches rounds) before a test stops it, and the run's exit status is then 1 */
             "algorithm.filter_groups.enable=false",
             dir, dir, zp, zp, wp, wp, cp, hport);
}

/* Every daemon up and the coordinator answering; L is the launcher's pid, which must have become the supervisor. */
static void wait_up(pid_t L) {
    char status[512];
    int64_t end = clock_ms() + 120000;
    while (clock_ms() < end && !(alive(pid_of("rollout-0")) && alive(pid_of("learner-0")) &&
                                 tu_http(hport, "GET", "/api/status", NULL, status, sizeof status) == 200))
        usleep(100000);
    assert_true(alive(pid_of("rollout-0")));
    assert_int_equal(pid_of("supervisor"), L);                      /* run.sh became the supervisor */
}

/* Sends sig (to the process group when group: a terminal's Ctrl-C) and checks the run stopped cleanly: the launcher
 * and every daemon gone, no pids file, the coordinator's log says it stopped. Returns the launcher's exit status
 * when it is our child (fg), else 0. */
static int stop_and_check(pid_t L, int sig, int group, int fg) {
    pid_t all[] = {pid_of("coordinator"), pid_of("verifier-0"), pid_of("learner-0"), pid_of("rollout-0")};
    kill(group ? -L : L, sig);
    int rc = 0;
    if (fg) {
        rc = tu_wait(L, 60000);
        g_fg = -1;
    } else {
        int64_t end = clock_ms() + 60000;
        while (clock_ms() < end && alive(L)) usleep(100000);
    }
    assert_false(alive(L));
    for (int i = 0; i < 4; i++) assert_false(alive(all[i]));
    char path[600], cmd[700], out[64];
    snprintf(path, sizeof path, "%s/run/pids", dir);
    assert_int_not_equal(access(path, F_OK), 0);
    snprintf(cmd, sizeof cmd, "grep -c 'stopped' %s/run/logs/coordinator.log", dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    return rc;
}

static void test_background_sigint_and_restart(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "%s/test-logs/launcher", tu_build());
    char args[1500], cmd[4000];
    run_args(args, sizeof args);
    /* bash -c '... &': a background job of a non-interactive shell, SIGINT ignored (as under nohup or make &) */
    snprintf(cmd, sizeof cmd, "cd %s && BUILD=%s bash -c 'deploy/local/run.sh %s > %s/launcher.out 2>&1 & "
             "echo $! > %s/launcher.pid'", tu_root(), tu_build(), args, dir, dir);
    assert_int_equal(system(cmd), 0);
    pid_t L = launcher_pid();
    assert_true(L > 0);
    wait_up(L);
    char tok[600];
    snprintf(tok, sizeof tok, "%s/run/token", dir);
    struct stat sb;
    assert_int_equal(stat(tok, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    static char body[1 << 18];
    assert_int_equal(tu_http(hport, "GET", "/api/status", NULL, body, sizeof body), 200);
    assert_non_null(strstr(body, "\"controls_enabled\":true"));
    /* kill -9 a rollout: restarted, the pids file names the new process, which reports its restart */
    pid_t old = pid_of("rollout-0");
    kill(old, SIGKILL);
    int64_t end = clock_ms() + 20000;
    while (clock_ms() < end && !(pid_of("rollout-0") > 0 && pid_of("rollout-0") != old && alive(pid_of("rollout-0"))))
        usleep(50000);
    pid_t fresh = pid_of("rollout-0");
    assert_true(fresh != old && alive(fresh));
    char env[300], out[64];
    snprintf(env, sizeof env, "tr '\\0' '\\n' < /proc/%d/environ | grep -x DAPO_RESTARTS=1", (int)fresh);
    assert_int_equal(tu_run(env, out, sizeof out), 0);
    json_t *st = NULL;
    end = clock_ms() + 20000;
    int restarts = -1;
    while (clock_ms() < end && restarts != 1) {                      /* its new Hello says it was restarted once */
        if (tu_http(hport, "GET", "/api/status", NULL, body, sizeof body) == 200 && (st = json_loads(body, 0, NULL))) {
            json_t *w;
            size_t i;
            json_array_foreach(json_object_get(st, "workers"), i, w)
                if (!strcmp(json_string_value(json_object_get(w, "id")), "rollout-0") &&
                    !strcmp(json_string_value(json_object_get(w, "state")), "alive"))
                    restarts = (int)json_integer_value(json_object_get(w, "restarts"));
            json_decref(st);
        }
        if (restarts != 1) usleep(100000);
    }
    assert_int_equal(restarts, 1);
    /* a plain kill (SIGTERM) of a worker: it exits 0, but the run still needs it, so it is restarted too */
    pid_t v = pid_of("verifier-0");
    kill(v, SIGTERM);
    end = clock_ms() + 20000;
    while (clock_ms() < end && !(pid_of("verifier-0") > 0 && pid_of("verifier-0") != v && alive(pid_of("verifier-0"))))
        usleep(50000);
    assert_true(pid_of("verifier-0") != v && alive(pid_of("verifier-0")));
    /* SIGINT to the background launcher: the run stops, nothing of it is left */
    stop_and_check(L, SIGINT, 0, 0);
    snprintf(cmd, sizeof cmd, "grep -c 'rollout-0 was killed by signal 9' %s/launcher.out", dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
}

/* run.sh started in the foreground of a terminal session (its own process group, SIGINT as the terminal leaves it)
 * in test-logs/<name>, as our child g_fg; returns once every daemon is up. */
static void launch_foreground(const char *name) {
    snprintf(dir, sizeof dir, "%s/test-logs/%s", tu_build(), name);
    char args[1500], cmd[2200], log[500];
    run_args(args, sizeof args);
    snprintf(cmd, sizeof cmd, "cd %s && BUILD=%s exec deploy/local/run.sh %s", tu_root(), tu_build(), args);
    snprintf(log, sizeof log, "%s/launcher.out", dir);
    char *argv[] = {"/usr/bin/setsid", "bash", "-c", cmd, NULL};
    g_fg = tu_spawn(argv, log);
    assert_true(g_fg > 0);
    wait_up(g_fg);
}

/* A foreground run stopped by sig; the supervisor then exits 0 (the coordinator stopped cleanly). */
static void foreground_stop(int sig, int group) {
    char name[32];
    snprintf(name, sizeof name, "launcher-fg%d", sig);
    launch_foreground(name);
    assert_int_equal(stop_and_check(g_fg, sig, group, 1), 0);
}

/* The supervisor itself killed (SIGKILL, the OOM killer): the coordinator stops as on SIGTERM, then the workers
 * once it is gone (common/net/daemon.h daemon_orphaned): no run is left going unsupervised. */
static void test_supervisor_killed(void **state) {
    (void)state;
    launch_foreground("launcher-orphan");
    pid_t all[] = {pid_of("coordinator"), pid_of("verifier-0"), pid_of("learner-0"), pid_of("rollout-0")};
    kill(g_fg, SIGKILL);
    assert_int_equal(tu_wait(g_fg, 5000), 128 + SIGKILL);
    g_fg = -1;
    int64_t end = clock_ms() + 60000;
    int left = 4;
    while (clock_ms() < end && left) {
        left = 0;
        for (int i = 0; i < 4; i++) left += alive(all[i]);
        if (left) usleep(100000);
    }
    assert_int_equal(left, 0);
    char cmd[600], out[64];
    snprintf(cmd, sizeof cmd, "grep -c 'supervisor (pid [0-9]*) is gone' %s/run/logs/coordinator.log", dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
}

/* run.sh with args in the background, its output to out; returns the pid. */
static pid_t launch_second(const char *args, const char *out) {
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "cd %s && BUILD=%s exec deploy/local/run.sh %s", tu_root(), tu_build(), args);
    char *argv[] = {"/usr/bin/setsid", "bash", "-c", cmd, NULL};
    return tu_spawn(argv, out);
}

static void test_ports_before_work(void **state) {
    (void)state;
    launch_foreground("launcher-ports");
    char args[1500], out[600], text[4096], cmd[900];
    /* the default config (an SFT preparation of minutes) on the first run's dashboard port */
    snprintf(args, sizeof args, "--run-dir %s/run2 cluster.http=127.0.0.1:%d", dir, hport);
    snprintf(out, sizeof out, "%s/second.out", dir);
    double t0 = clock_s();
    pid_t p = launch_second(args, out);
    assert_int_equal(tu_wait(p, 10000), 1);
    double took = clock_s() - t0;
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    if (took >= 1.0 || !strstr(text, "cluster.http: 127.0.0.1:") || !strstr(text, "in use") ||
        strstr(text, "preparing") || strstr(text, "dashboard at"))
        fail_msg("a launch on a busy port took %.2f s and said:\n%s", took, text);
    snprintf(cmd, sizeof cmd, "test -e %s/run2", dir);            /* a refused launch makes no run directory */
    assert_int_not_equal(system(cmd), 0);
    /* a --port-base bash would read as octal, and two keys on one port, are refused before any work */
    snprintf(args, sizeof args, "--run-dir %s/run2 --port-base 01100", dir);
    p = launch_second(args, out);
    assert_int_equal(tu_wait(p, 10000), 2);
    snprintf(args, sizeof args, "--run-dir %s/run2 --port-base 40100 cluster.weights_bind=tcp://127.0.0.1:40101", dir);
    p = launch_second(args, out);
    assert_int_equal(tu_wait(p, 10000), 1);
    snprintf(cmd, sizeof cmd, "grep -c 'cluster.bind (tcp://127.0.0.1:40101) and cluster.weights_bind "
             "(tcp://127.0.0.1:40101) use the same port' %s", out);
    assert_int_equal(tu_run(cmd, text, sizeof text), 0);
    /* --port-base N: all four ports moved; the second run comes up beside the first and is stopped */
    pid_t b = -1;
    int base = 0;
    for (int tries = 0; tries < 5 && b < 0; tries++) {
        base = 20000 + (int)((unsigned)getpid() * 7919u + (unsigned)tries * 104729u) % 30000;
        snprintf(args, sizeof args, "--run-dir %s/run3 --port-base %d actor_rollout_ref.model.path=%s/model "
                 "cluster.heartbeat_ms=100", dir, base, dir);
        snprintf(out, sizeof out, "%s/third.out", dir);
        remove(out);
        b = launch_second(args, out);
        usleep(1500000);
        if (tu_wait(b, 0) >= 0) b = -1;              /* exited: a port of that base was taken, try another */
    }
    assert_true(b > 0);
    char body[512], pids[700];
    snprintf(pids, sizeof pids, "%s/run3/pids", dir);
    int64_t end = clock_ms() + 60000;
    while (clock_ms() < end && !(alive(tu_pid_in(pids, "rollout-0")) &&
                                 tu_http(base, "GET", "/api/status", NULL, body, sizeof body) == 200))
        usleep(100000);
    assert_int_equal(tu_http(base, "GET", "/api/status", NULL, body, sizeof body), 200);
    assert_int_equal(tu_http(hport, "GET", "/api/status", NULL, body, sizeof body), 200);   /* the first still runs */
    snprintf(cmd, sizeof cmd, "grep -c 'dashboard at http://127.0.0.1:%d/' %s", base, out);
    assert_int_equal(tu_run(cmd, text, sizeof text), 0);
    kill(b, SIGTERM);
    assert_int_equal(tu_wait(b, 60000), 0);
    assert_int_equal(stop_and_check(g_fg, SIGTERM, 0, 1), 0);
}

static void test_foreground_ctrl_c(void **state) { (void)state; foreground_stop(SIGINT, 1); }
static void test_sigterm(void **state) { (void)state; foreground_stop(SIGTERM, 0); }
static void test_sighup(void **state) { (void)state; foreground_stop(SIGHUP, 0); }

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_background_sigint_and_restart, teardown),
                                       cmocka_unit_test_teardown(test_foreground_ctrl_c, teardown),
                                       cmocka_unit_test_teardown(test_sigterm, teardown),
                                       cmocka_unit_test_teardown(test_sighup, teardown),
                                       cmocka_unit_test_teardown(test_supervisor_killed, teardown),
                                       cmocka_unit_test_teardown(test_ports_before_work, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
