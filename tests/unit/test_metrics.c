/* tests/unit/test_metrics.c: metric sets and the JSONL writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/metrics.h"

static void test_set_get_write(void **state) {
    (void)state;
    Metrics ms = {0};
    metrics_set(&ms, "actor/pg_loss", 0.25);
    metrics_set(&ms, "critic/score/mean", -0.5);
    metrics_set(&ms, "actor/pg_loss", 0.125);          /* replaces, keeps order */
    metrics_set(&ms, "actor/grad_norm", NAN);
    for (int i = 0; i < 100; i++) {                     /* growth */
        char name[32];
        snprintf(name, sizeof name, "m/%d", i);
        metrics_set(&ms, name, i);
    }
    assert_int_equal(ms.n, 103);
    assert_true(metrics_get(&ms, "actor/pg_loss", 0) == 0.125);
    assert_true(metrics_get(&ms, "nope", 7) == 7);
    char buf[8192];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    assert_int_equal(metrics_write_jsonl(f, 3, &ms), 0);
    fclose(f);
    assert_non_null(strstr(buf, "{\"step\":3,\"actor/pg_loss\":0.125,\"critic/score/mean\":-0.5,\"actor/grad_norm\":null,"));
    assert_non_null(strstr(buf, "\"m/99\":99.0}\n"));
    metrics_free(&ms);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_set_get_write)};
    return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
