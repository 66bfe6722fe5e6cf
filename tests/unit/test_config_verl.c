/* tests/unit/test_config_verl.c: verl's config surface (issue 37) against the pinned verl's own files.
 *  - every key of verl 0.9.1's _generated_ppo_trainer.yaml (tests/data/verl/ppo_trainer.keys) is implemented (a table
 *    row or an alias), fixed to the values dapo trains with, refused, or ignored with a reason — and ignored only when
 *    it tunes verl's machinery or is read only under a setting dapo refuses (config_verl.h);
 *  - the defaults policy: a key dapo implements has verl's default, except the listed ones, each with its reason, and
 *    every verl default of a fixed key is accepted except the listed ones;
 *  - verl's example scripts (tests/data/verl/<script>.args, from verl's repository by
 *    tests/reference/make_verl_fixtures.py) load: the only refusals are the algorithm family dapo lacks, each naming
 *    what dapo has, and the result validates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/config_verl.h"
#include "tests/testutil.h"

typedef struct { char key[200], value[300]; } Kv;

/* The "key<TAB>value" lines of tests/data/verl/ppo_trainer.keys ('#' lines skipped); *n of them, xmalloc'd. */
static Kv *read_keys(int *n) {
    char path[600], line[600];
    snprintf(path, sizeof path, "%s/tests/data/verl/ppo_trainer.keys", tu_root());
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    Kv *kv = calloc(2000, sizeof *kv);
    *n = 0;
    while (fgets(line, sizeof line, f) && *n < 2000) {
        line[strcspn(line, "\n")] = 0;
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab) continue;
        *tab = 0;
        snprintf(kv[*n].key, sizeof kv[*n].key, "%.199s", line);
        snprintf(kv[(*n)++].value, sizeof kv[0].value, "%.299s", tab + 1);
    }
    fclose(f);
    return kv;
}

/* The rule for a verl key, or for the keys under it when verl's default is an empty mapping ({}). */
static const VerlKey *rule_of(const Kv *kv) {
    const VerlKey *r = config_verl_key(kv->key);
    if (!r && !strcmp(kv->value, "{}")) {
        char child[260];
        snprintf(child, sizeof child, "%s.x", kv->key);
        r = config_verl_key(child);
    }
    return r;
}

static void test_every_verl_key_classified(void **state) {
    (void)state;
    int n, missing = 0, count[VERL_REFUSED + 1] = {0}, implemented = 0;
    Kv *kv = read_keys(&n);
    assert_true(n > 800);                           /* verl 0.9.1 has 898 */
    for (int i = 0; i < n; i++) {
        if (config_key_implemented(kv[i].key)) { implemented++; continue; }
        const VerlKey *r = rule_of(&kv[i]);
        if (!r) { fprintf(stderr, "unclassified: %s (verl's default %s)\n", kv[i].key, kv[i].value); missing++; continue; }
        count[r->kind]++;
        assert_non_null(r->why);
        assert_true(strlen(r->why) > 10);
        if (r->kind == VERL_FIXED) assert_non_null(r->ok);
        if (r->kind == VERL_IDLE) {                 /* its guard is a key dapo implements or fixes */
            const VerlKey *g = config_verl_key(r->guard);
            if (!config_key_implemented(r->guard) && !(g && g->kind == VERL_FIXED))
                fail_msg("%s: guard %s is neither implemented nor fixed", kv[i].key, r->guard);
        }
    }
    fprintf(stderr, "verl 0.9.1: %d keys: %d implemented, %d fixed, %d refused; ignored: %d engine, %d serving, "
            "%d cluster, %d observe, %d idle\n", n, implemented, count[VERL_FIXED], count[VERL_REFUSED],
            count[VERL_ENGINE], count[VERL_SERVING], count[VERL_CLUSTER], count[VERL_OBSERVE], count[VERL_IDLE]);
    free(kv);
    assert_int_equal(missing, 0);
}

/* Keys whose default is dapo's, not verl's (issue 37's defaults policy, docs/design.md §5), each with the reason. */
static const struct { const char *key, *why; } dapo_defaults[] = {
    { "algorithm.adv_estimator", "verl's gae needs a critic" },
    { "trainer.device", "verl's cuda: dapo runs on the CPU unless a GPU build and a GPU are there" },
    { "actor_rollout_ref.rollout.n", "verl's 1 is not a group (GRPO's advantage needs several)" },
    { "algorithm.rollout_correction.rollout_is", "verl's null would switch off the correction of async rows" },
    { "actor_rollout_ref.rollout.dtype", "float32: the same numbers on every CPU (bfloat16 storage is chosen by config)" },
    { "actor_rollout_ref.actor.fsdp_config.dtype", "float32: the same numbers on every CPU" },
    { "actor_rollout_ref.ref.fsdp_config.dtype", "float32: the reference policy computes as the actor" },
    { "actor_rollout_ref.model.path", "verl's is its example's (~/models/deepseek-llm-7b-chat): a run names its model" },
    { "data.train_files", "verl's are its GSM8K example's: a run names its data" },
    { "data.val_files", "verl's are its GSM8K example's: a run names its data" },
    { "reward.num_workers", "Python reward processes per verifier: dapo runs a verifier per node, verl's 8 serve the "
                            "whole run" },
    { "algorithm.filter_groups.metric", "verl's 'reward' names no value its DAPO reward manager records (acc, score, "
                                        "seq_reward, seq_final_reward)" },
    { "trainer.project_name", "verl's names its GSM8K example (verl_examples/gsm8k); dapo's name its own runs" },
    { "trainer.experiment_name", "verl's names its GSM8K example (verl_examples/gsm8k); dapo's name its own runs" },
    { "trainer.logger", "verl's adds wandb, which dapo drops with a warning: the default would warn on every run" },
    { "actor_rollout_ref.model.enable_gradient_checkpointing", "verl's true recomputes every layer in backward: the "
      "same gradients for a third more compute; dapo's micro-batches fit their activations" },
    { "actor_rollout_ref.actor.fsdp_config.fsdp_size", "verl's -1 shards the optimizer state over every learner rank; "
      "dapo's 1 keeps each rank's whole state, as before the sharded learner (issue 39), which has no per-layer "
      "parameter gather yet" },
};

static const char *dapo_default_why(const char *key) {
    for (size_t i = 0; i < sizeof dapo_defaults / sizeof dapo_defaults[0]; i++)
        if (!strcmp(dapo_defaults[i].key, key)) return dapo_defaults[i].why;
    return NULL;
}

/* c as config_print_yaml writes it (every key, local ones too): xmalloc'd by open_memstream (free). */
static char *resolved(const Config *c) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    config_print_yaml(c, f);
    fclose(f);
    return buf;
}

static void test_verl_defaults(void **state) {
    (void)state;
    int n, bad = 0;
    Kv *kv = read_keys(&n);
    Config base;
    config_defaults(&base);
    char *base_keys = resolved(&base);
    for (int i = 0; i < n; i++) {
        const char *v = kv[i].value;
        if (strstr(v, "${") || !strcmp(v, "???")) continue;      /* interpolations: another key's value */
        const char *why = dapo_default_why(kv[i].key);
        if (config_key_implemented(kv[i].key)) {
            Config c;
            char err[ERR_LEN] = "";
            config_defaults(&c);
            int rc = config_set(&c, kv[i].key, v, "verl's default", err);
            char *keys = resolved(&c);
            int same = !rc && !strcmp(keys, base_keys);
            if (!same && !why) {
                fprintf(stderr, "default differs from verl's: %s=%s (%s)\n", kv[i].key, v, rc ? err : "another value");
                bad++;
            }
            if (same && why) { fprintf(stderr, "listed as dapo's default but is verl's: %s\n", kv[i].key); bad++; }
            free(keys);
            config_free(&c);
        } else {
            const VerlKey *r = rule_of(&kv[i]);
            if (r && r->kind == VERL_FIXED && !config_verl_value_ok(r, v) && !why) {
                fprintf(stderr, "verl's default refused: %s=%s (dapo accepts %s)\n", kv[i].key, v, r->ok);
                bad++;
            }
        }
    }
    free(base_keys);
    config_free(&base);
    free(kv);
    assert_int_equal(bad, 0);
}

/* Applies tests/data/verl/<name>.args override by override; the keys refused, space-separated, in *refused. */
static void load_script(const char *name, Config *c, char *refused, size_t cap) {
    char path[600], line[1000];
    snprintf(path, sizeof path, "%s/tests/data/verl/%s.args", tu_root(), name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    config_defaults(c);
    refused[0] = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#' || !line[0]) continue;
        char err[ERR_LEN] = "";
        int rc = config_override(c, line, err);
        if (rc == 1) fail_msg("%s: not an override: %s", name, line);
        if (rc) {
            fprintf(stderr, "%s: refused: %s\n", name, err);
            const char *why = strstr(err, "not implemented: ");   /* a refused knob says what dapo has instead */
            if (!strstr(err, "dapo accepts") && !(why && strstr(why, "dapo")))
                fail_msg("%s: the refusal does not name what dapo has: %s", name, err);
            size_t used = strlen(refused);
            snprintf(refused + used, cap - used, "%s%.*s", used ? " " : "", (int)strcspn(line, "="), line);
        }
    }
    fclose(f);
}

static void test_verl_scripts_load(void **state) {
    (void)state;
    static const struct { const char *name, *refused; } scripts[] = {
        { "grpo_qwen3_4b_fsdp", "" },
        { "cispo_qwen3_8b_fsdp", "" },
        { "gspo_qwen3_8b_fsdp", "" },
        { "one_step_off_dapo_7b_math_fsdp2_colocate", "" },
        /* issue 40: verl's algorithm family, each run with its own loss and estimator (checked below) */
        { "sapo_qwen3_8b_fsdp", "" },
        { "gmpo_qwen3_8b_fsdp", "" },
        { "gpg_qwen3_8b_fsdp", "" },
        { "rloo_qwen3_8b_fsdp", "" },
        { "reinforce_plus_plus_qwen3_8b_fsdp", "" },
        /* issue 41: verl's fully asynchronous DAPO recipe: its async keys refused, each naming what dapo has */
        { "fully_async_dapo_7b_math_fsdp2_4_12", "rollout.total_rollout_steps async_training.staleness_threshold "
          "async_training.trigger_parameter_sync_step async_training.require_batches" },   /* partial_rollout: issue 42's */
    };
    /* what each script trains: loss mode, estimator, KL loss, KL in the reward (-1: not checked) */
    static const struct { int mode, est, kl_loss, kl_reward; } algo[] = {
        {CFG_LOSS_VANILLA, CFG_ADV_GRPO, 1, 0}, {CFG_LOSS_CISPO, CFG_ADV_GRPO, 1, 0}, {CFG_LOSS_GSPO, CFG_ADV_GRPO, 0, 0},
        {-1, -1, 0, 0}, {CFG_LOSS_SAPO, CFG_ADV_GRPO, 0, 0}, {CFG_LOSS_GEO_MEAN, CFG_ADV_GRPO, 1, 0},
        {CFG_LOSS_GPG, CFG_ADV_GPG, 0, 0}, {CFG_LOSS_VANILLA, CFG_ADV_RLOO, 0, 1},
        {CFG_LOSS_VANILLA, CFG_ADV_REINFORCE_PP, 0, 1}, {-1, -1, 0, 0},
    };
    _Static_assert(sizeof algo / sizeof algo[0] == sizeof scripts / sizeof scripts[0], "one row per script");
    for (size_t i = 0; i < sizeof scripts / sizeof scripts[0]; i++) {
        Config c;
        char refused[1000], err[ERR_LEN] = "";
        load_script(scripts[i].name, &c, refused, sizeof refused);
        if (strcmp(refused, scripts[i].refused)) fail_msg("%s: refused '%s', expected '%s'", scripts[i].name, refused,
                                                          scripts[i].refused);
        int vrc = config_validate(&c, err);
        if (!strncmp(scripts[i].name, "fully_async", 11)) {   /* and its streaming batch size, naming the dapo key */
            assert_int_equal(vrc, ERR_UNSUPPORTED);
            assert_non_null(strstr(err, "data.train_batch_size 0"));
            config_free(&c);
            continue;
        }
        if (vrc) fail_msg("%s: %s", scripts[i].name, err);
        if (algo[i].mode >= 0 && ((int)c.loss_mode != algo[i].mode || (int)c.adv_estimator != algo[i].est ||
                                  c.use_kl_loss != algo[i].kl_loss || c.use_kl_in_reward != algo[i].kl_reward))
            fail_msg("%s: loss mode %d, estimator %d, use_kl_loss %d, use_kl_in_reward %d", scripts[i].name,
                     (int)c.loss_mode, (int)c.adv_estimator, c.use_kl_loss, c.use_kl_in_reward);
        if (i == 5) assert_true(c.clip_ratio_low == 0.4 && c.clip_ratio_high == 0.4);   /* GMPO's wider clip */
        if (i == 3) {    /* verl's DAPO recipe: its reward namespace and overlong buffer, through the aliases */
            assert_int_equal(c.reward_manager, CFG_REWARD_DAPO);
            assert_true(c.overlong_buffer_enable && c.overlong_buffer_len == 4096 && c.max_resp_len == 8192);
            assert_true(c.clip_ratio_high == 0.28 && c.clip_ratio_c == 10.0 && c.rollout_n == 12);
            assert_int_equal(c.max_position_embeddings, 32768);
            assert_int_equal(c.truncation, CFG_TRUNC_LEFT);
        }
        config_free(&c);
    }
}

/* verl's clip_ratio: the clip range where clip_ratio_low / clip_ratio_high are null (verl's policy loss). */
static void test_clip_ratio_null(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    config_defaults(&c);
    assert_int_equal(config_override(&c, "actor_rollout_ref.actor.clip_ratio=0.3", err), 0);
    assert_int_equal(config_override(&c, "actor_rollout_ref.actor.clip_ratio_high=null", err), 0);
    char *keys = config_run_keys(&c, true, NULL);
    assert_non_null(strstr(keys, "actor_rollout_ref.actor.clip_ratio_high: null"));
    xfree(keys);
    config_free(&c);
}

/* One override on a fresh config: its return code; *c keeps the result (the caller frees it). */
static int one(Config *c, const char *arg, char err[ERR_LEN]) {
    config_defaults(c);
    return config_override(c, arg, err);
}

/* How verl users write things: Hydra quoting and nulls, verl's other spellings in YAML, what is refused. */
static void test_verl_syntax(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    static const struct { const char *arg; int rc; const char *says; } cases[] = {
        {"data.truncation='left'", 0, NULL},                                  /* Hydra's quotes */
        {"trainer.experiment_name=\"my exp\"", 0, NULL},
        {"actor_rollout_ref.actor.use_kl_loss=0", 0, NULL},                   /* booleans as the table reads them */
        {"actor_rollout_ref.rollout.do_sample=yes", 0, NULL},
        {"actor_rollout_ref.model.override_config={}", 0, NULL},              /* verl's default: an empty mapping */
        {"+actor_rollout_ref.model.override_config.attention_dropout=0.", 0, NULL},
        {"+actor_rollout_ref.model.override_config.attention_dropout=0.1", ERR_UNSUPPORTED, "dapo accepts 0"},
        {"+actor_rollout_ref.model.override_config.rope_theta=1e6", ERR_UNSUPPORTED, "max_position_embeddings"},
        {"+reward_model.reward_kwargs.overlong_buffer_cfg.enabel=true", ERR_UNSUPPORTED, "overlong_buffer_cfg.{enable"},
        {"trainer.default_local_dir=checkpoints/${trainer.project_name}", ERR_UNSUPPORTED, "interpolations"},
        {"actor_rollout_ref.rollout.response_length=abc", ERR_INVAL,
         "actor_rollout_ref.rollout.response_length (data.max_response_length): 'abc'"},
        {"critic.=5", ERR_INVAL, "is not a key"},
        {"bogus._target_=x", ERR_NOTFOUND, "unknown key"},
        {"data.train_batch_size._target_=x", ERR_NOTFOUND, "unknown key"},
        {"my_section.profiler.enable=true", ERR_NOTFOUND, "unknown key"},
        {"actor_rollout_ref.actor._target_=verl.workers.config.FSDPActorConfig", 0, NULL},
        {"trainer.experiment_name=bad\xff", ERR_INVAL, "not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = 0;
        int rc = one(&c, cases[i].arg, err);
        if (rc != cases[i].rc || (cases[i].says && !strstr(err, cases[i].says)))
            fail_msg("%s: rc %d (want %d), '%s' (want '%s')", cases[i].arg, rc, cases[i].rc, err,
                     cases[i].says ? cases[i].says : "");
        if (i == 0) assert_int_equal(c.truncation, CFG_TRUNC_LEFT);
        if (i == 1) assert_string_equal(c.experiment_name, "my exp");
        config_free(&c);
    }
    assert_int_equal(one(&c, "data.seed=null", err), 0);                    /* verl's null: not set */
    assert_true(c.data_seed == 1 && !config_is_set(&c, "data.seed"));
    config_free(&c);
    /* YAML: anchors, a nested spelling, a later layer overriding with the other spelling, a list under a spelling */
    char path[600];
    snprintf(path, sizeof path, "%s/test-logs", tu_build());
    mkdir(path, 0755);                                   /* tests/run.sh makes it; a test run alone may not */
    snprintf(path, sizeof path, "%s/test-logs/verl-syntax.yaml", tu_build());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("trainer: {project_name: &P myproj, experiment_name: *P}\n"
          "data: {max_response_length: 64}\n"
          "reward_model: {reward_manager: {name: dapo}, overlong_buffer: {enable: true, len: 12}}\n", f);
    fclose(f);
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, path, err), 0);
    assert_string_equal(c.experiment_name, "myproj");
    assert_int_equal(c.reward_manager, CFG_REWARD_DAPO);
    assert_int_equal(config_override(&c, "+reward.reward_kwargs.overlong_buffer_cfg.len=32", err), 0);
    assert_int_equal(c.overlong_buffer_len, 32);                          /* the command line wins over the file */
    config_free(&c);
    f = fopen(path, "w");
    fputs("reward: {num_workers: [2]}\n", f);
    fclose(f);
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, path, err), ERR_INVAL);
    assert_non_null(strstr(err, "reward.num_workers: a list is not allowed here"));
    config_free(&c);
    f = fopen(path, "w");
    fputs("critic: {x: *undefined}\n", f);
    fclose(f);
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, path, err), ERR_DECODE);         /* an undefined alias is bad YAML */
    config_free(&c);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_verl_key_classified),
        cmocka_unit_test(test_verl_defaults),
        cmocka_unit_test(test_verl_scripts_load),
        cmocka_unit_test(test_clip_ratio_null),
        cmocka_unit_test(test_verl_syntax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
