/* common/net/daemon.h: what every worker daemon (rollout, verifier, learner) does the same way: the shared command
 * line (config + --id NAME), signal handling (SIGTERM/SIGINT set a flag; a second SIGINT exits at once), and the
 * main loop around the worker state machine.
 * Not here: the work itself (each service's handlers). */
#ifndef DAPO_DAEMON_H
#define DAPO_DAEMON_H

#include "core/config.h"
#include "net/worker.h"

typedef struct {
    Config      cfg;
    char        worker_id[128];       /* --id NAME, default "<role>-<pid>@<host>" */
    int         rank;                 /* --rank N (learner), default 0 */
    int64_t     policy_version;       /* weights version held; set before daemon_connect (-1: none) */
    int         fresh;                /* learner: weights as loaded from disk (Hello.fresh); set before daemon_connect */
    CurveKeys   keys;                 /* cluster.curve.* (net/curve.h), loaded by daemon_init */
    void       *zctx;
    Worker     *worker;
} Daemon;

/* Parses the command line (see config_from_cli, plus --id NAME and --rank N), handles --print-config (prints and
 * returns 1) and --help / -h (prints the usage, with the role's own flags, to stdout and returns 1; d->cfg is then
 * left zeroed), installs signal handlers. Returns 0, 1 (printed the config or the usage: exit 0), or negative with
 * err set. */
int daemon_init(Daemon *d, int argc, char **argv, Dapo__Role role, const char *component, char err[ERR_LEN]);

/* The run keys come from the coordinator (docs/design.md §5): asks it (cluster.coordinator) for the run config with a
 * probe that registers nothing, and takes every key the file and overrides did not set (config_take_from), before
 * the worker loads anything. Call after daemon_init and the worker's checks of its local keys (a trainer.device it
 * set). Waits like a registration (a warning every 10 s) until the coordinator answers, a signal stops it or the
 * supervisor is gone (both 1: exit 0). 0; ERR_INVAL when the coordinator refused this worker's run keys (naming the
 * key and both values) or its protocol version; ERR_DECODE / ERR_INVAL for a config it cannot take. */
int daemon_take_run_config(Daemon *d, Dapo__Role role, char err[ERR_LEN]);

/* Creates the ZeroMQ context and the Worker from cfg.cluster.* with the given capacity (items; rollout: also
 * KV-cache tokens) and starts registering. 0 or negative with err set. */
int daemon_connect(Daemon *d, Dapo__Role role, uint32_t capacity, uint64_t capacity_tokens, char err[ERR_LEN]);

/* Called for each work message (Generate/Score/Train/Cancel/Control/WeightUpdate...): return 0 to go on, or a
 * negative code to stop the daemon. The message is freed by the loop after the call unless the handler took it
 * (set m->msg = NULL). */
typedef int (*DaemonWorkFn)(void *ud, NetMsg *m);
/* Called between polls (e.g. one decode step); returns the poll timeout to use next in ms (0 when it has more
 * work to do at once), or a negative code to stop. */
typedef int (*DaemonIdleFn)(void *ud);

/* Runs until SIGTERM/SIGINT, a refusal by the coordinator, or a handler's negative return. Returns 0 on a signal,
 * else the error code (err says why). */
int daemon_run(Daemon *d, DaemonWorkFn on_work, DaemonIdleFn on_idle, void *ud, char err[ERR_LEN]);

/* How many times this process's supervisor has restarted it: the environment's DAPO_RESTARTS (set by
 * tools/dapo-supervise.c for every start), 0 when unset or not a whole number in [0, 1e6]. Reported in Hello and on the
 * dashboard. */
uint32_t daemon_restarts(void);

/* True when this process was started by a supervisor (DAPO_SUPERVISOR_PID, set by tools/dapo-supervise.c) that is
 * no longer its parent (killed with SIGKILL, say): the coordinator then stops as on SIGTERM, and a worker once it
 * has lost the coordinator too (daemon_run), so that no run goes on unsupervised. False when unsupervised. Cheap
 * (getppid): call it from a timer. */
int daemon_orphaned(void);

/* True once SIGTERM or SIGINT arrived. */
int daemon_stopping(void);

/* Sends Goodbye, closes the worker and the context, frees the config. */
void daemon_close(Daemon *d, const char *reason);

/* Answers a work message the daemon cannot handle with an ErrorReply (ERR_UNSUPPORTED), naming the type. */
void daemon_reply_unsupported(Daemon *d, const NetMsg *m);

#endif
