/* tests/unit/test_dapo_filter.c: the dynamic-sampling group filter (common/dapo/filter.h): mixed groups kept,
 * all-equal groups dropped, a group of one kept (verl: std > 0 or len == 1), the metric choice (acc reads the
 * raw accuracy, never the length-shaped reward: all-wrong responses of lengths 100, 100, 3900, 4000 whose
 * rewards differ only by overlong penalties are filtered), solve_none / solve_all, bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "dapo/filter.h"

static void test_keep_rules(void **state) {
    (void)state;
    double acc[12] = { 1, 0, 0, 1,   0, 0, 0,   1, 1,   0,   1, NAN };
    int sizes[5] = { 4, 3, 2, 1, 2 };
    uint8_t keep[5];
    FilterStats st;
    char err[ERR_LEN];
    assert_int_equal(filter_groups(acc, sizes, 5, keep, &st, err), 0);
    assert_int_equal(keep[0], 1);   /* mixed */
    assert_int_equal(keep[1], 0);   /* all wrong */
    assert_int_equal(keep[2], 0);   /* all right */
    assert_int_equal(keep[3], 1);   /* a single response: kept, as verl */
    assert_int_equal(keep[4], 0);   /* NaN: np.std is NaN, NaN > 0 is false */
    assert_int_equal(st.n_groups, 5);
    assert_int_equal(st.n_kept, 2);
    assert_int_equal(st.n_filtered, 3);
    int none, all;
    assert_int_equal(filter_solve_counts(acc, sizes, 4, &none, &all, err), 0);
    assert_int_equal(none, 2);      /* group 1, and the single wrong response of group 3 */
    assert_int_equal(all, 1);       /* group 2 */
}

/* Overlong penalty by hand (verl DAPORewardManager): L = 4096, B = 1024, factor 1: expected 3072;
 * lengths 100, 100 -> 0; 3900 -> -(828 / 1024); 4000 -> -(928 / 1024). Every answer wrong: score -1, acc 0. */
static void test_acc_ignores_length_shaping(void **state) {
    (void)state;
    const int len[4] = { 100, 100, 3900, 4000 };
    double pen[4], v[4];
    for (int i = 0; i < 4; i++) {
        double exceed = len[i] - (4096 - 1024);
        pen[i] = fmin(-exceed / 1024.0 * 1.0, 0.0);
    }
    assert_true(pen[0] == 0 && pen[1] == 0 && pen[2] < 0 && pen[3] < pen[2]);
    int sizes[1] = { 4 };
    uint8_t keep[1];
    char err[ERR_LEN];
    const struct { FilterMetric m; int kept; } cases[] = {
        { FILTER_METRIC_ACC, 0 }, { FILTER_METRIC_SCORE, 0 },
        { FILTER_METRIC_SEQ_REWARD, 1 }, { FILTER_METRIC_SEQ_FINAL_REWARD, 1 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < 4; i++) v[i] = filter_metric_value(cases[c].m, -1.0, 0.0, pen[i]);
        assert_int_equal(filter_groups(v, sizes, 1, keep, NULL, err), 0);
        assert_int_equal(keep[0], cases[c].kept);
    }
    /* the same with L = B = 4096 (every length penalised, all four rewards different) */
    for (int i = 0; i < 4; i++) v[i] = filter_metric_value(FILTER_METRIC_ACC, -1.0, 0.0, -len[i] / 4096.0);
    assert_int_equal(filter_groups(v, sizes, 1, keep, NULL, err), 0);
    assert_int_equal(keep[0], 0);
}

static void test_names_and_bad_input(void **state) {
    (void)state;
    FilterMetric m;
    char err[ERR_LEN];
    const char *names[4] = { "acc", "score", "seq_reward", "seq_final_reward" };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(filter_metric_parse(names[i], &m, err), 0);
        assert_int_equal(m, i);
        assert_string_equal(filter_metric_name(m), names[i]);
    }
    assert_int_equal(filter_metric_parse("reward", &m, err), ERR_INVAL);
    assert_non_null(strstr(err, "seq_final_reward"));
    assert_string_equal(filter_metric_name((FilterMetric)9), "?");
    double v[2] = { 0, 1 };
    int bad[1] = { 0 };
    uint8_t keep[1];
    int a, b;
    assert_int_equal(filter_groups(v, bad, 1, keep, NULL, err), ERR_INVAL);
    assert_int_equal(filter_groups(NULL, bad, 1, keep, NULL, err), ERR_INVAL);
    assert_int_equal(filter_groups(v, bad, -2, keep, NULL, err), ERR_INVAL);
    assert_int_equal(filter_solve_counts(v, bad, 1, &a, &b, err), ERR_INVAL);
    FilterStats st;
    assert_int_equal(filter_groups(NULL, NULL, 0, NULL, &st, err), 0);
    assert_int_equal(st.n_groups, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_rules),
        cmocka_unit_test(test_acc_ignores_length_shaping),
        cmocka_unit_test(test_names_and_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
