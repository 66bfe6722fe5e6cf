/* tests/unit/test_dapo_kl.c: verl's KL estimators (common/dapo/kl.h) against verl 0.9.1's own kl_penalty on
 * tests/data/dapo/kl_cases.bin (make_dapo_fixtures.py): every name dapo accepts, values and torch autograd's gradient,
 * including x = 0, both sides of low_var_kl's +-20 clamp and its value clamp at 10; the names refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dapo/kl.h"
#include "dapo_fixture.h"

static void test_against_verl(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/kl_cases.bin", &fx), 0);
    const FxTensor *lp = fx_get(&fx, "logp", FX_F32), *rf = fx_get(&fx, "ref", FX_F32);
    const FxTensor *nn = fx_get(&fx, "n_names", FX_I32);
    assert_non_null(lp);
    assert_non_null(rf);
    assert_non_null(nn);
    int n_names = ((int32_t *)nn->data)[0];
    assert_int_equal(n_names, (int)(sizeof FX_KL_NAMES / sizeof FX_KL_NAMES[0]));
    for (int k = 0; k < n_names; k++) {
        char name[64], err[ERR_LEN];
        KlPenalty p;
        assert_int_equal(kl_penalty_parse(FX_KL_NAMES[k], &p, err), 0);
        snprintf(name, sizeof name, "k%d/value", k);
        const FxTensor *v = fx_get(&fx, name, FX_F32);
        snprintf(name, sizeof name, "k%d/grad", k);
        const FxTensor *g = fx_get(&fx, name, FX_F32);
        assert_non_null(v);
        assert_non_null(g);
        const float *x = lp->data, *r = rf->data, *wv = v->data, *wg = g->data;
        for (uint32_t i = 0; i < lp->n; i++) {
            float d, val = kl_penalty_eval(p, x[i], r[i], &d);
            if (fabsf(val - wv[i]) > 1e-6f + 1e-5f * fabsf(wv[i]) || fabsf(d - wg[i]) > 1e-6f + 1e-5f * fabsf(wg[i]))
                fail_msg("%s at %u (logp %.9g, ref %.9g): %.9g / %.9g vs verl %.9g / %.9g", FX_KL_NAMES[k], i, x[i],
                         r[i], val, d, wv[i], wg[i]);
        }
    }
    fx_free(&fx);
}

static void test_names(void **state) {
    (void)state;
    KlPenalty p;
    char err[ERR_LEN];
    assert_int_equal(kl_penalty_parse("k2+", &p, err), 0);
    assert_true(p.kind == KL_K2 && !p.straight_through);
    assert_int_equal(kl_penalty_parse("low_var_kl+", &p, err), 0);
    assert_true(p.kind == KL_K3 && p.straight_through);
    assert_int_equal(kl_penalty_parse("full", &p, err), ERR_INVAL);
    assert_non_null(strstr(err, "every vocabulary entry"));
    assert_int_equal(kl_penalty_parse("+", &p, err), ERR_INVAL);
    assert_int_equal(kl_penalty_parse("k3++", &p, err), ERR_INVAL);
    assert_int_equal(kl_penalty_parse(NULL, &p, err), ERR_INVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_verl),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
