/* tests/unit/test_rng.c: the counter-based RNG (common/core/rng.h): Philox4x32-10 and -7 against the
 * Random123 known-answer vectors (tests/kat_vectors of Random123), the (seed, group, sample, position)
 * mapping, the [0, 1) conversions at their extremes, and uniformity / independence of the keyed draws. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "core/rng.h"

static void test_known_answers(void **state) {
    (void)state;
    static const struct { int rounds; uint32_t ctr[4], key[2], out[4]; } kat[] = {
        { 10, { 0, 0, 0, 0 }, { 0, 0 }, { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 } },
        { 10, { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff }, { 0xffffffff, 0xffffffff },
              { 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd } },
        { 10, { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 }, { 0xa4093822, 0x299f31d0 },
              { 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 } },
        { 7, { 0, 0, 0, 0 }, { 0, 0 }, { 0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48 } },
        { 7, { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff }, { 0xffffffff, 0xffffffff },
             { 0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662 } },
        { 7, { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 }, { 0xa4093822, 0x299f31d0 },
             { 0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a } },
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        rng_philox4x32(kat[i].ctr, kat[i].key, kat[i].rounds, out);
        for (int j = 0; j < 4; j++) assert_int_equal(out[j], kat[i].out[j]);
    }
}

static void test_mapping(void **state) {
    (void)state;
    const uint64_t seed = 0x0123456789abcdefULL, group = 0xfedcba9876543210ULL;
    uint32_t w[4], ref[4];
    rng_words(seed, group, 7, 42, w);
    const uint32_t ctr[4] = { 42, 7, 0x76543210u, 0xfedcba98u }, key[2] = { 0x89abcdefu, 0x01234567u };
    rng_philox4x32(ctr, key, RNG_PHILOX_ROUNDS, ref);
    assert_memory_equal(w, ref, sizeof w);
    assert_true(rng_uniform(seed, group, 7, 42) == rng_u32x2_to_double(ref[0], ref[1]));
    float u4[4];
    rng_uniform4f(seed, group, 7, 42, u4);
    for (int j = 0; j < 4; j++) assert_true(u4[j] == rng_u32_to_float(ref[j]));
    /* pure function of its inputs: same answer twice, different answer when any input changes */
    double u = rng_uniform(seed, group, 7, 42);
    assert_true(u == rng_uniform(seed, group, 7, 42));
    assert_true(u != rng_uniform(seed + 1, group, 7, 42));
    assert_true(u != rng_uniform(seed, group + 1, 7, 42));
    assert_true(u != rng_uniform(seed, group ^ (1ULL << 40), 7, 42));
    assert_true(u != rng_uniform(seed, group, 8, 42));
    assert_true(u != rng_uniform(seed, group, 7, 43));
}

static void test_conversions(void **state) {
    (void)state;
    assert_true(rng_u32_to_float(0) == 0.0f);
    assert_true(rng_u32_to_float(0xffffffffu) < 1.0f);
    assert_true(rng_u32_to_float(0xffffffffu) == 1.0f - 0x1p-24f);
    assert_true(rng_u32x2_to_double(0, 0) == 0.0);
    assert_true(rng_u32x2_to_double(0xffffffffu, 0xffffffffu) < 1.0);
    assert_true(rng_u32x2_to_double(0xffffffffu, 0xffffffffu) == 1.0 - 0x1p-53);
    assert_true(rng_u32x2_to_double(0x80000000u, 0) == 0.5);
}

/* 200k draws over positions: 20-bin chi-square (df 19: p = 1e-4 at 50.4), mean, lag-1 correlation, and the
 * correlation between neighbouring sample indices at the same position. Deterministic (fixed seed). */
static void test_uniformity(void **state) {
    (void)state;
    enum { N = 200000, BINS = 20 };
    long cnt[BINS] = { 0 };
    double sum = 0, prev = 0, lag = 0, cross = 0;
    for (uint32_t i = 0; i < N; i++) {
        double u = rng_uniform(2024, 3, 0, i), v = rng_uniform(2024, 3, 1, i);
        assert_true(u >= 0.0 && u < 1.0);
        cnt[(int)(u * BINS)]++;
        sum += u;
        if (i) lag += (u - 0.5) * (prev - 0.5);
        cross += (u - 0.5) * (v - 0.5);
        prev = u;
    }
    double chi = 0, e = (double)N / BINS;
    for (int b = 0; b < BINS; b++) chi += (cnt[b] - e) * (cnt[b] - e) / e;
    assert_true(chi < 50.4);
    assert_true(fabs(sum / N - 0.5) < 0.003);          /* sd of the mean: 0.29 / sqrt(2e5) = 6.5e-4 */
    assert_true(fabs(lag / N * 12.0) < 0.012);          /* correlation, sd 1 / sqrt(N) = 2.2e-3 */
    assert_true(fabs(cross / N * 12.0) < 0.012);
    /* the float lanes too */
    long fc[BINS] = { 0 };
    for (uint32_t i = 0; i < N / 4; i++) {
        float u4[4];
        rng_uniform4f(99, 0, 5, i, u4);
        for (int j = 0; j < 4; j++) { assert_true(u4[j] >= 0.0f && u4[j] < 1.0f); fc[(int)(u4[j] * BINS)]++; }
    }
    chi = 0;
    for (int b = 0; b < BINS; b++) chi += (fc[b] - e) * (fc[b] - e) / e;
    assert_true(chi < 50.4);
}

/* rng_permutation: a permutation, the same for the same key, another for another tag, and exactly Fisher-Yates with
 * the documented draws (recomputed here by hand for n = 5). */
static void test_permutation(void **state) {
    (void)state;
    int p[100], q[100], seen[100] = { 0 };
    rng_permutation(p, 100, 7, 3, 0x5eed);
    for (int i = 0; i < 100; i++) seen[p[i]]++;
    for (int i = 0; i < 100; i++) assert_int_equal(seen[i], 1);
    rng_permutation(q, 100, 7, 3, 0x5eed);
    assert_memory_equal(p, q, sizeof p);
    rng_permutation(q, 100, 7, 3, 0x5f7);
    assert_true(memcmp(p, q, sizeof p) != 0);
    int r[5] = { 0, 1, 2, 3, 4 };
    for (int k = 5; k > 1; k--) {
        int j = (int)(rng_uniform(11, 2, 9, (uint32_t)k) * k);
        int t = r[k - 1]; r[k - 1] = r[j]; r[j] = t;
    }
    rng_permutation(q, 5, 11, 2, 9);
    assert_memory_equal(q, r, sizeof r);
    rng_permutation(q, 1, 11, 2, 9);
    assert_int_equal(q[0], 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_permutation),
        cmocka_unit_test(test_mapping),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_uniformity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
