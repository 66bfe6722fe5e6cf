/* tests/support/cluster_job.c: the loopback cluster of the integration tests (cluster_job.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/clock.h"
#include "tests/support/cluster_job.h"
#include "tests/testutil.h"

static void cfg_args(Job *j, char out[][640], int *n, const char *steps) {
    int k = 0;
    snprintf(out[k++], 640, "--config");
    snprintf(out[k++], 640, "%s/configs/default.yaml", tu_root());
    snprintf(out[k++], 640, "data.train_files=%s/train.jsonl", j->dir);
    snprintf(out[k++], 640, "data.val_files=[]");
    snprintf(out[k++], 640, "actor_rollout_ref.model.path=%s/model", j->dir);
    snprintf(out[k++], 640, "trainer.default_local_dir=%s/ckpt", j->dir);
    snprintf(out[k++], 640, "cluster.bind=%s", j->zep);
    snprintf(out[k++], 640, "cluster.coordinator=%s", j->zep);
    snprintf(out[k++], 640, "cluster.weights_bind=%s", j->wep);
    snprintf(out[k++], 640, "cluster.weights=%s", j->wep);
    snprintf(out[k++], 640, "cluster.http=127.0.0.1:%d", j->hport);
    snprintf(out[k++], 640, "trainer.total_training_steps=%s", steps);
    const char *fixed[] = {"data.train_batch_size=4", "data.gen_batch_size=6", "actor_rollout_ref.rollout.n=4",
                           "actor_rollout_ref.actor.ppo_mini_batch_size=2", "data.max_response_length=24",
                           "reward_model.overlong_buffer.len=8", "algorithm.filter_groups.enable=false",
                           "trainer.save_freq=1", "trainer.val_before_train=false", "trainer.test_freq=0",
                           "cluster.heartbeat_ms=100", TU_LEASE_ARG,
                           "actor_rollout_ref.rollout.max_num_seqs=8", "cluster.rollout_threads=1",
                           "cluster.learner_threads=1", "cluster.verifier_threads=1"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) snprintf(out[k++], 640, "%s", fixed[i]);
    if (j->save_freq) snprintf(out[k++], 640, "trainer.save_freq=%d", j->save_freq);
    for (int i = 0; j->extra[i] && k < 44; i++) snprintf(out[k++], 640, "%s", j->extra[i]);
    *n = k;
}

pid_t job_start(Job *j, const char *bin_name, const char *log_name, const char *steps, const char *id,
                   const char *rank) {
    static char args[48][640];
    char bin[300], log[400];
    int n;
    cfg_args(j, args, &n, steps);
    char *argv[56];
    int k = 0;
    argv[k++] = (char *)tu_bin(bin, sizeof bin, bin_name);
    for (int i = 0; i < n; i++) argv[k++] = args[i];
    if (id) { argv[k++] = "--id"; argv[k++] = (char *)id; }
    if (rank) { argv[k++] = "--rank"; argv[k++] = (char *)rank; }
    argv[k] = NULL;
    snprintf(log, sizeof log, "%s/%s.log", j->dir, log_name);
    return tu_spawn(argv, log);
}

void job_start_all(Job *j, const char *steps) {
    j->coord = job_start(j, "dapo-coordinator", "coordinator", steps, NULL, NULL);
    j->verifier = job_start(j, "dapo-verifier", "verifier", steps, "verifier-0", NULL);
    j->learner = job_start(j, "dapo-learner", "learner", steps, "learner-0", "0");
    j->rollout[0] = job_start(j, "dapo-rollout", "rollout-0", steps, "rollout-0", NULL);
    j->rollout[1] = job_start(j, "dapo-rollout", "rollout-1", steps, "rollout-1", NULL);
}

void job_stop_all(Job *j) {
    pid_t all[] = {j->rollout[0], j->rollout[1], j->verifier, j->learner, j->coord};
    for (int i = 0; i < 5; i++) if (all[i] > 0) kill(all[i], SIGTERM);
    for (int i = 0; i < 5; i++)
        if (all[i] > 0 && tu_wait(all[i], 10000) < 0) { kill(all[i], SIGKILL); tu_wait(all[i], 2000); }
    j->rollout[0] = j->rollout[1] = j->verifier = j->learner = j->coord = 0;
}

json_t *job_status(Job *j) {
    static char body[1 << 18];
    if (tu_http(j->hport, "GET", "/api/status", NULL, body, sizeof body) != 200) return NULL;
    return json_loads(body, 0, NULL);
}

json_t *job_wait_for(Job *j, int (*pred)(json_t *), int ms, const char *what) {
    int64_t end = clock_ms() + ms;
    json_t *last = NULL;
    while (clock_ms() < end) {
        json_t *st = job_status(j);
        if (st && pred(st)) { json_decref(last); return st; }
        if (st) { json_decref(last); last = st; }
        usleep(50000);
    }
    char *dump = last ? json_dumps(last, JSON_COMPACT) : NULL;
    fail_msg("timed out waiting for %s; last status: %.2000s", what, dump ? dump : "(none)");
    return NULL;
}

int job_done(json_t *st) { return !strcmp(json_string_value(json_object_get(st, "phase")), "done"); }

/* A fresh run directory test-logs/<name>: the task data, a freshly initialised tiny model, free ports. */
void job_setup(Job *j, const char *name) {
    snprintf(j->dir, sizeof j->dir, "%s/test-logs/%s", tu_build(), name);
    char cmd[2400], bin[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && %s --split train --n 400 > %s/train.jsonl && "
             "%s/bin/dapo-init-model --config %s/configs/tiny-model/config.json --tokenizer %s/data/tokenizers/tiny "
             "--out %s/model > %s/init.log 2>&1", j->dir, j->dir, tu_bin(bin, sizeof bin, "dapo-gen-arith"), j->dir,
             tu_build(), tu_root(), tu_root(), j->dir, j->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(j->zep, sizeof j->zep, "tcp://127.0.0.1:%d", tu_free_port());
    snprintf(j->wep, sizeof j->wep, "tcp://127.0.0.1:%d", tu_free_port());
    j->hport = tu_free_port();
    j->save_freq = 0;
    j->extra[0] = NULL;
}

