/* common/net/daemon.c: the shared worker-daemon skeleton (see daemon.h). */
#include "net/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/log.h"

static volatile sig_atomic_t g_stop, g_sigints;

static void on_signal(int sig) {
    if (sig == SIGINT && ++g_sigints > 1) _exit(130);    /* second Ctrl-C: now */
    g_stop = 1;
}

int daemon_stopping(void) { return g_stop != 0; }

static const char *role_str(Dapo__Role r) {
    return r == DAPO__ROLE__ROLE_ROLLOUT ? "rollout" : r == DAPO__ROLE__ROLE_VERIFIER ? "verifier" : "learner";
}

/* The flags a daemon of this role takes besides the shared ones (config_usage_print's `extra`). */
static const char *role_flags(Dapo__Role r) {
    return r == DAPO__ROLE__ROLE_ROLLOUT ? "[--id NAME] [--load DIR] [--version V]\n"
                                           "  --id NAME         this worker's name (default rollout-<pid>@<host>)\n"
                                           "  --load DIR        the model to load instead of actor_rollout_ref.model.path\n"
                                           "  --version V       the policy version of those weights (default 0)"
         : r == DAPO__ROLE__ROLE_LEARNER ? "[--id NAME] [--rank N]\n"
                                           "  --id NAME         this worker's name (default learner-<pid>@<host>)\n"
                                           "  --rank N          this learner's rank in 0..cluster.num_learners-1 (default 0)"
                                         : "[--id NAME]\n"
                                           "  --id NAME         this worker's name (default verifier-<pid>@<host>)";
}

/* A probe (WorkerOpts.config_only) waits for the coordinator's Welcome; then config_take_from (daemon.h). */
int daemon_take_run_config(Daemon *d, Dapo__Role role, char err[ERR_LEN]) {
    void *zctx = zmq_ctx_new();
    if (!zctx) return err_set(err, ERR_IO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    char *run_config = config_run_keys(&d->cfg, true, NULL);
    WorkerOpts o = {.role = role, .worker_id = d->worker_id, .coordinator = d->cfg.coordinator,
                    .rank = (uint32_t)d->rank, .world_size = (uint32_t)d->cfg.num_learners,
                    .max_msg_bytes = (int64_t)d->cfg.max_msg_mb << 20, .policy_version = -1, .curve = &d->keys,
                    .run_config = run_config, .config_only = 1};
    Worker *w = worker_open(zctx, &o, err);
    xfree(run_config);
    int rc = w ? 0 : ERR_IO;
    int64_t next_check = 0;
    while (!rc && worker_state(w) == WORKER_CONNECTING && !g_stop) {
        NetMsg m;
        int pr = worker_poll(w, &m, 100, err);
        if (pr == 1) net_msg_free(&m);
        if (pr == ERR_VERSION || pr == ERR_INVAL) rc = pr;
        if (clock_ms() >= next_check) {
            next_check = clock_ms() + 1000;
            if (daemon_orphaned()) g_stop = 1;
        }
    }
    const Dapo__Welcome *wel = w ? worker_welcome(w) : NULL;
    if (!rc && g_stop) {
        rc = 1;
        log_info("%s: stopped while waiting for the coordinator at %s (its run config)", d->worker_id,
                 d->cfg.coordinator);
    }
    int taken = 0;
    if (!rc && wel && wel->config_yaml.len)
        rc = config_take_from(&d->cfg, (const char *)wel->config_yaml.data, wel->config_yaml.len, &taken, err);
    if (!rc)
        log_info("%s: took %d run keys from the coordinator at %s (run keys' hash %016llx)", d->worker_id, taken,
                 d->cfg.coordinator, wel ? (unsigned long long)wel->config_hash : 0ULL);
    worker_close(w, NULL);
    zmq_ctx_term(zctx);
    return rc;
}

int daemon_init(Daemon *d, int argc, char **argv, Dapo__Role role, const char *component, char err[ERR_LEN]) {
    memset(d, 0, sizeof *d);
    d->policy_version = -1;
    log_init(component, LL_INFO);
    if (config_help_wanted(argc, argv)) {
        config_usage_print(stdout, argv[0], role_flags(role));
        return 1;                          /* d->cfg is zeroed: config_free/daemon_close are fine on it */
    }
    int print = CONFIG_PRINT_NONE;
    int rc = config_from_cli(&d->cfg, &argc, argv, &print, err);
    if (rc) return rc;
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(d->worker_id, sizeof d->worker_id, "%s-%d@%s", role_str(role), (int)getpid(), host);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--id") == 0 && i + 1 < argc) {
            snprintf(d->worker_id, sizeof d->worker_id, "%s", argv[++i]);
        } else if (strcmp(argv[i], "--rank") == 0 && i + 1 < argc) {
            char *end;
            long r = strtol(argv[++i], &end, 10);
            if (*end || r < 0 || r >= d->cfg.num_learners)
                return err_set(err, ERR_INVAL, "--rank: '%s' is not a rank in 0..%d (cluster.num_learners)", argv[i],
                               d->cfg.num_learners - 1);
            d->rank = (int)r;
        } else {
            return err_set(err, ERR_INVAL, "unknown argument '%s' (usage: %s [--config FILE] [key.path=value ...] "
                           "[--id NAME] [--rank N] [--print-config]; --help for more)", argv[i], argv[0]);
        }
    }
    if (print == CONFIG_PRINT_ALL)
        printf("# %s's own file and overrides; at start it takes every run key not set here from its coordinator "
               "(every key but cluster.*)\n", role_str(role));
    if (print) config_print_annotated(&d->cfg, stdout, print == CONFIG_PRINT_LOCAL);
    if (print) return 1;
    /* issue 18: CURVE keys; learner rank 0 also serves (weights, collective) and binds off loopback only with them;
     * with several ranks every rank serves its ring neighbour (collective.h), on the interface toward rank 0 */
    int learner = role == DAPO__ROLE__ROLE_LEARNER, multi = d->cfg.num_learners > 1;
    int serves = learner && (d->rank == 0 || multi);
    rc = curve_load(&d->cfg, serves, true, &d->keys, err);
    if (!rc && serves) {
        const char *binds[] = {d->cfg.collective, d->cfg.weights_bind};
        const char *keys[] = {"cluster.collective", "cluster.weights_bind"};
        rc = curve_check_exposure(&d->cfg, &d->keys, binds + (multi ? 0 : 1), keys + (multi ? 0 : 1),
                                  (multi ? 1 : 0) + (d->rank == 0 ? 1 : 0), NULL, err);
    }
    if (rc) return rc;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* The environment's whole number `name` in [lo, hi], else -1 (unset, empty, not a number, out of range). */
static long env_long(const char *name, long lo, long hi) {
    const char *s = getenv(name);
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || *end || v < lo || v > hi ? -1 : v;
}

int daemon_orphaned(void) {
    long v = env_long("DAPO_SUPERVISOR_PID", 2, 1L << 30);
    return v > 0 && (long)getppid() != v;
}

uint32_t daemon_restarts(void) {
    long v = env_long("DAPO_RESTARTS", 0, 1000000);
    return v < 0 ? 0 : (uint32_t)v;
}

int daemon_connect(Daemon *d, Dapo__Role role, uint32_t capacity, uint64_t capacity_tokens, char err[ERR_LEN]) {
    d->zctx = zmq_ctx_new();
    if (!d->zctx) return err_set(err, ERR_IO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    /* every run key it runs with, taken or its own: a coordinator started again with another config refuses it (it
     * exits, and its restart takes the new config) */
    char *run_config = config_run_keys(&d->cfg, false, NULL);
    WorkerOpts o = {
        .role = role, .worker_id = d->worker_id, .coordinator = d->cfg.coordinator, .capacity = capacity,
        .capacity_tokens = capacity_tokens,
        .rank = (uint32_t)d->rank, .world_size = (uint32_t)d->cfg.num_learners, .heartbeat_ms = d->cfg.heartbeat_ms,
        .lease_timeout_s = d->cfg.lease_timeout_s, .max_msg_bytes = (int64_t)d->cfg.max_msg_mb << 20,
        .build_info = "dapo " __DATE__ " gcc " __VERSION__, .policy_version = d->policy_version,
        .fresh = d->fresh, .restarts = daemon_restarts(), .curve = &d->keys, .health_file = d->cfg.health_file,
        .run_config = run_config,
    };
    d->worker = worker_open(d->zctx, &o, err);
    xfree(run_config);
    if (!d->worker) return ERR_IO;
    log_info("%s: connecting to %s", d->worker_id, d->cfg.coordinator);
    return 0;
}

int daemon_run(Daemon *d, DaemonWorkFn on_work, DaemonIdleFn on_idle, void *ud, char err[ERR_LEN]) {
    int timeout = 100;
    int64_t next_check = 0;
    while (!g_stop) {
        if (clock_ms() >= next_check) {               /* once a second: is the supervisor still there? */
            next_check = clock_ms() + 1000;
            /* the coordinator stops first (it checkpoints with the learner still there); a worker once it is gone */
            if (daemon_orphaned() && worker_state(d->worker) != WORKER_READY) {
                log_warn("%s: the supervisor (pid %s) and the coordinator are gone: stopping", d->worker_id,
                         getenv("DAPO_SUPERVISOR_PID"));
                g_stop = 1;
                break;
            }
        }
        NetMsg m;
        int rc = worker_poll(d->worker, &m, timeout, err);
        if (rc < 0) {
            if (rc == ERR_VERSION || rc == ERR_INVAL) return rc;     /* refused: err names why */
            log_warn("%s", err);                                      /* socket trouble: keep trying */
            continue;
        }
        if (rc == 1) {
            int hr = on_work ? on_work(ud, &m) : 0;
            net_msg_free(&m);
            if (hr < 0) return err_set(err, hr, "handler stopped the daemon: %s", err_str(hr));
        }
        timeout = 100;
        if (on_idle) {
            int t = on_idle(ud);
            if (t < 0) return err_set(err, t, "idle handler stopped the daemon: %s", err_str(t));
            timeout = t;
        }
    }
    return 0;
}

void daemon_reply_unsupported(Daemon *d, const NetMsg *m) {
    Dapo__ErrorReply e = DAPO__ERROR_REPLY__INIT;
    char text[300];
    snprintf(text, sizeof text, "%s cannot handle %s yet", d->worker_id, net_type_name(m->type));
    e.code = ERR_UNSUPPORTED;
    e.message = text;
    e.in_reply_to = (uint32_t)m->type;
    worker_send(d->worker, DAPO__MSG_TYPE__MSG_ERROR, &e.base);
    log_warn("%s", text);
}

void daemon_close(Daemon *d, const char *reason) {
    worker_close(d->worker, reason);
    d->worker = NULL;
    if (d->zctx) zmq_ctx_term(d->zctx);
    d->zctx = NULL;
    config_free(&d->cfg);
}
