/* tests/unit/test_overlong.c: the soft overlong punishment (verl DAPORewardManager, common/dapo/overlong.h) at
 * the boundary lengths L-B-1, L-B, L-B+1, L-1, L (and past L) with hand-computed values, its fp32 rounding,
 * the refused configurations (B = 0, B > L, negative lengths, bad factors), and the overlong-filtering mask.
 * Not here: adding the penalty to scores (services/verifier). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "dapo/overlong.h"

static float pen(int64_t len, int64_t L, int64_t B, double f) {
    float p = 99.0f;
    char err[ERR_LEN];
    assert_int_equal(overlong_penalty(len, L, B, f, &p, err), 0);
    return p;
}

/* L = 20, B = 4 (expected = 16): exceed = len - 16, penalty = min(-exceed / 4 * factor, 0). */
static void test_boundaries_small(void **state) {
    (void)state;
    assert_true(pen(15, 20, 4, 1.0) == 0.0f);     /* L-B-1: exceed -1 -> +0.25 -> clipped to 0 */
    assert_true(pen(16, 20, 4, 1.0) == 0.0f);     /* L-B:   exceed 0 */
    assert_true(pen(17, 20, 4, 1.0) == -0.25f);   /* L-B+1: exceed 1 -> -1/4 */
    assert_true(pen(19, 20, 4, 1.0) == -0.75f);   /* L-1:   exceed 3 -> -3/4 */
    assert_true(pen(20, 20, 4, 1.0) == -1.0f);    /* L:     exceed 4 -> -1 */
    assert_true(pen(24, 20, 4, 1.0) == -2.0f);    /* past L (not produced by a rollout, but defined) */
    assert_true(pen(0, 20, 4, 1.0) == 0.0f);
    /* factor scales linearly */
    assert_true(pen(17, 20, 4, 0.5) == -0.125f);
    assert_true(pen(20, 20, 4, 0.5) == -0.5f);
    assert_true(pen(20, 20, 4, 0.0) == 0.0f);
    assert_false(signbit(pen(20, 20, 4, 0.0)));   /* min(-0.0, 0) gives 0 either way: never -0.0 here */
    /* B = L: expected = 0, every token is in the buffer */
    assert_true(pen(1, 8, 8, 1.0) == -0.125f);
    assert_true(pen(8, 8, 8, 1.0) == -1.0f);
}

/* The DAPO recipe: L = 20480, B = 4096, factor 1.0; and B = 3 where 1/3 rounds in fp32. */
static void test_boundaries_recipe_and_rounding(void **state) {
    (void)state;
    assert_true(pen(16383, 20480, 4096, 1.0) == 0.0f);
    assert_true(pen(16384, 20480, 4096, 1.0) == 0.0f);
    assert_true(pen(16385, 20480, 4096, 1.0) == -1.0f / 4096.0f);
    assert_true(pen(20479, 20480, 4096, 1.0) == -4095.0f / 4096.0f);
    assert_true(pen(20480, 20480, 4096, 1.0) == -1.0f);
    /* L = 10, B = 3: expected 7; len 8 -> (float)-1 / 3 = -0.333333343f (fp32, as torch computes it) */
    assert_true(pen(8, 10, 3, 1.0) == -1.0f / 3.0f);
    assert_true(pen(8, 10, 3, 1.0) == -0.333333343f);
    assert_true(pen(9, 10, 3, 1.0) == -2.0f / 3.0f);
    assert_true(pen(10, 10, 3, 1.0) == -1.0f);
    /* factor applied in fp32: (-1/3 in fp32) * (float)0.1 */
    volatile float third = -1.0f / 3.0f;
    assert_true(pen(8, 10, 3, 0.1) == third * 0.1f);
}

static void test_refused_configs(void **state) {
    (void)state;
    float p = 5.0f;
    char err[ERR_LEN] = "";
    assert_int_equal(overlong_penalty(10, 20, 0, 1.0, &p, err), ERR_INVAL);   /* B = 0 */
    assert_non_null(strstr(err, "overlong_buffer.len"));
    assert_true(p == 0.0f);
    assert_int_equal(overlong_penalty(10, 20, -4, 1.0, &p, err), ERR_INVAL);
    assert_int_equal(overlong_penalty(10, 20, 21, 1.0, &p, err), ERR_INVAL);  /* B > L */
    assert_non_null(strstr(err, "max_response_length"));
    assert_int_equal(overlong_penalty(10, 0, 0, 1.0, &p, err), ERR_INVAL);
    assert_int_equal(overlong_penalty(-1, 20, 4, 1.0, &p, err), ERR_INVAL);
    assert_int_equal(overlong_penalty(10, 20, 4, -1.0, &p, err), ERR_INVAL);
    assert_int_equal(overlong_penalty(10, 20, 4, NAN, &p, err), ERR_INVAL);
    assert_int_equal(overlong_penalty(10, 20, 4, INFINITY, &p, err), ERR_INVAL);
    assert_non_null(strstr(err, "penalty_factor"));
    assert_int_equal(overlong_penalty(10, 20, 4, 1.0, NULL, err), ERR_INVAL);
}

static void test_overlong_filter(void **state) {
    (void)state;
    assert_true(overlong_filter_masked(true, "length"));
    assert_false(overlong_filter_masked(true, "stop"));
    assert_false(overlong_filter_masked(true, "abort"));
    assert_false(overlong_filter_masked(true, NULL));
    assert_false(overlong_filter_masked(true, "Length"));
    assert_false(overlong_filter_masked(false, "length"));
    float m[5] = { 1, 1, 1, 0, 0 };
    assert_int_equal(overlong_filter_apply(false, "length", m, 5), 0);
    assert_true(m[0] == 1 && m[2] == 1);
    assert_int_equal(overlong_filter_apply(true, "stop", m, 5), 0);
    assert_true(m[0] == 1);
    assert_int_equal(overlong_filter_apply(true, "length", m, 5), 3);
    for (int i = 0; i < 5; i++) assert_true(m[i] == 0.0f);
    assert_int_equal(overlong_filter_apply(true, "length", NULL, 5), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundaries_small),
        cmocka_unit_test(test_boundaries_recipe_and_rounding),
        cmocka_unit_test(test_refused_configs),
        cmocka_unit_test(test_overlong_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
