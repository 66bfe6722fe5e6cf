/* tests/unit/test_configs.c: every recipe in configs/ parses and validates; the paper's 32B recipe has the paper's
 * values (issue 9). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <glob.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "tests/testutil.h"

static void test_every_config_validates(void **state) {
    (void)state;
    char pattern[512];
    snprintf(pattern, sizeof pattern, "%s/configs/*.yaml", tu_root());
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    assert_true(g.gl_pathc >= 1);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        Config c;
        char err[ERR_LEN] = "";
        config_defaults(&c);
        int rc = config_load_file(&c, g.gl_pathv[i], err);
        if (!rc) rc = config_validate(&c, err);
        if (rc) fail_msg("%s: %s", g.gl_pathv[i], err);
        config_free(&c);
    }
    globfree(&g);
}

static void test_dapo_32b_recipe(void **state) {
    (void)state;
    char path[512], err[ERR_LEN];
    snprintf(path, sizeof path, "%s/configs/dapo-qwen2.5-32b.yaml", tu_root());
    Config c;
    config_defaults(&c);
    assert_int_equal(config_load_file(&c, path, err), 0);
    assert_int_equal(config_validate(&c, err), 0);
    assert_int_equal(c.train_batch_size, 512);
    assert_int_equal(c.gen_batch_size, 1536);
    assert_int_equal(c.rollout_n, 16);
    assert_int_equal(c.ppo_mini_batch_size, 32);
    assert_true(c.lr == 1e-6 && c.lr_warmup_steps == 20 && c.weight_decay == 0.1);
    assert_true(c.clip_ratio_low == 0.2 && c.clip_ratio_high == 0.28 && c.clip_ratio_c == 10.0);
    assert_int_equal(c.loss_agg_mode, CFG_AGG_TOKEN_MEAN);
    assert_int_equal(c.max_response_length, 16384 + 4096);
    assert_true(c.overlong_buffer_enable && c.overlong_buffer_len == 4096 && c.overlong_penalty_factor == 1.0);
    assert_true(c.temperature == 1.0 && c.top_p == 1.0);
    assert_true(c.val_n == 32 && c.val_top_p == 0.7 && c.val_do_sample);
    assert_true(c.filter_groups_enable && c.max_num_gen_batches == 10);
    assert_int_equal(c.filter_groups_metric, CFG_METRIC_ACC);
    assert_int_equal(c.val_files.n, 1);
    assert_string_equal(c.val_files.v[0], "data/aime-2024.jsonl");
    config_free(&c);
}

/* c's resolved YAML (config_print_yaml) equals the file want_path, else the test fails naming what. */
static void check_resolved(const Config *c, const char *what, const char *want_path) {
    char *got = NULL;
    size_t got_len = 0;
    FILE *m = open_memstream(&got, &got_len);
    config_print_yaml(c, m);
    fclose(m);
    FILE *w = fopen(want_path, "rb");
    if (!w) fail_msg("%s: missing", want_path);
    char want[16384];
    size_t n = fread(want, 1, sizeof want - 1, w);
    fclose(w);
    want[n] = 0;
    if (strcmp(got, want) != 0) fail_msg("%s resolves otherwise than %s:\n%s", what, want_path, got);
    free(got);
}

/* Each ablation row names the row before as its base (`defaults:`) and holds only its change; each resolves to the
 * YAML its whole-file copy resolved to before (tests/data/configs/ablation/<row>.resolved.yaml, from
 * `dapo-coordinator --config configs/ablation/<row>.yaml --print-config` at the commit before; a key added to the
 * table since adds its default's lines and nothing else: reward_model.reward_manager and .reward_kwargs.max_resp_len;
 * actor.clip_ratio and model.override_config.max_position_embeddings). Issue 37 moved the defaults to verl's: the rows
 * resolve as before because configs/default.yaml, their base, sets every key whose default moved. */
static void test_ablation_rows_resolve_as_before(void **state) {
    (void)state;
    char pattern[512];
    snprintf(pattern, sizeof pattern, "%s/configs/ablation/*.yaml", tu_root());
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    assert_int_equal(g.gl_pathc, 7);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        Config c;
        char err[ERR_LEN] = "", want_path[700];
        config_defaults(&c);
        int rc = config_load_file(&c, g.gl_pathv[i], err);
        if (!rc) rc = config_validate(&c, err);
        if (rc) fail_msg("%s: %s", g.gl_pathv[i], err);
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        snprintf(want_path, sizeof want_path, "%s/tests/data/configs/ablation/%.*s.resolved.yaml", tu_root(),
                 (int)(strlen(base) - 5), base);
        check_resolved(&c, g.gl_pathv[i], want_path);
        config_free(&c);
    }
    globfree(&g);
}

/* make run's config (configs/default.yaml) resolves to the committed copy (tests/data/configs/default.resolved.yaml):
 * a default that changes in the table (issue 37's defaults policy) cannot change the main job without this file
 * changing in the same commit. */
static void test_default_run_resolves_as_committed(void **state) {
    (void)state;
    Config c;
    char err[ERR_LEN] = "", path[600], want_path[700];
    snprintf(path, sizeof path, "%s/configs/default.yaml", tu_root());
    snprintf(want_path, sizeof want_path, "%s/tests/data/configs/default.resolved.yaml", tu_root());
    config_defaults(&c);
    int rc = config_load_file(&c, path, err);
    if (!rc) rc = config_validate(&c, err);
    if (rc) fail_msg("%s: %s", path, err);
    check_resolved(&c, path, want_path);
    config_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_config_validates),
        cmocka_unit_test(test_ablation_rows_resolve_as_before),
        cmocka_unit_test(test_default_run_resolves_as_committed),
        cmocka_unit_test(test_dapo_32b_recipe),
    };
    return cmocka_run_group_tests_name("configs", tests, NULL, NULL);
}
