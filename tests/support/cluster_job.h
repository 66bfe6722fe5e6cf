/* tests/support/cluster_job.h: the whole cluster on loopback for integration tests — coordinator, verifier, one
 * learner and two rollouts, the real binaries, running a reduced default config (configs/default.yaml with 4 groups
 * of 4 per step, 24 response tokens, no dynamic sampling, a checkpoint every step) on 400 dapo-gen-arith prompts and
 * a freshly initialised tiny model in $DAPO_BUILD/test-logs/<name>. Used by test_main_job and longtest_prometheus.
 * Every wait fails the test (cmocka) with the last /api/status when it times out. */
#ifndef DAPO_TESTS_CLUSTER_JOB_H
#define DAPO_TESTS_CLUSTER_JOB_H

#include <jansson.h>
#include <sys/types.h>

typedef struct {
    char        dir[300], zep[64], wep[64];
    int         hport;
    pid_t       coord, verifier, rollout[2], learner;
    int         save_freq;             /* overrides trainer.save_freq=1 when set */
    const char *extra[16];             /* more key=value arguments for every process (NULL-terminated) */
} Job;

/* A fresh run directory test-logs/<name>: the task data, a freshly initialised tiny model, free ports. The extra
 * arguments and save_freq are cleared. */
void job_setup(Job *j, const char *name);
/* Starts one daemon (bin_name, e.g. "dapo-rollout") logging to <dir>/<log_name>.log; id / rank may be NULL. */
pid_t job_start(Job *j, const char *bin_name, const char *log_name, const char *steps, const char *id,
                const char *rank);
/* All five, for trainer.total_training_steps=steps. */
void job_start_all(Job *j, const char *steps);
/* SIGTERM to every process still running, SIGKILL after 10 s; the pids are cleared. */
void job_stop_all(Job *j);
/* GET /api/status, parsed (caller frees), or NULL. */
json_t *job_status(Job *j);
/* Waits up to ms until pred(status) holds; returns that status (caller frees) or fails the test. */
json_t *job_wait_for(Job *j, int (*pred)(json_t *), int ms, const char *what);
/* The phase is "done". */
int job_done(json_t *st);

#endif
