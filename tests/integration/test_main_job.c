/* tests/integration/test_main_job.c: the whole cluster on loopback — coordinator, verifier, two rollouts, one learner,
 * the real binaries — runs 4 steps of a reduced default config on a freshly initialised tiny model (issue 9):
 * one rollout is killed with SIGKILL while it holds a lease (step 2 or 3) and the step still completes; the coordinator's
 * accounting shows no group lost or counted twice; a restart of every process resumes from the last checkpoint
 * (coordinator cursor and learner weights of step 4) and runs step 5. A run stopped between two checkpoints resumes
 * the step it stopped at on both sides, also after a crash between the learner's checkpoint and the coordinator's.
 * Also: the tools it prepares the job with (dapo-gen-arith, dapo-init-model) answer --help on stdout with exit 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>

#include "core/clock.h"
#include "tests/group_status.h"
#include "tests/support/cluster_job.h"
#include "tests/testutil.h"

static json_int_t geti(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static int at_step2(json_t *st) { return geti(st, "step") >= 2; }

/* rollout-1 holds a lease: its credit is below its capacity (it was sent a group it never answers). */
static int rollout1_leased(json_t *st) {
    json_t *ws = json_object_get(st, "workers");
    for (size_t i = 0; i < json_array_size(ws); i++) {
        json_t *w = json_array_get(ws, i);
        if (!strcmp(json_string_value(json_object_get(w, "id")), "rollout-1"))
            return geti(w, "credit") < geti(w, "capacity");
    }
    return 0;
}
static int done(json_t *st) { return job_done(st); }

static void assert_accounting(json_t *st) { tu_assert_groups_add_up(st, 1); }

static Job j;

/* Runs even when an assertion failed: no process outlives the test. */
static int teardown(void **state) {
    (void)state;
    job_stop_all(&j);
    return 0;
}

/* The number value of key in the metrics line of step, or NAN. */
static double metric_at(const char *path, int step, const char *key) {
    FILE *f = fopen(path, "r");
    char line[1 << 16];
    double v = NAN;
    while (f && fgets(line, sizeof line, f)) {
        json_t *o = json_loads(line, 0, NULL);
        if (o && geti(o, "step") == step && json_object_get(o, key)) v = json_number_value(json_object_get(o, key));
        json_decref(o);
    }
    if (f) fclose(f);
    return v;
}

static void test_three_steps_kill_and_resume(void **state) {
    (void)state;
    job_setup(&j, "main-job");
    /* issue 40: verl's GRPO examples' KL loss (low_var_kl) against the reference policy, through the whole cluster */
    j.extra[0] = "actor_rollout_ref.actor.use_kl_loss=true";
    j.extra[1] = "actor_rollout_ref.actor.kl_loss_coef=0.1";
    /* and the KL penalty in the reward with the adaptive controller (its state survives the resume below) */
    j.extra[2] = "algorithm.use_kl_in_reward=true";
    j.extra[3] = "algorithm.kl_ctrl.type=adaptive";
    j.extra[4] = "algorithm.kl_ctrl.kl_coef=0.01";
    j.extra[5] = "algorithm.kl_ctrl.horizon=100";
    j.extra[6] = NULL;
    char cmd[2400];
    job_start_all(&j, "4");
    /* From step 2 on, rollout-1 is frozen (SIGSTOP) so that it is caught holding a lease whatever the timing; then
     * it is killed with SIGKILL mid-step. Its lease expires (1.5 s) and the group goes to rollout-0: a step of 6
     * groups x 4 sequences needs more than rollout-0's 8 slots, so rollout-1 is always sent work. */
    json_t *st = job_wait_for(&j, at_step2, 120000, "step 2");
    json_decref(st);
    kill(j.rollout[1], SIGSTOP);
    st = job_wait_for(&j, rollout1_leased, 60000, "a lease on the frozen rollout-1");
    json_decref(st);
    kill(j.rollout[1], SIGKILL);
    assert_int_equal(tu_wait(j.rollout[1], 5000), 128 + SIGKILL);
    j.rollout[1] = 0;
    st = job_wait_for(&j, done, 180000, "4 steps done");
    assert_int_equal(geti(st, "step"), 4);
    assert_int_equal(geti(st, "policy_version"), 4);
    assert_accounting(st);
    assert_int_equal(tu_group_count(st, "trained"), 16);        /* 4 steps x train_batch_size 4, none twice */
    assert_int_equal(tu_group_count(st, "surplus"), 8);         /* 4 steps x (6 drawn - 4 trained) */
    json_decref(st);
    job_stop_all(&j);
    char path[400];
    snprintf(path, sizeof path, "%s/ckpt/coordinator.json", j.dir);
    assert_int_equal(access(path, F_OK), 0);
    /* Restart everything over the same directory: resume from step 4, run step 5. */
    j.hport = tu_free_port();
    job_start_all(&j, "5");
    st = job_wait_for(&j, done, 180000, "step 5 after resume");
    assert_int_equal(geti(st, "step"), 5);
    assert_int_equal(geti(st, "policy_version"), 5);
    assert_int_equal(tu_group_count(st, "trained"), 20);
    assert_accounting(st);
    json_decref(st);
    job_stop_all(&j);
    snprintf(cmd, sizeof cmd, "grep -c '\"step\":' %s/ckpt/metrics.jsonl", j.dir);
    char out[64];
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_int_equal(atoi(out), 5);                           /* one metrics line per step, none repeated */
    /* the KL loss: 0 while the actor still is the reference (step 1's first update), then growing; after the resume
     * the reference is still model.path's weights (not the checkpoint's), so step 5 carries the whole distance */
    char path5[400];
    snprintf(path5, sizeof path5, "%s/ckpt/metrics.jsonl", j.dir);
    double kl[6];
    for (int s = 1; s <= 5; s++) {
        kl[s] = metric_at(path5, s, "actor/kl_loss");
        fprintf(stderr, "step %d: actor/kl_loss %.9g, actor/kl_coef %g\n", s, kl[s], metric_at(path5, s, "actor/kl_coef"));
        assert_true(metric_at(path5, s, "actor/kl_coef") == 0.1);
    }
    assert_true(kl[1] == 0 && kl[4] > 0 && kl[5] > 0);
    /* the adaptive controller: beta_{s+1} = beta_s (1 + clip(kl_s / 0.1 - 1, -0.2, 0.2) x 16 / 100), kl_s the step's
     * actor/reward_kl_penalty (0 at step 1: the old policy is the reference), across the resume between steps 4 and 5 */
    double beta = 0.01;
    for (int s = 1; s <= 5; s++) {
        double b = metric_at(path5, s, "actor/reward_kl_penalty_coeff"), pk = metric_at(path5, s, "actor/reward_kl_penalty");
        fprintf(stderr, "step %d: actor/reward_kl_penalty %.9g, actor/reward_kl_penalty_coeff %.12g\n", s, pk, b);
        if (!(fabs(b - beta) <= 1e-9 * beta))            /* metrics.jsonl keeps 12 digits */
            fail_msg("step %d: reward_kl_penalty_coeff %.17g, want %.17g", s, b, beta);
        assert_true(s > 1 || pk == 0);                    /* k1 (verl's default kl_penalty) may be negative */
        double e = pk / 0.1 - 1;
        beta *= 1 + (e < -0.2 ? -0.2 : e > 0.2 ? 0.2 : e) * 16 / 100;
    }
    assert_true(metric_at(path5, 5, "actor/reward_kl_penalty_coeff") < 0.01);     /* below the target: it shrinks */
    j.extra[0] = NULL;
}

static int at_step5(json_t *st) { return geti(st, "step") >= 5; }     /* "step": the one in progress */

/* The coordinator checkpoint's "saved" (or "pending") snapshot: its step, -1 when absent. */
static long ckpt_step(json_t *ck, const char *which) {
    json_t *s = json_object_get(ck, which);
    return s ? (long)geti(s, "step") : -1;
}

/* Stopped between two trainer.save_freq steps (3), the coordinator finishes the step in training, has the learner
 * checkpoint that step and records it only then, so a restart resumes the same step on both sides (it used to wait
 * for ever for a policy version the learner never saved). Then the crash between the learner writing a checkpoint
 * and the coordinator hearing of it: a coordinator.json whose confirmed step is older (3) and whose pending step is
 * the learner's resumes the pending one. */
static void test_stop_between_checkpoints_and_resume(void **state) {
    (void)state;
    job_setup(&j, "main-job-stop");
    j.save_freq = 3;
    job_start_all(&j, "20");
    json_t *st = job_wait_for(&j, at_step5, 180000, "step 5");
    json_decref(st);
    assert_int_equal(kill(j.coord, SIGTERM), 0);              /* the coordinator alone, as deploy/local/run.sh does */
    assert_int_equal(tu_wait(j.coord, 60000), 0);
    j.coord = 0;
    char path[400], ck[500];
    snprintf(path, sizeof path, "%s/ckpt/coordinator.json", j.dir);
    json_t *c = json_load_file(path, 0, NULL);
    assert_non_null(c);
    long S = ckpt_step(c, "saved");
    assert_true(S >= 4);
    assert_int_equal(ckpt_step(c, "pending"), -1);
    assert_int_equal(geti(json_object_get(c, "saved"), "policy_version"), S);
    snprintf(ck, sizeof ck, "%s/ckpt/global_step_%ld/actor/huggingface", j.dir, S);
    assert_int_equal(access(ck, F_OK), 0);                    /* the learner holds the same step */
    job_stop_all(&j);
    /* The crash case, written by hand: confirmed step 3, pending S (the learner's newest). */
    json_t *old = json_deep_copy(json_object_get(c, "saved"));
    json_object_set_new(old, "step", json_integer(3));
    json_object_set_new(old, "policy_version", json_integer(3));
    json_object_set(c, "pending", json_object_get(c, "saved"));
    json_object_set_new(c, "saved", old);
    assert_int_equal(json_dump_file(c, path, JSON_INDENT(1)), 0);
    json_decref(c);
    /* and a metrics row of a step after the checkpoint (a run killed later would have logged it): dropped on resume */
    char cmd[600], out[64];
    snprintf(cmd, sizeof cmd, "echo '{\"step\": %ld, \"critic/score/mean\": 9}' >> %s/ckpt/metrics.jsonl", S + 3, j.dir);
    assert_int_equal(system(cmd), 0);
    char steps[24];
    snprintf(steps, sizeof steps, "%ld", S + 1);
    j.hport = tu_free_port();
    job_start_all(&j, steps);
    st = job_wait_for(&j, done, 180000, "one step after the resume");
    assert_int_equal(geti(st, "step"), S + 1);
    assert_int_equal(geti(st, "policy_version"), S + 1);
    assert_int_equal(tu_group_count(st, "trained"), 4 * (S + 1));
    assert_accounting(st);
    json_decref(st);
    job_stop_all(&j);
    j.save_freq = 0;
    c = json_load_file(path, 0, NULL);
    assert_int_equal(ckpt_step(c, "saved"), S + 1);          /* the last step is checkpointed (save_freq > 0) */
    json_decref(c);
    snprintf(cmd, sizeof cmd, "grep -c 'the learner confirmed step %ld before the coordinator heard of it' %s/coordinator.log",
             S, j.dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_int_equal(atoi(out), 1);
    snprintf(cmd, sizeof cmd, "grep -c '\"step\":' %s/ckpt/metrics.jsonl", j.dir);
    assert_int_equal(tu_run(cmd, out, sizeof out), 0);
    assert_int_equal(atoi(out), S + 1);                       /* one row per step 1..S+1, the stray one gone */
}

/* The two tools setup_job runs: --help / -h print the usage on stdout and exit 0; a wrong flag prints it on stderr
 * and exits 2. */
/* /metrics of the finished run: `promtool check metrics` (Debian's prometheus package) reports nothing, and the
 * counters hold the run's accounting: 2 steps x 4 trained groups, 2 x 4 responses per misbehaviour. */
static void check_prometheus(Job *jb) {
    static char body[1 << 20];
    assert_int_equal(tu_http(jb->hport, "GET", "/metrics", NULL, body, sizeof body), 200);
    char path[400], cmd[600], out[8192];
    snprintf(path, sizeof path, "%s/metrics.prom", jb->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
    int rc = tu_run(cmd, out, sizeof out);
    if (rc != 0 || out[0]) fail_msg("promtool check metrics: exit %d:\n%s", rc, out);
    const char *want[] = {"dapo_groups_finished_total{state=\"trained\"} 8\n",
                          "dapo_reward_responses_total{outcome=\"timeout\"} 8\n",
                          "dapo_reward_responses_total{outcome=\"crash\"} 8\n",
                          "dapo_reward_responses_total{outcome=\"memory\"} 8\n",
                          "dapo_groups_generated_total 12\n", "dapo_groups_scored_total 12\n",
                          "# TYPE dapo_timing_step_seconds gauge\n", "# TYPE dapo_perf_effective_throughput gauge\n",
                          "dapo_reward_timeouts 4\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(body, want[i])) fail_msg("/metrics lacks '%s'", want[i]);
}

/* A Python reward function (custom_reward_function.path) on the real cluster: three of the six prompts make it
 * sleep for ever, segfault and allocate without bound. Both steps (two epochs of the six prompts) complete; each
 * step's metrics count exactly their 4 responses each as timeouts, crashes and memory errors; the function's extra
 * dict value becomes reward_extra/response_chars/mean; no interpreter is left after the run.
 * Also trainer.logger=[console,tensorboard,wandb]: wandb is dropped with a warning, the event file goes to
 * TENSORBOARD_DIR (test-logs/python-reward/tb; tests/reference/check_tfevents.py compares it with metrics.jsonl); and
 * verl's CISPO loss with RLOO advantages (issue 40), which both daemons say they run, with a finite loss each step. */
static void test_python_reward_run(void **state) {
    (void)state;
    job_setup(&j, "python-reward");
    char cmd[2400], path[400], reward[600];
    snprintf(cmd, sizeof cmd, "%s/bin/dapo-gen-arith --split train --n 6 | sed -e '1s/\"ground_truth\":\"[0-9]*\"/"
             "\"ground_truth\":\"sleep\"/' -e '2s/\"ground_truth\":\"[0-9]*\"/\"ground_truth\":\"segv\"/' "
             "-e '3s/\"ground_truth\":\"[0-9]*\"/\"ground_truth\":\"oom\"/' > %s/train.jsonl", tu_build(), j.dir);
    assert_int_equal(system(cmd), 0);
    /* a copy in the run directory: its workers' command lines end in "<copy> compute_score", no other process's does */
    snprintf(cmd, sizeof cmd, "cp %s/tests/data/reward/misbehaving_reward.py %s/reward.py", tu_root(), j.dir);
    assert_int_equal(system(cmd), 0);
    snprintf(reward, sizeof reward, "custom_reward_function.path=%s/reward.py", j.dir);
    const char *extra[] = {reward, "reward_model.timeout_s=2.5", "reward_model.num_workers=2",
                           "reward_model.worker_memory_mb=300", "trainer.save_freq=-1", "trainer.total_epochs=2",
                           "trainer.logger=[console,tensorboard,wandb]",
                           /* issue 40: another policy loss and estimator through the whole cluster */
                           "actor_rollout_ref.actor.policy_loss.loss_mode=cispo", "algorithm.adv_estimator=rloo",
                           "algorithm.use_kl_in_reward=true", NULL};   /* the RLOO script's KL, without the KL loss */
    memcpy(j.extra, extra, sizeof extra);
    snprintf(path, sizeof path, "%s/tb", j.dir);
    setenv("TENSORBOARD_DIR", path, 1);
    int64_t t0 = clock_ms();
    job_start_all(&j, "2");
    unsetenv("TENSORBOARD_DIR");
    json_t *st = job_wait_for(&j, done, 120000, "step 2 done");
    double took = (clock_ms() - t0) / 1000.0;
    assert_int_equal(geti(st, "step"), 2);
    assert_accounting(st);
    json_decref(st);
    check_prometheus(&j);
    job_stop_all(&j);
    j.extra[0] = NULL;
    snprintf(cmd, sizeof cmd, "grep -q 'trainer.logger: wandb not available in dapo: dropped' %s/coordinator.log && "
             "ls %s/tb/events.out.tfevents.* >/dev/null", j.dir, j.dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/ckpt/metrics.jsonl", j.dir);
    const char *keys[] = {"reward/timeouts", "reward/crashes", "reward/memory_errors", "reward/errors"};
    const double want[] = {4, 4, 4, 0};
    for (int step = 1; step <= 2; step++) {
        for (int i = 0; i < 4; i++)
            if (metric_at(path, step, keys[i]) != want[i])
                fail_msg("step %d: %s = %g, want %g (run took %.1f s)", step, keys[i], metric_at(path, step, keys[i]),
                         want[i], took);
        assert_true(metric_at(path, step, "reward_extra/response_chars/mean") > 0);
        assert_true(isfinite(metric_at(path, step, "actor/pg_loss")));
        assert_true(metric_at(path, step, "actor/reward_kl_penalty_coeff") == 0.001);   /* kl_ctrl fixed */
    }
    snprintf(cmd, sizeof cmd, "grep -q 'policy loss cispo' %s/learner.log && grep -q 'advantages: rloo' %s/coordinator.log",
             j.dir, j.dir);
    assert_int_equal(system(cmd), 0);
    char needle[400];
    snprintf(needle, sizeof needle, "%s/reward.py compute_score", j.dir);
    assert_int_equal(tu_count_procs(needle), 0);
}

/* dapo-gen-arith --ops 1-4 (the ablation's task): every worked solution is a chain of 1..4 correct steps, each
 * starting from the previous result, ending in "Answer: <ground truth>"; all four lengths occur; no test problem is
 * a training one; --ops 2 writes exactly the default task; bad --ops values exit 2. */
static void check_chain(const char *sol, const char *truth, int *nops) {
    const char *p = sol;
    long prev = -1, a, b, r;
    char op;
    int used = 0;
    *nops = 0;
    while (sscanf(p, "%ld%c%ld=%ld.%n", &a, &op, &b, &r, &used) == 4) {
        if ((op != '+' && op != '-') || r != (op == '+' ? a + b : a - b) || r < 0 || (prev >= 0 && a != prev))
            fail_msg("bad step in \"%s\"", sol);
        prev = r;
        (*nops)++;
        p += used;
        while (*p == ' ') p++;
    }
    char want[64];
    snprintf(want, sizeof want, "\nAnswer: %ld", prev);
    if (*nops == 0 || strcmp(p, want) || atol(truth) != prev)
        fail_msg("solution \"%s\" does not end in its answer %s", sol, truth);
}

static void test_gen_arith_ops(void **state) {
    (void)state;
    char cmd[1200], bin[300], out[256];
    tu_bin(bin, sizeof bin, "dapo-gen-arith");
    char *lines[2][400] = {{0}};
    for (int split = 0; split < 2; split++) {
        snprintf(cmd, sizeof cmd, "%s --split %s --n 400 --ops 1-4 --seed 5", bin, split ? "test" : "train");
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        char line[4096];
        int count[5] = {0}, n = 0;
        while (fgets(line, sizeof line, f) && n < 400) {
            json_error_t je;
            json_t *o = json_loads(line, 0, &je);
            assert_non_null(o);
            const char *sol = json_string_value(json_object_get(json_object_get(o, "extra_info"), "solution"));
            const char *gt = json_string_value(json_object_get(json_object_get(o, "reward_model"), "ground_truth"));
            assert_non_null(sol);
            assert_non_null(gt);
            int k;
            check_chain(sol, gt, &k);
            assert_true(k >= 1 && k <= 4);
            count[k]++;
            lines[split][n++] = strdup(sol);
            json_decref(o);
        }
        assert_int_equal(pclose(f), 0);
        assert_int_equal(n, 400);
        for (int k = 1; k <= 4; k++) if (count[k] < 60) fail_msg("%d-step problems: %d of 400", k, count[k]);
    }
    for (int i = 0; i < 400; i++)
        for (int t = 0; t < 400; t++)
            if (!strcmp(lines[0][i], lines[1][t])) fail_msg("test problem \"%s\" is also a training one", lines[1][t]);
    for (int s = 0; s < 2; s++) for (int i = 0; i < 400; i++) free(lines[s][i]);
    snprintf(cmd, sizeof cmd, "cmp -s <(%s --split train --n 300 --seed 3) <(%s --split train --n 300 --seed 3 --ops 2)",
             bin, bin);
    char bash[1400];
    snprintf(bash, sizeof bash, "bash -c '%s'", cmd);
    assert_int_equal(system(bash), 0);
    const char *bad[] = {"0", "9", "3-2", "2-x", "x", "-1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s --split train --n 1 --ops '%s' 2>&1 >/dev/null", bin, bad[i]);
        if (tu_run(cmd, out, sizeof out) != 2 || !strstr(out, "--ops"))
            fail_msg("--ops '%s': want exit 2 naming --ops, got \"%s\"", bad[i], out);
    }
}

static void test_tools_help(void **state) {
    (void)state;
    const char *tools[] = {"dapo-gen-arith", "dapo-init-model"};
    const char *flags[] = {"--help", "-h", "--bogus"};
    char cmd[700], bin[300], out[2048];
    for (int t = 0; t < 2; t++)
        for (int f = 0; f < 3; f++) {
            snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", tu_bin(bin, sizeof bin, tools[t]), flags[f]);
            int rc = tu_run(cmd, out, sizeof out);
            if (rc != (f < 2 ? 0 : 2) || (f < 2) != (strstr(out, "usage: ") == out))
                fail_msg("%s %s: exit %d, stdout \"%s\"", tools[t], flags[f], rc, out);
            if (f == 2) {
                snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", bin, flags[f]);
                assert_int_equal(tu_run(cmd, out, sizeof out), 2);
                assert_non_null(strstr(out, "usage: "));
            }
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tools_help), cmocka_unit_test(test_gen_arith_ops),
                                       cmocka_unit_test_teardown(test_python_reward_run, teardown),
                                       cmocka_unit_test_teardown(test_three_steps_kill_and_resume, teardown),
                                       cmocka_unit_test_teardown(test_stop_between_checkpoints_and_resume, teardown)};
    return cmocka_run_group_tests_name("main_job", tests, NULL, NULL);
}
