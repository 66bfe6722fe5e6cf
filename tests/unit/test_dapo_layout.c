/* tests/unit/test_dapo_layout.c: mini-batch cut, equal-count token-balanced sharding across ranks, global
 * token / sequence counts per shard, micro-batch splits (fixed and dynamic with a token cap)
 * (common/dapo/layout.h): hand-traced greedy assignments plus coverage properties on random batches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "dapo/layout.h"

static void test_shard_hand_traced(void **state) {
    (void)state;
    /* 4 groups x 4 responses; mini-batch = 2 groups (8 sequences); 2 ranks -> 4 sequences each.
     * Mini 0 tokens 10..80: largest first into the lighter rank with room (ties: rank 0):
     *   80->r0, 70->r1, 60->r1, 50->r0, 40->r0 (tie 130/130), 30->r1, 20->r1 (160 < 170), 10->r0 (r1 full)
     *   r0 = {80, 50, 40, 10} = 180, r1 = {70, 60, 30, 20} = 180. */
    int sizes[4] = { 4, 4, 4, 4 };
    int tok[16] = { 10, 20, 30, 40, 50, 60, 70, 80,   5, 5, 5, 5, 100, 1, 1, 1 };
    Layout l;
    char err[ERR_LEN];
    assert_int_equal(layout_build(sizes, 4, tok, NULL, 2, 2, &l, err), 0);
    assert_int_equal(l.n_mini, 2);
    assert_int_equal(l.world, 2);
    const LayoutShard *a = &l.shard[0], *b = &l.shard[1];
    assert_int_equal(a->n_seq, 4);
    assert_int_equal(b->n_seq, 4);
    int want_a[4] = { 0, 3, 4, 7 }, want_b[4] = { 1, 2, 5, 6 };   /* ascending indices */
    assert_memory_equal(a->seq, want_a, sizeof want_a);
    assert_memory_equal(b->seq, want_b, sizeof want_b);
    assert_true(a->tokens == 180 && b->tokens == 180);
    assert_true(a->global_tokens == 360 && b->global_tokens == 360);
    assert_true(a->global_seqs == 8 && a->mini == 0 && b->rank == 1);
    /* mini 1: 100 -> r0, then 5,5,5,5,1,1,1: r1 gets 5,5,5,5 (r0 heavier), r0 gets 1,1,1 */
    const LayoutShard *c = &l.shard[2], *d = &l.shard[3];
    assert_true(c->mini == 1 && c->rank == 0 && d->rank == 1);
    assert_true(c->tokens == 103 && d->tokens == 20 && c->global_tokens == 123 && d->global_seqs == 8);
    int want_c[4] = { 12, 13, 14, 15 };
    assert_memory_equal(c->seq, want_c, sizeof want_c);
    layout_free(&l);
    layout_free(&l);   /* zeroed: a second free is harmless */
}

static void test_cost_vs_loss_tokens(void **state) {
    (void)state;
    /* balance by cost (prompt + response), count loss tokens separately */
    int sizes[1] = { 4 }, resp[4] = { 1, 2, 3, 4 }, cost[4] = { 100, 1, 1, 100 };
    Layout l;
    char err[ERR_LEN];
    assert_int_equal(layout_build(sizes, 1, resp, cost, 1, 2, &l, err), 0);
    /* cost order: 100 (seq 0), 100 (seq 3), 1 (seq 1), 1 (seq 2) -> r0 {0, 1}, r1 {3, 2} */
    int w0[2] = { 0, 1 }, w1[2] = { 2, 3 };
    assert_memory_equal(l.shard[0].seq, w0, sizeof w0);
    assert_memory_equal(l.shard[1].seq, w1, sizeof w1);
    assert_true(l.shard[0].cost == 101 && l.shard[1].cost == 101);
    assert_true(l.shard[0].tokens == 3 && l.shard[1].tokens == 7 && l.shard[0].global_tokens == 10);
    layout_free(&l);
}

static void test_uneven_and_errors(void **state) {
    (void)state;
    int sizes[5] = { 4, 4, 4, 4, 4 }, tok[20];
    for (int i = 0; i < 20; i++) tok[i] = i + 1;
    Layout l;
    char err[ERR_LEN];
    /* 5 groups, mini-batches of 2: the last holds one group (4 sequences, 2 per rank) */
    assert_int_equal(layout_build(sizes, 5, tok, NULL, 2, 2, &l, err), 0);
    assert_int_equal(l.n_mini, 3);
    assert_int_equal(l.shard[4].n_seq, 2);
    assert_int_equal(l.shard[5].global_seqs, 4);
    assert_true(l.shard[4].global_tokens == 17 + 18 + 19 + 20);
    layout_free(&l);
    /* world 1: everything in order */
    assert_int_equal(layout_build(sizes, 5, tok, NULL, 5, 1, &l, err), 0);
    assert_int_equal(l.n_mini, 1);
    for (int i = 0; i < 20; i++) assert_int_equal(l.shard[0].seq[i], i);
    layout_free(&l);
    /* 8 sequences per mini-batch over 3 ranks: refused, message names the numbers */
    assert_int_equal(layout_build(sizes, 5, tok, NULL, 2, 3, &l, err), ERR_INVAL);
    assert_non_null(strstr(err, "8 sequences"));
    assert_non_null(strstr(err, "3 learner"));
    assert_null(l.shard);
    int bad[2] = { 4, 0 };
    assert_int_equal(layout_build(bad, 2, tok, NULL, 1, 1, &l, err), ERR_INVAL);
    tok[3] = -1;
    assert_int_equal(layout_build(sizes, 5, tok, NULL, 1, 1, &l, err), ERR_INVAL);
    assert_int_equal(layout_build(sizes, 5, tok, NULL, 0, 1, &l, err), ERR_INVAL);
    assert_int_equal(layout_build(sizes, 5, tok, NULL, 1, 0, &l, err), ERR_INVAL);
    assert_int_equal(layout_build(sizes, 5, tok, NULL, 1, 1, NULL, err), ERR_INVAL);
    assert_int_equal(layout_build(NULL, 0, NULL, NULL, 1, 1, &l, err), 0);   /* empty batch */
    assert_int_equal(l.n_mini, 0);
    layout_free(&l);
}

/* Random batches: every sequence lands in exactly one shard, counts equal, totals consistent, and the
 * token imbalance between ranks stays below the largest sequence. */
static void test_random_properties(void **state) {
    (void)state;
    srand(12345);
    for (int trial = 0; trial < 200; trial++) {
        int world = 1 + rand() % 4, n = world * (1 + rand() % 3), G = 1 + rand() % 12, mini = 1 + rand() % 4;
        int sizes[16], tok[16 * 12], seen[16 * 12];
        for (int g = 0; g < G; g++) sizes[g] = n;
        int N = G * n, mx = 0;
        for (int i = 0; i < N; i++) { tok[i] = rand() % 500; if (tok[i] > mx) mx = tok[i]; seen[i] = 0; }
        Layout l;
        char err[ERR_LEN];
        assert_int_equal(layout_build(sizes, G, tok, NULL, mini, world, &l, err), 0);
        assert_int_equal(l.n_mini, (G + mini - 1) / mini);
        for (int m = 0; m < l.n_mini; m++) {
            long long sum = 0, lo = -1, hi = -1;
            for (int r = 0; r < world; r++) {
                const LayoutShard *s = &l.shard[m * world + r];
                assert_int_equal(s->n_seq * world, s->global_seqs);
                long long t = 0;
                for (int i = 0; i < s->n_seq; i++) {
                    seen[s->seq[i]]++;
                    t += tok[s->seq[i]];
                    if (i) assert_true(s->seq[i] > s->seq[i - 1]);
                }
                assert_true(t == s->tokens);
                sum += t;
                if (lo < 0 || t < lo) lo = t;
                if (t > hi) hi = t;
            }
            assert_true(sum == l.shard[m * world].global_tokens);
            assert_true(hi - lo <= mx);
        }
        for (int i = 0; i < N; i++) assert_int_equal(seen[i], 1);
        layout_free(&l);
    }
}

static void test_micro_fixed(void **state) {
    (void)state;
    LayoutMicro mb;
    char err[ERR_LEN];
    assert_int_equal(layout_micro_fixed(10, 4, &mb, err), 0);
    assert_int_equal(mb.n_micro, 3);
    int off[4] = { 0, 4, 8, 10 };
    assert_memory_equal(mb.off, off, sizeof off);
    for (int i = 0; i < 10; i++) assert_int_equal(mb.idx[i], i);
    layout_micro_free(&mb);
    assert_int_equal(layout_micro_fixed(0, 4, &mb, err), 0);
    assert_int_equal(mb.n_micro, 0);
    layout_micro_free(&mb);
    assert_int_equal(layout_micro_fixed(3, 0, &mb, err), ERR_INVAL);
}

static void test_micro_dynamic(void **state) {
    (void)state;
    LayoutMicro mb;
    char err[ERR_LEN];
    /* total 33, cap 10 -> k = 4: 9->b0, 8->b1, 7->b2, 5->b3, 3->b3, 1->b2; ordered by first sequence:
     * {0, 2}, {1}, {3, 4}, {5} */
    int tok[6] = { 5, 9, 3, 7, 1, 8 };
    assert_int_equal(layout_micro_dynamic(tok, 6, 10, &mb, err), 0);
    assert_int_equal(mb.n_micro, 4);
    int off[5] = { 0, 2, 3, 5, 6 }, idx[6] = { 0, 2, 1, 3, 4, 5 };
    assert_memory_equal(mb.off, off, sizeof off);
    assert_memory_equal(mb.idx, idx, sizeof idx);
    layout_micro_free(&mb);
    /* ceil(30 / 10) = 3 bins cannot hold {7, 7, 6, 5, 5} under 10: one more micro-batch */
    int tok2[5] = { 7, 7, 6, 5, 5 };
    assert_int_equal(layout_micro_dynamic(tok2, 5, 10, &mb, err), 0);
    assert_int_equal(mb.n_micro, 4);
    for (int j = 0; j < mb.n_micro; j++) {
        int s = 0;
        for (int i = mb.off[j]; i < mb.off[j + 1]; i++) s += tok2[mb.idx[i]];
        assert_true(s <= 10);
    }
    layout_micro_free(&mb);
    /* every sequence just over half the cap: one per micro-batch (the search runs past its linear steps) */
    int tok5[300];
    for (int i = 0; i < 300; i++) tok5[i] = 51 + i % 7;
    assert_int_equal(layout_micro_dynamic(tok5, 300, 100, &mb, err), 0);
    assert_int_equal(mb.n_micro, 300);
    layout_micro_free(&mb);
    /* a sequence longer than the cap is refused, naming the knob */
    int tok3[2] = { 3, 11 };
    assert_int_equal(layout_micro_dynamic(tok3, 2, 10, &mb, err), ERR_INVAL);
    assert_non_null(strstr(err, "ppo_max_token_len_per_gpu"));
    assert_int_equal(layout_micro_dynamic(tok3, 2, 0, &mb, err), ERR_INVAL);
    /* zero-length sequences and an empty list */
    int tok4[3] = { 0, 0, 0 };
    assert_int_equal(layout_micro_dynamic(tok4, 3, 10, &mb, err), 0);
    assert_int_equal(mb.n_micro, 1);
    assert_int_equal(mb.off[1], 3);
    layout_micro_free(&mb);
    assert_int_equal(layout_micro_dynamic(NULL, 0, 10, &mb, err), 0);
    assert_int_equal(mb.n_micro, 0);
    layout_micro_free(&mb);
    /* random: cap respected, each sequence once, no more micro-batches than sequences */
    srand(7);
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + rand() % 40, cap = 50 + rand() % 200, t[40], seen[40] = { 0 };
        for (int i = 0; i < n; i++) t[i] = rand() % (cap + 1);
        assert_int_equal(layout_micro_dynamic(t, n, cap, &mb, err), 0);
        assert_true(mb.n_micro >= 1 && mb.n_micro <= n && mb.off[mb.n_micro] == n);
        for (int j = 0; j < mb.n_micro; j++) {
            int s = 0;
            for (int i = mb.off[j]; i < mb.off[j + 1]; i++) { s += t[mb.idx[i]]; seen[mb.idx[i]]++; }
            assert_true(s <= cap);
        }
        for (int i = 0; i < n; i++) assert_int_equal(seen[i], 1);
        layout_micro_free(&mb);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_hand_traced),
        cmocka_unit_test(test_cost_vs_loss_tokens),
        cmocka_unit_test(test_uneven_and_errors),
        cmocka_unit_test(test_random_properties),
        cmocka_unit_test(test_micro_fixed),
        cmocka_unit_test(test_micro_dynamic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
