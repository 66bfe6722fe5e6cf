/* tools/dapo-supervise.c: the local launcher's supervisor (issue 17), what a kubelet or systemd does for a pod:
 * starts the run's daemons, restarts one that exits or is killed, stops them all in order on a signal.
 *
 *   dapo-supervise --run-dir DIR --spec FILE [--min-uptime S] [--max-fast N] [--backoff-max S] [--stop-timeout S]
 *                  [--max-same N] [--same-window S]
 *
 * FILE (written by deploy/local/run.sh): {"procs": [{"name": "coordinator", "argv": ["/path/dapo-coordinator", ...]},
 * ...]}; the first entry is the coordinator. Each daemon runs in its own session (setsid), stdin /dev/null, stdout and
 * stderr appended to DIR/logs/<name>.log after a line "==== dapo-supervise: start N of NAME at TIME ====" (the end of
 * a log shown for a failure starts at the latest one), with the signal dispositions reset to the defaults (libuv does it in the
 * child), so a daemon never inherits an ignored SIGINT from a background shell, and DAPO_RESTARTS set to how many
 * times it was restarted so far (the daemon reports it; the dashboard's workers table and recovery figure show it).
 *
 * Restarts: a daemon that exits (any status but 0) or is killed is started again, at once; one that dies again
 * within --min-uptime (10) seconds of that start waits 1, 2, 4 ... seconds before the next, capped at --backoff-max
 * (30); staying up --min-uptime seconds starts the backoff again from the beginning. A daemon that dies within --min-uptime of its start --max-fast (5) times in a row
 * is given up on: the last lines of its log go to the terminal and the run is stopped and failed. So is one that fails
 * the same way --max-same (5) times within --same-window (300) seconds, however long each start lived (issue 31: a
 * learner that waited out its join timeout every 20 s was restarted for ever): the same exit status (not 0 or 75), or
 * death by the same signal other than SIGKILL, SIGTERM and SIGINT, which come from outside (an operator, a chaos test,
 * the OOM killer; a daemon killed quickly in a row still meets the --max-fast rule). A daemon whose
 * FIRST start exits with an error status within --min-uptime (a bad model, a port in use) fails the run at once, as
 * the launcher always did. Exit status 75 asks for a restart at once, never counted as a death (a learner told to
 * start again from the last checkpoint). A worker that exits 0 while the run goes on was stopped from outside (a plain
 * kill) and is restarted like one that died; the coordinator exiting 0 ends the run, and so does its exit status 76
 * (core/exitcode.h: stopped as asked after the run failed, or without a checkpoint of its last steps), failed and not
 * restarted. Each restart is one line on the terminal and one JSON line in
 * DIR/logs/supervisor.jsonl ({"t": unix seconds, "event": "restart"|"gave_up"|"start_failed"|"exit", "name",
 * "status", "signal", "uptime_s", "restarts": the starts so far, i.e. for "restart" the number of that restart}).
 *
 * DIR/pids always lists the live processes ("<pid> <name>", this supervisor first), rewritten (temp file + rename) on
 * every start and exit, and removed at the end.
 *
 * Signals: SIGINT, SIGTERM and SIGHUP, whatever this process inherited (a background job's ignored SIGINT included:
 * the dispositions are reset at start), stop the run: SIGTERM to the coordinator, which finishes the step in
 * training and checkpoints it while the learner is still there (SIGKILL after --stop-timeout, 330 s: the
 * coordinator's own bound, cluster.stop_timeout_s, is 300 s); once it has exited, SIGTERM to the others (SIGKILL
 * after 30 s). A second signal sends the coordinator SIGTERM again (it then exits at once); a third SIGKILLs every
 * daemon. SIGQUIT (Ctrl-\\) stops the run the same way. Every daemon gets DAPO_SUPERVISOR_PID: one whose supervisor
 * is gone (killed with SIGKILL) stops itself (common/net/daemon.h daemon_orphaned), so no run is left unsupervised.
 *
 * Tests only: DAPO_SUPERVISE_RESTART_DELAY="name=S[,name=S...]" starts the named daemons S seconds late after each
 * death (not at their first start), so that a test can choose which of two daemons comes back first.
 *
 * Terminal: lines of the coordinator's log that a user should not miss (errors, a failed run, the end of training,
 * a resume, workers lost and back) are echoed as "dapo: ...". Exit status: 0 when the coordinator ended with 0
 * and nothing was given up on, 1 otherwise, 2 for bad arguments.
 * Not here: preparing the run (run.sh and configs/<name>.prepare.sh), any daemon logic. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/exitcode.h"

#define SUP_EXIT_RESTART DAPO_EXIT_RESTART   /* a daemon that exits with it wants to be started again at once */

typedef struct {
    char        *name;
    char       **argv;          /* NULL-terminated, owned */
    uv_process_t proc;
    uv_timer_t   restart;
    int          running;       /* a child is live (proc handle open) */
    int          finished;      /* exited 0: not restarted */
    int          starts;        /* times started */
    int          fast;          /* deaths in a row within min_uptime */
    int          asked;         /* exit-75 restarts in a row within min_uptime (a reload loop is bounded too) */
    double       started_at, backoff;
    double       fail_t[16];    /* the last deaths that count for --max-same: when, and how (status, or -signal) */
    int          fail_how[16], n_fail;
    double       test_delay;    /* DAPO_SUPERVISE_RESTART_DELAY: seconds before each restart (tests) */
} Proc;

typedef struct {
    const char *run_dir;
    char        pids_path[4200], events_path[4200], coord_log[4200];
    Proc       *p;
    int         n;
    double      min_uptime, backoff_max, stop_timeout;
    int         max_fast, max_same;
    double      same_window;
    int         stopping;       /* 0 running, 1 stopping the coordinator, 2 stopping the rest */
    int         failed;         /* a daemon was given up on, or failed at start */
    char        failed_name[128], failed_log[4300];   /* which one */
    int         coord_status;   /* the coordinator's last exit status (-1: killed by a signal) */
    uv_loop_t  *loop;
    uv_signal_t sig[4];
    int         signals;        /* stop signals received */
    uv_timer_t  tail, kill_timer;
    long        log_off;        /* bytes of the coordinator's log already looked at */
    char        line[8192];
    size_t      line_n;
} Sup;

static Sup S;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dapo: ", stdout);
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
}

/* ---------------------------------------------------------------------------------------------- pids, events */
static void write_pids(void) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", S.pids_path);
    FILE *f = fopen(tmp, "w");
    if (!f) { say("cannot write %s: %s", tmp, strerror(errno)); return; }
    fprintf(f, "%d supervisor\n", (int)getpid());
    for (int i = 0; i < S.n; i++)
        if (S.p[i].running) fprintf(f, "%d %s\n", S.p[i].proc.pid, S.p[i].name);
    if (fclose(f) != 0 || rename(tmp, S.pids_path) != 0) say("cannot write %s: %s", S.pids_path, strerror(errno));
}

static void event(const char *what, const Proc *p, int64_t status, int sig, double up) {
    FILE *f = fopen(S.events_path, "a");
    if (!f) return;
    json_t *o = json_pack("{s:I, s:s, s:s, s:I, s:i, s:f, s:i}", "t", (json_int_t)time(NULL), "event", what, "name",
                          p->name, "status", (json_int_t)status, "signal", sig, "uptime_s", up, "restarts",
                          p->starts);          /* the restarts with this one (the terminal's "restart N") */
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s) fprintf(f, "%s\n", s);
    free(s);
    json_decref(o);
    fclose(f);
}

/* The line spawn() writes into a daemon's log before each start: the end of the log is shown from the last one on,
 * so a failed start shows its own lines, not an earlier run's (logs are appended per run directory). */
#define START_MARK "==== dapo-supervise: start "

/* The last `lines` lines of p's log since its latest start marker, on stderr. */
static void log_tail(const Proc *p, int lines) {
    char path[4300];
    snprintf(path, sizeof path, "%s/logs/%s.log", S.run_dir, p->name);
    snprintf(S.failed_name, sizeof S.failed_name, "%s", p->name);     /* the one the run failed on */
    snprintf(S.failed_log, sizeof S.failed_log, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char **ring = calloc((size_t)lines, sizeof *ring), buf[4096];
    int k = 0;
    while (fgets(buf, sizeof buf, f)) {
        if (!strncmp(buf, START_MARK, strlen(START_MARK))) k = 0;    /* this start's lines only */
        free(ring[k % lines]);
        ring[k % lines] = strdup(buf);
        k++;
    }
    fclose(f);
    fprintf(stderr, "dapo: the end of %s (this start):\n", path);
    for (int i = k > lines ? k - lines : 0; i < k; i++) fprintf(stderr, "    %s", ring[i % lines]);
    for (int i = 0; i < lines; i++) free(ring[i]);
    free(ring);
}

/* ---------------------------------------------------------------------------------------------- processes */
/* sig to the daemon's whole process group: it leads its own session (setsid), so a wrapper's children go too */
static void kill_group(Proc *p, int sig) {
    if (p->running && kill(-p->proc.pid, sig) != 0) uv_process_kill(&p->proc, sig);
}

static void on_exit_cb(uv_process_t *h, int64_t status, int sig);
static void begin_stop(int failed);

/* This process's environment with DAPO_RESTARTS=<restarts so far> (common/net/daemon.h daemon_restarts: the daemon
 * reports it in Hello, the dashboard shows it) and DAPO_SUPERVISOR_PID (daemon_orphaned); NULL-terminated, the
 * strings borrowed from environ but those two (restarts, and a static buffer). */
static char **child_env(const Proc *p, char *restarts, size_t cap) {
    extern char **environ;
    static char sup[48];
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 3, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "DAPO_RESTARTS=", 14) && strncmp(environ[i], "DAPO_SUPERVISOR_PID=", 20))
            env[k++] = environ[i];
    snprintf(restarts, cap, "DAPO_RESTARTS=%d", p->starts);
    snprintf(sup, sizeof sup, "DAPO_SUPERVISOR_PID=%d", (int)getpid());   /* daemon_orphaned: stop when it is gone */
    env[k++] = restarts;
    env[k] = sup;
    return env;
}

/* A name becomes a log file and a pids line: no path, no space or control character, not the supervisor's own. */
static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 64 || s[0] == '.' || !strcmp(s, "supervisor")) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._@-", s[i])) return 0;
    return 1;
}

static int spawn(Proc *p) {
    char path[4300], restarts[64];
    snprintf(path, sizeof path, "%s/logs/%s.log", S.run_dir, p->name);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || nul < 0) {
        say("%s: cannot open %s: %s", p->name, path, strerror(errno));
        if (fd >= 0) close(fd);
        if (nul >= 0) close(nul);
        return -1;
    }
    char mark[256], when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    int ml = snprintf(mark, sizeof mark, START_MARK "%d of %s at %s ====\n", p->starts + 1, p->name, when);
    if (write(fd, mark, (size_t)ml) != ml) say("%s: cannot write %s: %s", p->name, path, strerror(errno));
    uv_stdio_container_t io[3] = { { .flags = UV_INHERIT_FD, .data.fd = nul },
                                   { .flags = UV_INHERIT_FD, .data.fd = fd },
                                   { .flags = UV_INHERIT_FD, .data.fd = fd } };
    char **env = child_env(p, restarts, sizeof restarts);
    uv_process_options_t o = { .exit_cb = on_exit_cb, .file = p->argv[0], .args = p->argv, .env = env,
                               .flags = UV_PROCESS_DETACHED, .stdio_count = 3, .stdio = io };
    p->proc.data = p;
    int rc = env ? uv_spawn(S.loop, &p->proc, &o) : UV_ENOMEM;
    free(env);
    close(fd);
    close(nul);
    if (rc) {
        say("%s: cannot start %s: %s", p->name, p->argv[0], uv_strerror(rc));
        snprintf(S.failed_name, sizeof S.failed_name, "%s", p->name);    /* the end message names it, not the coordinator */
        snprintf(S.failed_log, sizeof S.failed_log, "the spec's argv[0] of %s", p->name);
        uv_close((uv_handle_t *)&p->proc, NULL);
        return -1;
    }
    p->running = 1;
    p->starts++;
    p->started_at = clock_s();
    write_pids();
    return 0;
}

static void on_restart(uv_timer_t *t) {
    Proc *p = t->data;
    if (S.stopping || p->running) return;
    if (spawn(p)) { S.failed = 1; begin_stop(1); return; }
    say("%s restarted (pid %d, restart %d)", p->name, p->proc.pid, p->starts - 1);
}

static void on_closed(uv_handle_t *h) { (void)h; }

static int all_down(int from) {
    for (int i = from; i < S.n; i++) if (S.p[i].running) return 0;
    return 1;
}

static void finish(void) {
    uv_timer_stop(&S.kill_timer);
    uv_timer_stop(&S.tail);
    uv_stop(S.loop);
}

static void on_kill_timer(uv_timer_t *t) {
    (void)t;
    for (int i = 0; i < S.n; i++)
        if (S.p[i].running) {
            say("%s did not stop in time: killing it", S.p[i].name);
            kill_group(&S.p[i], SIGKILL);
        }
}

static void stop_rest(void) {
    S.stopping = 2;
    uv_timer_start(&S.kill_timer, on_kill_timer, 30000, 0);          /* the workers have nothing to finish */
    for (int i = 1; i < S.n; i++) {
        uv_timer_stop(&S.p[i].restart);
        if (S.p[i].running) kill_group(&S.p[i], SIGTERM);
    }
    if (all_down(0)) finish();
}

/* Records a death for the --max-same rule and returns how many deaths of the same kind fell within --same-window
 * (this one included); 0 for a death that does not count (status 0 or 75; SIGKILL, SIGTERM, SIGINT from outside). */
static int same_failures(Proc *p, int64_t status, int sig) {
    if (sig ? sig == SIGKILL || sig == SIGTERM || sig == SIGINT : status == 0 || status == SUP_EXIT_RESTART) return 0;
    int how = sig ? -sig : (int)status, cap = (int)(sizeof p->fail_t / sizeof p->fail_t[0]);
    double now = clock_s();
    if (p->n_fail == cap) {
        memmove(p->fail_t, p->fail_t + 1, (size_t)(cap - 1) * sizeof *p->fail_t);
        memmove(p->fail_how, p->fail_how + 1, (size_t)(cap - 1) * sizeof *p->fail_how);
        p->n_fail--;
    }
    p->fail_t[p->n_fail] = now;
    p->fail_how[p->n_fail++] = how;
    int n = 0;
    for (int i = 0; i < p->n_fail; i++) n += p->fail_how[i] == how && now - p->fail_t[i] <= S.same_window;
    return n;
}

/* A daemon exited: restart it with backoff, give up on it, or go on with the stop. */
static void on_exit_cb(uv_process_t *h, int64_t status, int sig) {
    Proc *p = h->data;
    double up = clock_s() - p->started_at;
    p->running = 0;
    uv_close((uv_handle_t *)h, on_closed);
    write_pids();
    if (p == &S.p[0]) S.coord_status = sig ? -1 : (int)status;
    if (S.stopping) {
        if (p == &S.p[0] && S.stopping == 1) stop_rest();
        else if (S.stopping == 2 && all_down(0)) finish();
        return;
    }
    char how[96];
    if (sig) snprintf(how, sizeof how, "was killed by signal %d (%s)", sig, strsignal(sig));
    else snprintf(how, sizeof how, "exited with status %lld", (long long)status);
    if (!sig && status == 0 && p == &S.p[0]) {
        p->finished = 1;
        say("%s exited normally after %.0f s", p->name, up);
        event("exit", p, status, sig, up);
        stop_rest();                            /* the coordinator is done: so is the run */
        return;
    }
    if (!sig && status == DAPO_EXIT_STOPPED && p == &S.p[0]) {   /* stopped as asked (twice, or past its timeout) */
        say("%s stopped as asked, the run not ended well (status %d: failed, or without a checkpoint of its last steps; "
            "see its log): the run is stopped; the next start resumes from the last checkpoint", p->name,
            DAPO_EXIT_STOPPED);
        event("exit", p, status, sig, up);
        begin_stop(1);
        return;
    }
    if (!sig && status == 0)                    /* a worker stopped from outside (kill, SIGTERM): the run needs it */
        snprintf(how, sizeof how, "exited normally (stopped from outside?) while the run goes on");
    if (!sig && status == SUP_EXIT_RESTART) {          /* asked for (a learner reloading a checkpoint) */
        p->asked = up < S.min_uptime ? p->asked + 1 : 0;
        if (p->asked >= 4 * S.max_fast) {
            say("%s asked to be restarted %d times within %.0f s of starting: giving up on it; the run is stopped",
                p->name, p->asked, S.min_uptime);
            event("gave_up", p, status, sig, up);
            log_tail(p, 10);
            begin_stop(1);
            return;
        }
        if (p->test_delay > 0)
            say("%s asked to be started again (status %d); restarting it in %.3g s (DAPO_SUPERVISE_RESTART_DELAY)",
                p->name, SUP_EXIT_RESTART, p->test_delay);
        else
            say("%s asked to be started again (status %d); restarting it", p->name, SUP_EXIT_RESTART);
        event("restart", p, status, sig, up);
        p->fast = 0;
        uv_timer_start(&p->restart, on_restart, (uint64_t)(p->test_delay * 1000), 0);
        return;
    }
    if (p->starts == 1 && !sig && status != 0 && up < S.min_uptime) {
        say("%s exited at start (status %lld)", p->name, (long long)status);
        event("start_failed", p, status, sig, up);
        log_tail(p, 5);
        begin_stop(1);
        return;
    }
    int same = same_failures(p, status, sig);
    if (same >= S.max_same) {
        say("%s %s, the same way %d times within %.0f s: giving up on it; the run is stopped", p->name, how, same,
            S.same_window);
        event("gave_up", p, status, sig, up);
        log_tail(p, 10);
        begin_stop(1);
        return;
    }
    p->fast = up < S.min_uptime ? p->fast + 1 : 0;
    if (p->fast >= S.max_fast) {
        say("%s %s %d times within %.0f s of starting: giving up on it; the run is stopped", p->name, how, p->fast,
            S.min_uptime);
        event("gave_up", p, status, sig, up);
        log_tail(p, 10);
        begin_stop(1);
        return;
    }
    /* the first restart of a streak at once, then 1, 2, 4 ... s (capped) while it keeps dying young */
    p->backoff = p->fast <= 1 ? 0 : (p->backoff <= 0 ? 1 : p->backoff * 2);
    if (p->backoff > S.backoff_max) p->backoff = S.backoff_max;
    if (p->backoff < p->test_delay) p->backoff = p->test_delay;
    if (p->backoff > 0) say("%s %s after %.0f s; restarting it in %.3g s", p->name, how, up, p->backoff);
    else say("%s %s after %.0f s; restarting it", p->name, how, up);
    event("restart", p, status, sig, up);
    uv_timer_start(&p->restart, on_restart, (uint64_t)(p->backoff * 1000), 0);
}

static void begin_stop(int failed) {
    if (failed) S.failed = 1;
    if (S.stopping) return;
    S.stopping = 1;
    for (int i = 0; i < S.n; i++) uv_timer_stop(&S.p[i].restart);
    uv_timer_start(&S.kill_timer, on_kill_timer, (uint64_t)(S.stop_timeout * 1000), 0);
    if (S.p[0].running) {
        if (!strcmp(S.p[0].name, "coordinator"))
            say("stopping (the coordinator finishes the step in training and checkpoints it first; Ctrl-C again to "
                "stop at once)...");
        else
            say("stopping %s...", S.p[0].name);
        kill_group(&S.p[0], SIGTERM);
    } else {
        stop_rest();
    }
}

static void on_signal(uv_signal_t *h, int signum) {
    (void)h;
    S.signals++;
    if (!S.stopping) { begin_stop(0); return; }
    if (S.signals >= 3) {                           /* a third: whatever hangs, it all goes now */
        say("signal %d again: killing every daemon now (no checkpoint)", signum);
        for (int i = 0; i < S.n; i++) kill_group(&S.p[i], SIGKILL);
        return;
    }
    if (S.stopping == 1 && S.p[0].running) {
        say("stopping now (signal %d; once more kills every daemon)", signum);
        kill_group(&S.p[0], SIGTERM);
    }
}

/* ---------------------------------------------------------------------------------------------- the terminal */
static const char *const ECHO_MARKS[] = { " ERROR ", "FAILED", "training finished", "resumed from", "earlier run's",
                                    " lost", "registered again", "rejoined", "rolled back" };

static void echo_line(const char *l) {
    for (size_t i = 0; i < sizeof ECHO_MARKS / sizeof ECHO_MARKS[0]; i++)
        if (strstr(l, ECHO_MARKS[i])) {
            const char *sp = strchr(l, ' ');              /* drop the timestamp */
            say("%s", sp ? sp + 1 : l);
            return;
        }
}

/* New bytes of the coordinator's log since the last look (a log rewritten from the start is read again). */
static void on_tail(uv_timer_t *t) {
    (void)t;
    FILE *f = fopen(S.coord_log, "r");
    if (!f) return;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && sb.st_size < S.log_off) S.log_off = 0;
    if (fseek(f, S.log_off, SEEK_SET) == 0) {
        int c;
        while ((c = fgetc(f)) != EOF) {
            S.log_off++;
            if (c == '\n' || S.line_n + 1 >= sizeof S.line) {
                S.line[S.line_n] = 0;
                echo_line(S.line);
                S.line_n = 0;
            } else {
                S.line[S.line_n++] = (char)c;
            }
        }
    }
    fclose(f);
}

/* ---------------------------------------------------------------------------------------------- setup */
static int load_spec(const char *path) {
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    json_t *a = json_object_get(o, "procs");
    if (!json_is_array(a) || json_array_size(a) == 0) {
        fprintf(stderr, "dapo-supervise: %s: %s\n", path, o ? "needs {\"procs\": [{\"name\", \"argv\"}, ...]}" : je.text);
        json_decref(o);
        return -1;
    }
    S.n = (int)json_array_size(a);
    S.p = calloc((size_t)S.n, sizeof *S.p);
    for (int i = 0; i < S.n; i++) {
        json_t *e = json_array_get(a, (size_t)i), *av = json_object_get(e, "argv");
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name || !name_ok(name) || !json_is_array(av) || json_array_size(av) == 0) {
            fprintf(stderr, "dapo-supervise: %s: procs[%d] needs a \"name\" (1-64 of [A-Za-z0-9._@-], not starting "
                    "with '.', not \"supervisor\") and a non-empty \"argv\"\n", path, i);
            json_decref(o);
            return -1;
        }
        for (int k = 0; k < i; k++)
            if (!strcmp(S.p[k].name, name)) {
                fprintf(stderr, "dapo-supervise: %s: procs[%d]: the name \"%s\" is taken by procs[%d] (names are log files "
                        "and pids entries)\n", path, i, name, k);
                json_decref(o);
                return -1;
            }
        Proc *p = &S.p[i];
        p->name = strdup(name);
        p->argv = calloc(json_array_size(av) + 1, sizeof *p->argv);
        for (size_t k = 0; k < json_array_size(av); k++) {
            const char *v = json_string_value(json_array_get(av, k));
            if (!v) {
                fprintf(stderr, "dapo-supervise: %s: procs[%d].argv[%zu] is not a string\n", path, i, k);
                json_decref(o);
                return -1;
            }
            p->argv[k] = strdup(v);
        }
    }
    json_decref(o);
    return 0;
}

/* DAPO_SUPERVISE_RESTART_DELAY (tests): "name=S[,name=S...]", each name one of the spec's, 0 <= S <= 3600. */
static int test_delays(const char *v) {
    while (v && *v) {
        const char *eq = strchr(v, '='), *end = strchr(v, ',');
        if (!end) end = v + strlen(v);
        char *stop = NULL;
        double d = eq && eq < end ? strtod(eq + 1, &stop) : -1;
        int k = -1;
        for (int i = 0; eq && eq < end && i < S.n; i++)
            if ((size_t)(eq - v) == strlen(S.p[i].name) && !strncmp(v, S.p[i].name, (size_t)(eq - v))) k = i;
        if (k < 0 || stop != end || stop == eq + 1 || !(d >= 0 && d <= 3600)) {
            fprintf(stderr, "dapo-supervise: DAPO_SUPERVISE_RESTART_DELAY needs name=seconds[,...] with names of the "
                    "spec and 0..3600 s, got '%.*s'\n", (int)(end - v), v);
            return -1;
        }
        S.p[k].test_delay = d;
        if (*end && !end[1]) {                       /* a trailing comma: an empty last item */
            fprintf(stderr, "dapo-supervise: DAPO_SUPERVISE_RESTART_DELAY needs name=seconds[,...], got an empty item "
                    "at the end\n");
            return -1;
        }
        v = *end ? end + 1 : end;
    }
    return 0;
}

static int num_arg(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    double x = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "dapo-supervise: %s needs a number in [%g, %g], got '%s'\n", flag, lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: dapo-supervise --run-dir DIR --spec FILE [--min-uptime S] [--max-fast N] [--backoff-max S]\n"
               "                      [--stop-timeout S] [--max-same N] [--same-window S]\n"
               "  starts the processes of FILE ({\"procs\": [{\"name\", \"argv\"}, ...]}, the coordinator first),\n"
               "  restarts them with backoff, stops them in order on SIGINT/SIGTERM/SIGHUP (see the source's header)\n");
}

int main(int argc, char **argv) {
    /* whatever was inherited (a background job ignores SIGINT; a blocked mask), these are ours now */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
    signal(SIGPIPE, SIG_IGN);                       /* a closed terminal must not kill the stop */
    const char *spec = NULL;
    double fast = 5, same = 5;
    S.same_window = 300;
    S.min_uptime = 10;
    S.backoff_max = 30;
    S.stop_timeout = 330;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--run-dir") && v) S.run_dir = argv[++i];
        else if (!strcmp(a, "--spec") && v) spec = argv[++i];
        else if (!strcmp(a, "--min-uptime")) bad = num_arg(a, v, 0.1, 3600, &S.min_uptime), i++;
        else if (!strcmp(a, "--max-fast")) bad = num_arg(a, v, 1, 1000, &fast), i++;
        else if (!strcmp(a, "--backoff-max")) bad = num_arg(a, v, 0, 3600, &S.backoff_max), i++;
        else if (!strcmp(a, "--stop-timeout")) bad = num_arg(a, v, 1, 1e6, &S.stop_timeout), i++;
        else if (!strcmp(a, "--max-same")) bad = num_arg(a, v, 1, 16, &same), i++;
        else if (!strcmp(a, "--same-window")) bad = num_arg(a, v, 1, 1e6, &S.same_window), i++;
        else { fprintf(stderr, "dapo-supervise: unknown or incomplete argument '%s'\n", a); usage(stderr); return 2; }
        if (bad) return 2;
    }
    if (!S.run_dir || !spec) {
        fprintf(stderr, "dapo-supervise: %s is required\n", !S.run_dir ? "--run-dir DIR" : "--spec FILE");
        usage(stderr);
        return 2;
    }
    if (fast != (double)(int)fast) { fprintf(stderr, "dapo-supervise: --max-fast needs a whole number, got %g\n", fast); return 2; }
    if (same != (double)(int)same) { fprintf(stderr, "dapo-supervise: --max-same needs a whole number, got %g\n", same); return 2; }
    S.max_fast = (int)fast;
    S.max_same = (int)same;
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/logs", S.run_dir);
    if (mkdir(S.run_dir, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "dapo-supervise: %s: %s\n", S.run_dir, strerror(errno)); return 2; }
    if (mkdir(logs, 0755) != 0 && errno != EEXIST) { fprintf(stderr, "dapo-supervise: %s: %s\n", logs, strerror(errno)); return 2; }
    if (load_spec(spec) || test_delays(getenv("DAPO_SUPERVISE_RESTART_DELAY"))) return 2;
    snprintf(S.pids_path, sizeof S.pids_path, "%s/pids", S.run_dir);
    snprintf(S.events_path, sizeof S.events_path, "%s/logs/supervisor.jsonl", S.run_dir);
    snprintf(S.coord_log, sizeof S.coord_log, "%s/logs/%s.log", S.run_dir, S.p[0].name);
    struct stat sb;
    S.log_off = stat(S.coord_log, &sb) == 0 ? (long)sb.st_size : 0;   /* this run's part of the log */
    S.coord_status = 0;
    S.loop = uv_default_loop();
    for (int i = 0; i < 4; i++) {
        uv_signal_init(S.loop, &S.sig[i]);
        uv_signal_start(&S.sig[i], on_signal, sigs[i]);
    }
    uv_timer_init(S.loop, &S.tail);
    uv_timer_init(S.loop, &S.kill_timer);
    for (int i = 0; i < S.n; i++) {
        uv_timer_init(S.loop, &S.p[i].restart);
        S.p[i].restart.data = &S.p[i];
    }
    write_pids();
    for (int i = 0; i < S.n && !S.stopping; i++)
        if (spawn(&S.p[i])) begin_stop(1);
    uv_timer_start(&S.tail, on_tail, 250, 250);
    uv_run(S.loop, UV_RUN_DEFAULT);
    on_tail(&S.tail);                               /* the coordinator's last words */
    remove(S.pids_path);
    say("stopped; logs in %s/logs", S.run_dir);
    int rc = S.failed || S.coord_status != 0;
    if (rc && S.coord_status == DAPO_EXIT_STOPPED)
        fprintf(stderr, "dapo: the run was stopped before it ended well (it had failed, or its last steps were not "
                "checkpointed); the next start resumes from the last checkpoint (%s)\n", S.coord_log);
    else if (rc)
        fprintf(stderr, "dapo: the run did not end well (%s): see the lines above and %s\n",
                S.failed ? "a daemon failed" : "the coordinator's exit status",
                S.failed && S.failed_name[0] ? S.failed_log : S.coord_log);
    for (int i = 0; i < S.n; i++) {
        for (char **a = S.p[i].argv; *a; a++) free(*a);
        free(S.p[i].argv);
        free(S.p[i].name);
    }
    free(S.p);
    return rc;
}
