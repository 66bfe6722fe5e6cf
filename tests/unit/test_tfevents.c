/* tests/unit/test_tfevents.c: io/tfevents.h — CRC-32C against the published check values (RFC 3720 B.4, "123456789"
 * -> 0xE3069283), and an event file read back record by record: the length and data CRCs recomputed by hand with the
 * mask, the file_version record first, then one Event per step whose simple_value scalars equal the metrics (0.0
 * kept, NaN left out, float rounding only). The tensorboard package's own reader is tests/reference/check_tfevents.py. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/fsutil.h"
#include "io/tfevents.h"
#include "tensorboard.pb-c.h"

static void test_crc32c_vectors(void **state) {
    (void)state;
    assert_int_equal(crc32c("123456789", 9), 0xE3069283u);
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xFF, sizeof ones);
    assert_int_equal(crc32c(zeros, 32), 0x8A9136AAu);          /* RFC 3720 B.4: 32 bytes of zeros */
    assert_int_equal(crc32c(ones, 32), 0x62A8AB43u);           /* 32 bytes of 0xFF */
    uint32_t c = crc32c("123456789", 9);
    assert_int_equal(crc32c_masked("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

static uint64_t get_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void test_file_roundtrip(void **state) {
    (void)state;
    char dir[] = "/tmp/dapo-tfevents-XXXXXX", err[ERR_LEN];
    assert_non_null(mkdtemp(dir));
    char sub[600];
    snprintf(sub, sizeof sub, "%s/proj/exp", dir);                   /* created with its parents */
    TfEvents *w = tfevents_open(sub, err);
    assert_non_null(w);
    Metrics m = {0};
    metrics_set(&m, "actor/pg_loss", -0.125);
    metrics_set(&m, "critic/score/mean", 0.0);
    metrics_set(&m, "actor/entropy", NAN);
    metrics_set(&m, "timing_s/step", 1.0 / 3.0);
    assert_int_equal(tfevents_write_scalars(w, 1, 1700000000.5, &m), 0);
    metrics_set(&m, "actor/pg_loss", 2.5);
    assert_int_equal(tfevents_write_scalars(w, 2, 1700000001.5, &m), 0);
    size_t len = 0;
    char *buf = fs_read_all(tfevents_path(w), 1 << 20, &len, err);
    assert_non_null(buf);
    assert_non_null(strstr(tfevents_path(w), "/events.out.tfevents."));
    tfevents_close(w);
    const uint8_t *p = (const uint8_t *)buf, *end = p + len;
    int rec = 0;
    while (p < end) {
        assert_true(end - p >= 16);
        uint64_t n = get_le(p, 8);
        assert_int_equal(get_le(p + 8, 4), crc32c_masked(p, 8));
        assert_true((uint64_t)(end - p) >= 16 + n);
        assert_int_equal(get_le(p + 12 + n, 4), crc32c_masked(p + 12, n));
        Tensorboard__Event *ev = tensorboard__event__unpack(NULL, n, p + 12);
        assert_non_null(ev);
        if (rec == 0) {
            assert_int_equal(ev->what_case, TENSORBOARD__EVENT__WHAT_FILE_VERSION);
            assert_string_equal(ev->file_version, "brain.Event:2");
        } else {
            assert_int_equal(ev->step, rec);
            assert_true(ev->wall_time == 1700000000.5 + (rec - 1));
            assert_int_equal(ev->what_case, TENSORBOARD__EVENT__WHAT_SUMMARY);
            assert_int_equal(ev->summary->n_value, 3);                      /* NaN left out */
            const char *tags[] = {"actor/pg_loss", "critic/score/mean", "timing_s/step"};
            const float vals[] = {rec == 1 ? -0.125f : 2.5f, 0.0f, (float)(1.0 / 3.0)};
            for (int i = 0; i < 3; i++) {
                Tensorboard__SummaryValue *v = ev->summary->value[i];
                assert_string_equal(v->tag, tags[i]);
                assert_int_equal(v->value_case, TENSORBOARD__SUMMARY_VALUE__VALUE_SIMPLE_VALUE);  /* 0.0 present */
                assert_true(v->simple_value == vals[i]);
            }
        }
        tensorboard__event__free_unpacked(ev, NULL);
        p += 16 + n;
        rec++;
    }
    assert_int_equal(rec, 3);
    xfree(buf);
    metrics_free(&m);
    /* A directory that cannot be made is an error naming it. */
    assert_null(tfevents_open("/proc/no/such/dir", err));
    assert_non_null(strstr(err, "/proc/no"));
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_file_roundtrip),
    };
    return cmocka_run_group_tests_name("tfevents", tests, NULL, NULL);
}
