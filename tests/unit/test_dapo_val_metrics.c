/* tests/unit/test_dapo_val_metrics.c: dapo/val_metrics.h on hand-computed cases: mean@n, best@n/mean and maj@n/mean
 * per data source with verl's names, the majority vote's tie rule (the earliest prediction), sources in first-seen
 * order, and the overall mean dapo-sft reports. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dapo/val_metrics.h"

static void test_two_sources(void **state) {
    (void)state;
    ValAgg a;
    val_agg_init(&a, 4);
    /* gsm8k prompt 1: 1 of 4 right; the majority answer "7" (3 votes) is wrong -> mean .25, best 1, maj 0 */
    float p1[4] = { 0, 1, 0, 0 };
    const char *q1[4] = { "7", "9", "7", "7" };
    val_agg_add(&a, "gsm8k", p1, q1, 4);
    /* math prompt: 2 of 4 right; "3" and "5" tie at 2 votes, the earliest ("3", right) wins -> maj 1 */
    float p2[4] = { 1, 0, 1, 0 };
    const char *q2[4] = { "3", "5", "3", "5" };
    val_agg_add(&a, "math", p2, q2, 4);
    /* gsm8k prompt 2: all right -> mean 1, best 1, maj 1 */
    float p3[4] = { 1, 1, 1, 1 };
    const char *q3[4] = { "2", "2", "2", "2" };
    val_agg_add(&a, "gsm8k", p3, q3, 4);
    Metrics m = { 0 };
    val_agg_metrics(&a, &m);
    assert_int_equal(m.n, 6);
    assert_string_equal(m.m[0].name, "val-core/gsm8k/acc/mean@4");
    assert_true(m.m[0].value == (0.25 + 1.0) / 2);
    assert_string_equal(m.m[1].name, "val-core/gsm8k/acc/best@4/mean");
    assert_true(m.m[1].value == 1.0);
    assert_string_equal(m.m[2].name, "val-core/gsm8k/acc/maj@4/mean");
    assert_true(m.m[2].value == 0.5);
    assert_string_equal(m.m[3].name, "val-core/math/acc/mean@4");
    assert_true(m.m[3].value == 0.5);
    assert_string_equal(m.m[5].name, "val-core/math/acc/maj@4/mean");
    assert_true(m.m[5].value == 1.0);
    assert_true(val_agg_overall_mean(&a) == (0.25 + 0.5 + 1.0) / 3);
    metrics_free(&m);
    val_agg_free(&a);
}

static void test_greedy_without_predictions(void **state) {
    (void)state;
    ValAgg a;
    val_agg_init(&a, 1);
    assert_true(val_agg_overall_mean(&a) == 0);
    const float r[5] = { 1, 0, 1, 1, 0 };
    for (int i = 0; i < 5; i++) val_agg_add(&a, "", &r[i], NULL, 1);
    assert_int_equal(a.n_src, 1);
    assert_int_equal(a.src[0].prompts, 5);
    assert_true(val_agg_overall_mean(&a) == 3.0 / 5);
    Metrics m = { 0 };
    val_agg_metrics(&a, &m);
    assert_int_equal(m.n, 1);                          /* n = 1: mean@1 only (verl) */
    assert_string_equal(m.m[0].name, "val-core//acc/mean@1");
    assert_true(m.m[0].value == 3.0 / 5);
    metrics_free(&m);
    val_agg_free(&a);
}

/* pass@k, unbiased (Chen et al. 2021): hand-computed binomial ratios, the edge cases, and the per-source average. */
static void test_pass_at_k(void **state) {
    (void)state;
    assert_true(fabs(val_pass_at_k(4, 1, 1) - 0.25) < 1e-15);
    assert_true(fabs(val_pass_at_k(4, 1, 2) - (1 - 3.0 / 6)) < 1e-15);           /* 1 - C(3,2)/C(4,2) */
    assert_true(fabs(val_pass_at_k(5, 2, 3) - (1 - 1.0 / 10)) < 1e-15);          /* 1 - C(3,3)/C(5,3) */
    assert_true(fabs(val_pass_at_k(32, 3, 8) - (1 - (24.0 / 32) * (23.0 / 31) * (22.0 / 30))) < 1e-15);  /* C(29,8)/C(32,8) */
    assert_true(val_pass_at_k(8, 0, 4) == 0 && val_pass_at_k(8, 5, 4) == 1 && val_pass_at_k(8, 8, 8) == 1);
    assert_true(isnan(val_pass_at_k(4, 1, 5)) && isnan(val_pass_at_k(4, 1, 0)) && isnan(val_pass_at_k(4, 5, 1)));
    ValAgg a;
    val_agg_init(&a, 4);
    float p1[4] = {0, 1, 0, 0}, p2[4] = {1, 1, 0, 1};
    val_agg_add(&a, "aime", p1, NULL, 4);
    val_agg_add(&a, "aime", p2, NULL, 4);
    assert_true(fabs(val_agg_pass_at(&a, 0, 1) - (0.25 + 0.75) / 2) < 1e-15);    /* pass@1 = mean@4 */
    assert_true(fabs(val_agg_pass_at(&a, 0, 2) - (0.5 + 1.0) / 2) < 1e-15);
    assert_true(val_agg_pass_at(&a, 0, 4) == 1.0);                                /* = best@4 */
    assert_true(isnan(val_agg_pass_at(&a, 1, 1)));
    val_agg_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_at_k),
        cmocka_unit_test(test_two_sources),
        cmocka_unit_test(test_greedy_without_predictions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
