/* tests/integration/longtest_algorithms.c (make check-long): verl's algorithm family on the loopback cluster
 * (tests/support/cluster_job.h; issue 40). Each setting runs 12 steps of the tiny task: the algorithm keys of one of
 * verl's example scripts (tests/data/verl/<name>.args: every algorithm.* key and actor_rollout_ref.actor's loss keys,
 * as the script passes them), or a loss mode or estimator none of those scripts uses. Every step's loss is finite,
 * the setting's own metrics are there (actor/kl_loss with the KL loss, actor/reward_kl_penalty with the KL in the
 * reward), the group accounting adds up, and the learner says which loss and estimator it ran.
 * DAPO_ALGO_ONLY=<name> runs one setting. Logs: test-logs/algo-<name>/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/group_status.h"
#include "tests/support/cluster_job.h"
#include "tests/testutil.h"

#define STEPS 12

static Job j;

static int teardown(void **state) {
    (void)state;
    job_stop_all(&j);
    return 0;
}

typedef struct {
    const char *name;
    const char *script;          /* tests/data/verl/<script>.args, or NULL */
    const char *keys[6];         /* more keys (NULL-terminated) */
    const char *loss, *estimator;   /* what the daemons must say they run */
    int kl_loss, kl_reward;
    int staleness;               /* > 0: some step's training/off_policy/trajectory_staleness/max reaches it, none passes */
} Setting;

static const Setting settings[] = {
    {"grpo-kl", "grpo_qwen3_4b_fsdp", {NULL}, "vanilla", "grpo", 1, 0, 0},
    {"cispo", "cispo_qwen3_8b_fsdp", {NULL}, "cispo", "grpo", 1, 0, 0},
    {"gspo", "gspo_qwen3_8b_fsdp", {NULL}, "gspo", "grpo", 0, 0, 0},
    {"sapo", "sapo_qwen3_8b_fsdp", {NULL}, "sapo", "grpo", 0, 0, 0},
    {"gmpo", "gmpo_qwen3_8b_fsdp", {NULL}, "geo_mean", "grpo", 1, 0, 0},
    {"gpg", "gpg_qwen3_8b_fsdp", {NULL}, "gpg", "gpg", 0, 0, 0},
    {"rloo-kl-reward", "rloo_qwen3_8b_fsdp", {NULL}, "vanilla", "rloo", 0, 1, 0},
    {"rfpp-kl-reward", "reinforce_plus_plus_qwen3_8b_fsdp", {NULL}, "vanilla", "reinforce_plus_plus", 0, 1, 0},
    {"dppo-tv", NULL, {"actor_rollout_ref.actor.policy_loss.loss_mode=dppo_tv", NULL}, "dppo_tv", "grpo", 0, 0, 0},
    {"dppo-kl", NULL, {"actor_rollout_ref.actor.policy_loss.loss_mode=dppo_kl", NULL}, "dppo_kl", "grpo", 0, 0, 0},
    {"clip-cov", NULL, {"actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov", NULL}, "clip_cov", "grpo", 0, 0, 0},
    {"kl-cov", NULL, {"actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov", NULL}, "kl_cov", "grpo", 0, 0, 0},
    {"opo", NULL, {"algorithm.adv_estimator=opo", NULL}, "vanilla", "opo", 0, 0, 0},
    {"grpo-passk", NULL, {"algorithm.adv_estimator=grpo_passk", NULL}, "vanilla", "grpo_passk", 0, 0, 0},
    {"rfpp-baseline", NULL, {"algorithm.adv_estimator=reinforce_plus_plus_baseline", NULL}, "vanilla",
     "reinforce_plus_plus_baseline", 0, 0, 0},
    {"rfpp-gamma-adaptive", NULL, {"algorithm.adv_estimator=reinforce_plus_plus", "algorithm.gamma=0.95",
                                   "algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.type=adaptive", NULL},
     "vanilla", "reinforce_plus_plus", 0, 1, 0},
    {"dr-grpo", NULL, {"algorithm.norm_adv_by_std_in_grpo=false",
                       "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm", NULL}, "vanilla", "grpo", 0, 0, 0},
    /* issue 41: staleness 4 with a learner slower than generation (8 PPO epochs): steps queue behind the one training */
    {"async-staleness-4", NULL, {"trainer.staleness=4", "actor_rollout_ref.actor.ppo_epochs=8", NULL}, "vanilla",
     "grpo", 0, 0, 4},
};

/* The algorithm keys of a verl script's overrides: algorithm.* and the actor's loss keys (a '+' dropped). */
static int algorithm_key(const char *k) {
    static const char *const pre[] = {"algorithm.", "actor_rollout_ref.actor.policy_loss.",
                                      "actor_rollout_ref.actor.clip_ratio", "actor_rollout_ref.actor.use_kl_loss",
                                      "actor_rollout_ref.actor.kl_loss", "actor_rollout_ref.actor.loss_agg_mode",
                                      "actor_rollout_ref.actor.entropy_coeff", "actor_rollout_ref.actor.tau_"};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
        if (!strncmp(k, pre[i], strlen(pre[i]))) return 1;
    return 0;
}

static char g_lines[16][1000];

static int script_keys(const char *script, int n) {
    char path[600], line[1000];
    snprintf(path, sizeof path, "%s/tests/data/verl/%s.args", tu_root(), script);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f) && n < 10) {   /* Job.extra holds 16, the setting adds its own */
        line[strcspn(line, "\n")] = 0;
        const char *k = line[0] == '+' ? line + 1 : line;
        if (line[0] == '#' || !algorithm_key(k)) continue;
        snprintf(g_lines[n], sizeof g_lines[n], "%s", k);
        j.extra[n] = g_lines[n];
        n++;
    }
    fclose(f);
    return n;
}

/* The number value of key in the metrics line of step, or NAN. */
static double metric_at(const char *path, int step, const char *key) {
    FILE *f = fopen(path, "r");
    static char line[1 << 16];
    double v = NAN;
    while (f && fgets(line, sizeof line, f)) {
        json_t *o = json_loads(line, 0, NULL);
        if (o && json_integer_value(json_object_get(o, "step")) == step && json_object_get(o, key))
            v = json_number_value(json_object_get(o, key));
        json_decref(o);
    }
    if (f) fclose(f);
    return v;
}

static void run_setting(const Setting *s) {
    char name[64], cmd[1600], path[400];
    snprintf(name, sizeof name, "algo-%s", s->name);
    job_setup(&j, name);
    j.save_freq = 6;
    int n = s->script ? script_keys(s->script, 0) : 0;
    for (int i = 0; s->keys[i]; i++) j.extra[n++] = s->keys[i];
    j.extra[n] = NULL;
    char steps[8];
    snprintf(steps, sizeof steps, "%d", STEPS);
    job_start_all(&j, steps);
    json_t *st = job_wait_for(&j, job_done, 900000, "12 steps done");
    tu_assert_groups_add_up(st, 1);
    json_decref(st);
    job_stop_all(&j);
    snprintf(cmd, sizeof cmd, "grep -q 'policy loss %s,' %s/learner.log && grep -q 'advantages: %s' %s/coordinator.log",
             s->loss, j.dir, s->estimator, j.dir);
    if (system(cmd)) fail_msg("%s: the daemons do not say they ran loss %s and estimator %s", s->name, s->loss,
                              s->estimator);
    snprintf(path, sizeof path, "%s/ckpt/metrics.jsonl", j.dir);
    int reached = 0;
    for (int step = 1; step <= STEPS; step++) {
        double pg = metric_at(path, step, "actor/pg_loss"), gn = metric_at(path, step, "actor/grad_norm");
        if (!isfinite(pg) || !isfinite(gn)) fail_msg("%s step %d: pg_loss %g, grad_norm %g", s->name, step, pg, gn);
        if (s->kl_loss && !isfinite(metric_at(path, step, "actor/kl_loss")))
            fail_msg("%s step %d: no actor/kl_loss", s->name, step);
        if (s->kl_reward && !isfinite(metric_at(path, step, "actor/reward_kl_penalty_coeff")))
            fail_msg("%s step %d: no actor/reward_kl_penalty_coeff", s->name, step);
        double st = metric_at(path, step, "training/off_policy/trajectory_staleness/max");
        if (s->staleness && (!(st <= s->staleness) || st < 0))
            fail_msg("%s step %d: trajectory_staleness/max %g (bound %d)", s->name, step, st, s->staleness);
        if (s->staleness && st == s->staleness) reached++;
    }
    if (s->staleness && !reached) fail_msg("%s: no step reached staleness %d", s->name, s->staleness);
    if (s->staleness) printf("algorithms: %s: %d steps at staleness %d\n", s->name, reached, s->staleness);
    printf("algorithms: %s: %d steps, pg_loss %.4g .. %.4g, score %.3f .. %.3f\n", s->name, STEPS,
           metric_at(path, 1, "actor/pg_loss"), metric_at(path, STEPS, "actor/pg_loss"),
           metric_at(path, 1, "critic/score/mean"), metric_at(path, STEPS, "critic/score/mean"));
}

static void test_algorithms(void **state) {
    (void)state;
    const char *only = getenv("DAPO_ALGO_ONLY");
    int ran = 0;
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        if (only && *only && strcmp(only, settings[i].name)) continue;
        run_setting(&settings[i]);
        ran++;
    }
    assert_true(ran >= 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_algorithms, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
