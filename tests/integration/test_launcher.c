/* tests/integration/test_launcher.c: deploy/local/run.sh as a user starts it in the background (`make run &`,
 * `nohup ... &`): a non-interactive shell starts it with SIGINT ignored, which bash cannot trap (issue 17). The
 * launcher becomes dapo-supervise, which resets what it inherited: a rollout killed with SIGKILL is restarted and the
 * pids file names the new pid; SIGINT to the launcher's pid then stops the whole run cleanly (the coordinator
 * checkpoints and exits, then the workers), leaving no process of the run and no pids file; the dashboard token file
 * is made (mode 0600) and its controls are on. A fresh tiny model on the command line skips the SFT preparation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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

static int teardown(void **state) {
    (void)state;
    pid_t p = launcher_pid();
    if (alive(p)) { kill(p, SIGKILL); }
    const char *names[] = {"coordinator", "verifier-0", "learner-0", "rollout-0"};
    for (int i = 0; i < 4; i++) if (alive(pid_of(names[i]))) kill(pid_of(names[i]), SIGKILL);
    return 0;
}

static void test_background_sigint_and_restart(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "%s/test-logs/launcher", tu_build());
    char cmd[4000], bin[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && %s --config %s/configs/tiny-model/config.json --tokenizer "
             "%s/data/tokenizers/tiny --out %s/model > %s/init.log 2>&1", dir, dir,
             tu_bin(bin, sizeof bin, "dapo-init-model"), tu_root(), tu_root(), dir, dir);
    assert_int_equal(system(cmd), 0);
    hport = tu_free_port();
    int zp = tu_free_port(), wp = tu_free_port(), cp = tu_free_port();
    /* bash -c '... &': a background job of a non-interactive shell, SIGINT ignored (as under nohup or make &) */
    snprintf(cmd, sizeof cmd,
             "cd %s && BUILD=%s bash -c 'deploy/local/run.sh --run-dir %s/run actor_rollout_ref.model.path=%s/model "
             "cluster.bind=tcp://127.0.0.1:%d cluster.coordinator=tcp://127.0.0.1:%d cluster.weights_bind=tcp://127.0.0.1:%d "
             "cluster.weights=tcp://127.0.0.1:%d cluster.collective=tcp://127.0.0.1:%d cluster.http=127.0.0.1:%d "
             "cluster.heartbeat_ms=100 cluster.lease_timeout_s=1.5 trainer.val_before_train=false "
             "> %s/launcher.out 2>&1 & echo $! > %s/launcher.pid'",
             tu_root(), tu_build(), dir, dir, zp, zp, wp, wp, cp, hport, dir, dir);
    assert_int_equal(system(cmd), 0);
    pid_t L = launcher_pid();
    assert_true(L > 0);
    char path[600], status[512];
    snprintf(path, sizeof path, "/proc/%d/status", (int)L);
    /* every daemon up, and the coordinator answering */
    int64_t end = clock_ms() + 120000;
    while (clock_ms() < end && !(alive(pid_of("rollout-0")) && alive(pid_of("learner-0")) &&
                                 tu_http(hport, "GET", "/api/status", NULL, status, sizeof status) == 200))
        usleep(100000);
    assert_true(alive(pid_of("rollout-0")));
    assert_int_equal(pid_of("supervisor"), L);                      /* run.sh became the supervisor */
    char tok[600];
    snprintf(tok, sizeof tok, "%s/run/token", dir);
    struct stat sb;
    assert_int_equal(stat(tok, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    static char body[1 << 18];
    assert_int_equal(tu_http(hport, "GET", "/api/status", NULL, body, sizeof body), 200);
    assert_non_null(strstr(body, "\"controls_enabled\":true"));
    /* kill -9 a rollout: restarted, the pids file names the new process */
    pid_t old = pid_of("rollout-0");
    kill(old, SIGKILL);
    end = clock_ms() + 20000;
    while (clock_ms() < end && !(pid_of("rollout-0") > 0 && pid_of("rollout-0") != old && alive(pid_of("rollout-0"))))
        usleep(50000);
    pid_t fresh = pid_of("rollout-0");
    assert_true(fresh != old && alive(fresh));
    /* SIGINT to the background launcher: the run stops, nothing of it is left */
    pid_t all[] = {pid_of("coordinator"), pid_of("verifier-0"), pid_of("learner-0"), fresh};
    kill(L, SIGINT);
    end = clock_ms() + 60000;
    while (clock_ms() < end && alive(L)) usleep(100000);
    assert_false(alive(L));
    for (int i = 0; i < 4; i++) assert_false(alive(all[i]));
    snprintf(path, sizeof path, "%s/run/pids", dir);
    assert_int_not_equal(access(path, F_OK), 0);
    snprintf(cmd, sizeof cmd, "grep -c 'rollout-0 was killed by signal 9' %s/launcher.out", dir);
    char out[64];
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "grep -c 'stopped' %s/run/logs/coordinator.log", dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_background_sigint_and_restart, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
