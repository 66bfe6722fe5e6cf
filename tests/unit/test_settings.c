/* tests/unit/test_settings.c: the adapters from the config to each consumer's parameters (settings/settings.h) and
 * the typed enum settings of the config table (issue 36): every CFG_ENUM value is its C enum, printed back by name;
 * the rollout temperature is > 0 (the learner divides by it), 0 only for greedy validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "settings/settings.h"
#include "tokenizer/chat.h"

static void test_loss_params(void **state) {
    (void)state;
    Config c;
    config_defaults(&c);
    LossParams p;
    char err[ERR_LEN];
    settings_loss_params(&c, &p);
    assert_true(p.clip_ratio_low == 0.2 && p.clip_ratio_high == 0.2 && p.clip_ratio_c == 3.0);     /* verl's */
    /* verl's clip_ratio stands in for a null clip_ratio_low / clip_ratio_high (its policy loss) */
    assert_int_equal(config_set(&c, "actor_rollout_ref.actor.clip_ratio", "0.3", "test", err), 0);
    assert_int_equal(config_set(&c, "actor_rollout_ref.actor.clip_ratio_high", "0.28", "test", err), 0);
    settings_loss_params(&c, &p);
    assert_true(p.clip_ratio_low == 0.2 && p.clip_ratio_high == 0.28);
    assert_int_equal(config_set(&c, "actor_rollout_ref.actor.clip_ratio_low", "null", "test", err), 0);
    settings_loss_params(&c, &p);
    assert_true(p.clip_ratio_low == 0.3 && p.clip_ratio_high == 0.28);
    assert_int_equal(p.agg, LOSS_AGG_TOKEN_MEAN);
    assert_true(p.entropy_coeff == 0 && p.batch_num_tokens == 0 && p.dp_size == 1);
    /* seq-mean-token-sum-norm's divisor: data.max_response_length while actor.loss_scale_factor is null (verl's) */
    assert_true(p.loss_scale_factor == c.max_response_length && p.mode == LOSS_MODE_VANILLA);
    assert_int_equal(config_set(&c, "actor_rollout_ref.actor.loss_scale_factor", "512", "test", err), 0);
    settings_loss_params(&c, &p);
    assert_true(p.loss_scale_factor == 512);
    assert_int_equal(config_set(&c, "actor_rollout_ref.actor.loss_scale_factor", "null", "test", err), 0);
    settings_loss_params(&c, &p);
    assert_true(p.loss_scale_factor == c.max_response_length);
    static const struct { const char *name; LossAggMode m; } modes[] = {
        {"token-mean", LOSS_AGG_TOKEN_MEAN}, {"seq-mean-token-mean", LOSS_AGG_SEQ_MEAN_TOKEN_MEAN},
        {"seq-mean-token-sum", LOSS_AGG_SEQ_MEAN_TOKEN_SUM}, {"seq-mean-token-sum-norm", LOSS_AGG_SEQ_MEAN_TOKEN_SUM_NORM}};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(config_set(&c, "actor_rollout_ref.actor.loss_agg_mode", modes[i].name, "test", err), 0);
        settings_loss_params(&c, &p);
        assert_int_equal(p.agg, modes[i].m);
        assert_string_equal(loss_agg_mode_name(p.agg), modes[i].name);
        assert_string_equal(config_enum_name(&c, "actor_rollout_ref.actor.loss_agg_mode"), modes[i].name);
    }
    config_free(&c);
}

static void test_sample_params(void **state) {
    (void)state;
    Config c;
    config_defaults(&c);
    SampleParams p;
    char err[ERR_LEN];
    settings_sample_params(&c, 0, &p);
    assert_true(p.temperature == 1.0f && p.top_p == 1.0f && p.top_k == 0 && !p.greedy);   /* verl top_k -1 */
    settings_sample_params(&c, 1, &p);
    assert_true(p.greedy);                                      /* verl's validation: do_sample false, temperature 0 */
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.val_kwargs.do_sample", "true", "test", err), 0);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.val_kwargs.temperature", "1.0", "test", err), 0);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.val_kwargs.top_p", "0.7", "test", err), 0);
    settings_sample_params(&c, 1, &p);
    assert_true(p.top_p == 0.7f && !p.greedy);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.val_kwargs.do_sample", "false", "test", err), 0);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.top_k", "20", "test", err), 0);
    settings_sample_params(&c, 1, &p);
    assert_true(p.greedy);
    settings_sample_params(&c, 0, &p);
    assert_true(p.top_k == 20 && !p.greedy);
    /* the rollout temperature is checked once, by the table: at least 1e-5 (vLLM's sampling epsilon; a smaller one is
     * 0 in the fp32 the rollouts sample with) */
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.temperature", "0", "test", err), ERR_INVAL);
    assert_non_null(strstr(err, "at least 1e-05"));
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.temperature", "1e-50", "test", err), ERR_INVAL);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.temperature", "1e-5", "test", err), 0);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.val_kwargs.temperature", "1e-50", "test", err), 0);
    assert_int_equal(config_validate(&c, err), ERR_INVAL);          /* 0 or at least 1e-05 */
    assert_non_null(strstr(err, "0 or at least 1e-05"));
    /* validation: 0 only when greedy (do_sample false, set above); with do_sample true it is refused */
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.val_kwargs.temperature", "0", "test", err), 0);
    assert_int_equal(config_validate(&c, err), 0);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.val_kwargs.do_sample", "true", "test", err), 0);
    assert_int_equal(config_validate(&c, err), ERR_INVAL);
    assert_non_null(strstr(err, "val_kwargs.do_sample=false"));
    config_free(&c);
}

/* Every enum key: each allowed name sets its index (the C enum's value) and prints back as that name. */
static void test_enum_keys(void **state) {
    (void)state;
    static const struct { const char *key; const char *names[9]; } keys[] = {
        {"data.truncation", {"error", "left", "right", "middle"}},
        {"data.chat_template", {"auto", "qwen2.5", "qwen3", "llama3", "none"}},
        {"data.on_malformed", {"skip", "error"}},
        {"actor_rollout_ref.actor.optim.warmup_style", {"constant", "cosine"}},
        {"algorithm.adv_estimator", {"grpo", "rloo", "opo", "gpg", "grpo_passk", "reinforce_plus_plus",
                                     "reinforce_plus_plus_baseline", "grpo_vectorized", "rloo_vectorized"}},
        {"actor_rollout_ref.actor.policy_loss.loss_mode", {"vanilla", "gspo", "cispo", "sapo", "gpg", "dppo_tv",
                                                           "dppo_kl"}},
        {"algorithm.filter_groups.metric", {"acc", "score", "seq_reward", "seq_final_reward"}},
        {"algorithm.rollout_correction.loss_type", {"ppo_clip", "reinforce"}},
        {"trainer.device", {"cpu", "cuda"}},
        {"trainer.resume_mode", {"auto", "disable", "resume_path"}},
    };
    Config c;
    char err[ERR_LEN];
    config_defaults(&c);
    assert_int_equal(c.truncation, CFG_TRUNC_ERROR);
    assert_int_equal(c.chat_template, CFG_CHAT_AUTO);
    assert_int_equal(c.resume_mode, CFG_RESUME_AUTO);
    assert_int_equal(c.device, CFG_DEVICE_CPU);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        for (int k = 0; k < 5 && keys[i].names[k]; k++) {
            assert_int_equal(config_set(&c, keys[i].key, keys[i].names[k], "test", err), 0);
            assert_string_equal(config_enum_name(&c, keys[i].key), keys[i].names[k]);
        }
    assert_int_equal(c.truncation, CFG_TRUNC_MIDDLE);
    assert_int_equal(c.chat_template, CFG_CHAT_NONE);
    assert_int_equal(c.on_malformed, CFG_MALFORMED_ERROR);
    assert_int_equal(c.warmup_style, CFG_WARMUP_COSINE);
    assert_int_equal(c.filter_groups_metric, CFG_METRIC_SEQ_FINAL_REWARD);
    assert_int_equal(settings_filter_metric(&c), FILTER_METRIC_SEQ_FINAL_REWARD);
    assert_int_equal(c.rc_loss_type, CFG_RC_LOSS_REINFORCE);
    assert_int_equal(c.device, CFG_DEVICE_CUDA);
    assert_int_equal(c.resume_mode, CFG_RESUME_PATH);
    assert_string_equal(config_enum_name(&c, "data.max_prompt_length"), "?");
    char *yaml = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&yaml, &len);
    config_print_yaml(&c, f);
    fclose(f);
    assert_non_null(strstr(yaml, "  chat_template: \"none\"\n"));
    assert_non_null(strstr(yaml, "  resume_mode: \"resume_path\"\n"));
    free(yaml);
    config_free(&c);
}

static void test_dataset_options(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    config_defaults(&c);
    DatasetOptions o;
    assert_int_equal(settings_dataset_options(&c, NULL, &o, err), ERR_INVAL);    /* auto needs a tokenizer */
    assert_non_null(strstr(err, "data.chat_template=auto"));
    assert_int_equal(config_set(&c, "data.chat_template", "qwen3", "test", err), 0);
    assert_int_equal(config_set(&c, "data.truncation", "left", "test", err), 0);
    assert_int_equal(config_set(&c, "data.on_malformed", "error", "test", err), 0);
    assert_int_equal(config_set(&c, "data.max_prompt_length", "77", "test", err), 0);
    assert_int_equal(settings_dataset_options(&c, NULL, &o, err), 0);
    assert_int_equal(o.chat, CHAT_QWEN3);
    assert_int_equal(o.truncation, DATA_TRUNC_LEFT);
    assert_true(o.malformed_fatal);
    assert_int_equal(o.max_prompt_length, 77);
    config_free(&c);
}

static void test_rollout_seed(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    config_defaults(&c);
    assert_int_equal(settings_rollout_seed(&c), 42);                /* verl's default */
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.seed", "-1", "test", err), 0);   /* trainer.seed */
    assert_int_equal(settings_rollout_seed(&c), 1);
    assert_int_equal(config_set(&c, "trainer.seed", "7", "test", err), 0);
    assert_int_equal(settings_rollout_seed(&c), 7);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.seed", "42", "test", err), 0);
    assert_int_equal(settings_rollout_seed(&c), 42);
    assert_int_equal(config_set(&c, "actor_rollout_ref.rollout.seed", "-2", "test", err), ERR_INVAL);
    config_free(&c);
}

static void test_rollout_corr(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN];
    config_defaults(&c);
    RolloutCorrConfig rc;
    assert_int_equal(settings_rollout_corr(&c, &rc, err), 0);
    assert_true(!rc.is_on && !rc.bypass);                    /* auto, staleness 0: off */
    assert_int_equal(config_set(&c, "trainer.staleness", "1", "test", err), 0);
    assert_int_equal(settings_rollout_corr(&c, &rc, err), 0);
    assert_true(rc.is_on && rc.is_auto);
    assert_int_equal(config_set(&c, "algorithm.rollout_correction.rollout_is_threshold", "x", "test", err), 0);
    assert_int_equal(settings_rollout_corr(&c, &rc, err), ERR_INVAL);
    assert_non_null(strstr(err, "rollout_is_threshold"));
    config_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_params),  cmocka_unit_test(test_sample_params), cmocka_unit_test(test_enum_keys),
        cmocka_unit_test(test_dataset_options), cmocka_unit_test(test_rollout_corr), cmocka_unit_test(test_rollout_seed),
    };
    return cmocka_run_group_tests_name("settings", tests, NULL, NULL);
}
