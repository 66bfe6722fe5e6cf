/* tests/unit/test_seqpack.c: the learner's and dapo-sft's training path over a sequence set (model/seqpack.h).
 *   - seqpack_chunk_end: greedy chunks of at most max tokens, a longer sequence alone, empty ones ride along
 *     (hand-computed cases);
 *   - seqpack_for_chunks + seqpack_forward: every response token's log-prob and entropy, in response order, BITWISE
 *     equal to model_forward of that sequence alone with its own targets (the independent reference: no packing,
 *     no gather), whatever the chunking (activation slabs of 12, 24 and 64 tokens), with an empty sequence and a
 *     sequence whose response is empty skipped and a caller's order that is not the set's order;
 *   - seqpack_backward: the gradients of sum_j w_j logp_j (w per response token) bitwise equal to model_backward of
 *     each sequence alone with the same weights scattered by hand, added in the same order;
 *   - the callback's error stops the walk and is returned;
 *   - bad sets are refused before anything runs: a sequence longer than the slab (ERR_TOO_BIG), prompt length 0 of a
 *     non-empty sequence or longer than the sequence, an index outside the set (ERR_INVAL); model_backward without a
 *     matching model_forward (none, or after a forward of another batch) is refused (ERR_INVAL).
 * Model: tests/data/model/qwen2_gqa. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "model/model.h"
#include "model/seqpack.h"
#include "tests/model_slabs.h"
#include "tests/testutil.h"

static void test_chunk_end(void **state) {
    (void)state;
    const long len[6] = { 3, 4, 2, 9, 0, 1 };
    assert_int_equal(seqpack_chunk_end(len, 0, 6, 8), 2);    /* 3 + 4 = 7; + 2 > 8 */
    assert_int_equal(seqpack_chunk_end(len, 2, 6, 8), 3);    /* 2; + 9 > 8 */
    assert_int_equal(seqpack_chunk_end(len, 3, 6, 8), 4);    /* 9 > 8: alone */
    assert_int_equal(seqpack_chunk_end(len, 4, 6, 8), 6);    /* 0 + 1 */
    assert_int_equal(seqpack_chunk_end(len, 0, 6, 100), 6);
    assert_int_equal(seqpack_chunk_end(len, 5, 6, 1), 6);
}

enum { S = 6, MAXR = 64 };
/* lengths / prompt lengths: an empty sequence (3) and one whose response is empty (4) */
static const uint32_t LEN[S] = { 10, 7, 12, 0, 5, 9 }, PL[S] = { 4, 3, 2, 0, 5, 1 };
static const int ORDER[S] = { 5, 0, 3, 2, 4, 1 };          /* the caller's order */

typedef struct {
    int32_t  ids[64];
    uint32_t off[S + 1];
    long     rs[S + 1];          /* response start of each sequence in response order */
    SeqSet   set;
} Set;

static void make_set(Set *t, int vocab) {
    uint32_t x = 7;
    t->off[0] = 0;
    t->rs[0] = 0;
    for (int i = 0; i < S; i++) {
        t->off[i + 1] = t->off[i] + LEN[i];
        t->rs[i + 1] = t->rs[i] + (LEN[i] - PL[i]);
    }
    for (uint32_t i = 0; i < t->off[S]; i++) { x = x * 1664525u + 1013904223u; t->ids[i] = (int32_t)((x >> 8) % (uint32_t)vocab); }
    t->set = (SeqSet){ .input_ids = t->ids, .offsets = t->off, .prompt_lengths = PL, .n_seqs = S };
}

static Model *load(int max_tokens) {
    char p[512], err[ERR_LEN];
    snprintf(p, sizeof p, "%s/tests/data/model/qwen2_gqa", tu_root());
    ModelOptions o = { .max_tokens = max_tokens, .train = 1 };
    Model *m = model_load(p, &o, err);
    if (!m) fail_msg("%s", err);
    return m;
}

static float weight_of(long r) { return (float)((r % 7) - 3) * 0.05f; }   /* d loss / d logp of response token r */

typedef struct {
    const Set *t;
    float      logp[MAXR], ent[MAXR];
    int        chunks_seen, fail_at;
    int        backward;
} Walk;

static int on_chunk(SeqPack *p, SeqChunk *c, void *ud, char err[ERR_LEN]) {
    Walk *w = ud;
    if (w->fail_at >= 0 && w->chunks_seen == w->fail_at) return err_set(err, ERR_INVAL, "stop here");
    w->chunks_seen++;
    int rc = seqpack_forward(p, c, 1, err);
    if (rc) return rc;
    for (int k = 0; k < c->n; k++)
        for (int j = c->r_off[k]; j < c->r_off[k + 1]; j++) {
            long r = w->t->rs[c->seq[k]] + (j - c->r_off[k]);
            w->logp[r] = c->logp[j];
            w->ent[r] = c->ent[j];
            c->dlogp[j] = weight_of(r);
        }
    return w->backward ? seqpack_backward(p, c, c->dlogp, NULL, err) : 0;
}

/* the reference: each sequence alone, in ORDER, targets and d logp written by hand */
static void reference(Model *m, const Set *t, float *logp, float *ent, int backward) {
    char err[ERR_LEN];
    for (int q = 0; q < S; q++) {
        int i = ORDER[q], len = (int)LEN[i], pl = (int)PL[i];
        if (len == 0) continue;
        int32_t tgt[64], cu[2] = { 0, len };
        float lp[64], en[64], d[64];
        for (int p = 0; p < len; p++) {
            tgt[p] = p + 1 < len && p + 1 >= pl ? t->ids[t->off[i] + p + 1] : -1;
            d[p] = tgt[p] >= 0 ? weight_of(t->rs[i] + (p + 1 - pl)) : 0.0f;
        }
        ModelBatch b = { .n_tokens = len, .n_seqs = 1, .tokens = t->ids + t->off[i], .targets = tgt, .cu_seqlens = cu,
                         .temperature = 0.7f };
        assert_int_equal(model_forward(m, &b, lp, en, err), 0);
        for (int p = pl - 1; p + 1 < len; p++) {
            logp[t->rs[i] + (p + 1 - pl)] = lp[p];
            ent[t->rs[i] + (p + 1 - pl)] = en[p];
        }
        if (backward) assert_int_equal(model_backward(m, &b, d, NULL, err), 0);
    }
}

static void test_forward_backward_bitwise(void **state) {
    (void)state;
    char err[ERR_LEN];
    Model *ref = load(64);
    Set t;
    make_set(&t, model_config(ref)->vocab);
    long R = t.rs[S];
    float rl[MAXR], re[MAXR];
    model_grads_zero(ref);
    reference(ref, &t, rl, re, 1);
    const int slabs[3] = { 12, 24, 64 }, want_chunks[3] = { 4, 2, 1 };
    for (int k = 0; k < 3; k++) {
        Model *m = load(slabs[k]);
        SeqPack *p = seqpack_new(m);
        Walk w = { .t = &t, .fail_at = -1, .backward = 1 };
        int chunks = 0;
        model_grads_zero(m);
        assert_int_equal(seqpack_for_chunks(p, &t.set, ORDER, S, 0.7f, on_chunk, &w, &chunks, err), 0);
        assert_int_equal(chunks, w.chunks_seen);
        assert_int_equal(chunks, want_chunks[k]);
        assert_memory_equal(w.logp, rl, (size_t)R * sizeof(float));
        assert_memory_equal(w.ent, re, (size_t)R * sizeof(float));
        assert_memory_equal(tu_grads(m), tu_grads(ref), model_bytes_params(m));
        double g = model_grad_norm(m);
        assert_true(g > 0 && isfinite(g));
        seqpack_free(p);
        model_free(m);
    }
    model_free(ref);
}

static void test_callback_error_stops(void **state) {
    (void)state;
    char err[ERR_LEN];
    Model *m = load(12);
    Set t;
    make_set(&t, model_config(m)->vocab);
    SeqPack *p = seqpack_new(m);
    Walk w = { .t = &t, .fail_at = 2 };
    int chunks = 0;
    assert_int_equal(seqpack_for_chunks(p, &t.set, ORDER, S, 1.0f, on_chunk, &w, &chunks, err), ERR_INVAL);
    assert_string_equal(err, "stop here");
    assert_int_equal(chunks, 2);
    seqpack_free(p);
    seqpack_free(NULL);
    model_free(m);
}

static int never(SeqPack *p, SeqChunk *c, void *ud, char err[ERR_LEN]) {
    (void)p; (void)c; (void)err;
    (*(int *)ud)++;
    return 0;
}

static void test_bad_sets_refused(void **state) {
    (void)state;
    char err[ERR_LEN];
    Model *m = load(12);
    Set t;
    make_set(&t, model_config(m)->vocab);
    SeqPack *p = seqpack_new(m);
    int ran = 0, idx2 = 2, idx_bad = S;
    assert_int_equal(seqpack_for_chunks(p, &t.set, &idx2, 1, 1.0f, never, &ran, NULL, err), 0);   /* 12 tokens fit */
    assert_int_equal(ran, 1);
    uint32_t pl[S];
    memcpy(pl, PL, sizeof pl);
    t.set.prompt_lengths = pl;
    pl[0] = 0;
    int idx0 = 0;
    assert_int_equal(seqpack_for_chunks(p, &t.set, &idx0, 1, 1.0f, never, &ran, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "prompt length 0"));
    pl[0] = 11;                                                          /* of 10 tokens */
    assert_int_equal(seqpack_for_chunks(p, &t.set, ORDER, S, 1.0f, never, &ran, NULL, err), ERR_INVAL);
    assert_non_null(strstr(err, "prompt length 11 of 10"));
    assert_int_equal(seqpack_for_chunks(p, &t.set, &idx_bad, 1, 1.0f, never, &ran, NULL, err), ERR_INVAL);
    seqpack_free(p);
    model_free(m);
    m = load(8);                                                          /* sequence 2 (12 tokens) does not fit */
    p = seqpack_new(m);
    t.set.prompt_lengths = PL;
    assert_int_equal(seqpack_for_chunks(p, &t.set, &idx2, 1, 1.0f, never, &ran, NULL, err), ERR_TOO_BIG);
    assert_int_equal(ran, 1);                                             /* nothing ran */
    /* model_backward needs the forward of its batch */
    int32_t tok[4] = { 1, 2, 3, 4 }, cu[3] = { 0, 2, 4 }, cu1[2] = { 0, 4 };
    float d[4] = { 0 }, lp[4];
    ModelBatch b = { .n_tokens = 4, .n_seqs = 2, .tokens = tok, .cu_seqlens = cu, .temperature = 1.0f };
    ModelBatch b1 = { .n_tokens = 4, .n_seqs = 1, .tokens = tok, .cu_seqlens = cu1, .temperature = 1.0f };
    assert_int_equal(model_backward(m, &b, d, NULL, err), ERR_INVAL);
    assert_int_equal(model_forward(m, &b1, lp, NULL, err), 0);
    assert_int_equal(model_backward(m, &b, d, NULL, err), ERR_INVAL);   /* the forward was of another batch */
    assert_int_equal(model_forward(m, &b, lp, NULL, err), 0);
    assert_int_equal(model_backward(m, &b, d, NULL, err), 0);
    seqpack_free(p);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_end),
        cmocka_unit_test(test_forward_backward_bitwise),
        cmocka_unit_test(test_callback_error_stops),
        cmocka_unit_test(test_bad_sets_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
