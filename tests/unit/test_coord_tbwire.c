/* tests/unit/test_coord_tbwire.c: the coordinator's hand-written TrainBatch encoder (services/coordinator/tbwire.h)
 * against protobuf-c itself: for hand-picked edge cases and random shards, tbwire_size equals
 * protobuf_c_message_get_packed_size and tbwire_write's bytes equal protobuf_c_message_pack's of the same
 * Dapo__TrainBatch built the way send_batch used to (prompt ++ response ids, running offsets, per-token mask /
 * advantage, log-probs padded with 0), and protobuf-c unpacks them back to those arrays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "dapo.pb-c.h"
#include "services/coordinator/tbwire.h"

/* The reference: the repeated-field arrays of the equivalent message, packed by protobuf-c. */
typedef struct {
    Dapo__TrainBatch tb;
    int32_t *ids;
    uint32_t *offs, *plen;
    uint64_t *gids;
    int64_t *bver, *tver;
    float *mask, *adv, *lps, *scores;
} Ref;

static void ref_build(Ref *r, const TbwHead *h, const TbwSeq *seq, int n) {
    size_t ntok = 0, nresp = 0;
    for (int i = 0; i < n; i++) { ntok += seq[i].n_prompt + (size_t)seq[i].n_resp; nresp += seq[i].n_resp; }
    r->ids = malloc((ntok + 1) * sizeof *r->ids);
    r->offs = malloc(((size_t)n + 1) * sizeof *r->offs);
    r->plen = malloc(((size_t)n + 1) * sizeof *r->plen);
    r->gids = malloc(((size_t)n + 1) * sizeof *r->gids);
    r->bver = malloc(((size_t)n + 1) * sizeof *r->bver);
    r->tver = malloc((nresp + 1) * sizeof *r->tver);
    int has_tver = 0;
    for (int i = 0; i < n; i++) has_tver |= seq[i].n_token_versions > 0;
    r->mask = malloc((nresp + 1) * sizeof(float));
    r->adv = malloc((nresp + 1) * sizeof(float));
    r->lps = malloc((nresp + 1) * sizeof(float));
    r->scores = malloc(((size_t)n + 1) * sizeof(float));
    size_t t = 0, rt = 0;
    for (int i = 0; i < n; i++) {
        r->offs[i] = (uint32_t)t;
        r->plen[i] = seq[i].n_prompt;
        r->gids[i] = seq[i].group_id;
        r->bver[i] = seq[i].behaviour_version;
        r->scores[i] = seq[i].score;
        for (uint32_t k = 0; k < seq[i].n_prompt; k++) r->ids[t++] = seq[i].prompt[k];
        for (uint32_t k = 0; k < seq[i].n_resp; k++, rt++) {
            r->ids[t++] = seq[i].resp[k];
            r->mask[rt] = k < seq[i].mask_prefix ? 0.0f : seq[i].mask;
            r->adv[rt] = seq[i].adv;
            r->lps[rt] = k < seq[i].n_logprobs ? seq[i].logprobs[k] : 0.0f;
            r->tver[rt] = seq[i].n_token_versions ? seq[i].token_versions[k] : seq[i].behaviour_version;
        }
    }
    r->offs[n] = (uint32_t)t;
    Dapo__TrainBatch tb = DAPO__TRAIN_BATCH__INIT;
    tb.run_id = (char *)(h->run_id ? h->run_id : "");
    tb.step = h->step;
    tb.policy_version = h->policy_version;
    tb.mini_batch_index = h->mini_batch_index;
    tb.num_mini_batches = h->num_mini_batches;
    tb.ppo_epoch = h->ppo_epoch;
    tb.input_ids = r->ids; tb.n_input_ids = t;
    tb.offsets = r->offs; tb.n_offsets = (size_t)n + 1;
    tb.prompt_lengths = r->plen; tb.n_prompt_lengths = (size_t)n;
    tb.response_mask = r->mask; tb.n_response_mask = rt;
    tb.advantages = r->adv; tb.n_advantages = rt;
    tb.rollout_logprobs = r->lps; tb.n_rollout_logprobs = rt;
    tb.group_ids = r->gids; tb.n_group_ids = (size_t)n;
    tb.global_response_tokens = h->global_response_tokens;
    tb.global_num_seqs = h->global_num_seqs;
    tb.rank = h->rank;
    tb.world_size = h->world_size;
    tb.last_of_step = h->last_of_step != 0;
    tb.behaviour_versions = r->bver; tb.n_behaviour_versions = (size_t)n;
    tb.total_training_steps = h->total_training_steps;
    tb.scores = r->scores; tb.n_scores = (size_t)n;
    if (has_tver) { tb.token_versions = r->tver; tb.n_token_versions = rt; }
    r->tb = tb;
}

static void ref_free(Ref *r) {
    free(r->ids); free(r->offs); free(r->plen); free(r->gids); free(r->bver); free(r->tver); free(r->mask); free(r->adv); free(r->lps);
    free(r->scores);
}

/* tbwire's bytes == protobuf-c's, and they unpack to the reference arrays */
static void check_same(const TbwHead *h, const TbwSeq *seq, int n) {
    Ref r;
    ref_build(&r, h, seq, n);
    size_t want = protobuf_c_message_get_packed_size(&r.tb.base);
    uint8_t *a = malloc(want + 1), *b = malloc(want + 16);
    assert_int_equal(protobuf_c_message_pack(&r.tb.base, a), want);
    TbwSizes sz;
    assert_int_equal(tbwire_size(h, seq, n, &sz), want);
    assert_int_equal(sz.total, want);
    memset(b, 0xa5, want + 16);
    assert_int_equal(tbwire_write(h, seq, n, &sz, b), want);
    assert_memory_equal(a, b, want);
    memset(b, 0xa5, want + 16);
    assert_int_equal(tbwire_write(h, seq, n, NULL, b), want);     /* sizes recomputed: the same bytes */
    assert_memory_equal(a, b, want);
    for (int i = 0; i < 16; i++) assert_int_equal(b[want + (size_t)i], 0xa5);     /* nothing past the end */
    Dapo__TrainBatch *u = dapo__train_batch__unpack(NULL, want, b);
    assert_non_null(u);
    assert_int_equal(u->n_input_ids, r.tb.n_input_ids);
    if (u->n_input_ids) assert_memory_equal(u->input_ids, r.ids, u->n_input_ids * sizeof(int32_t));
    assert_int_equal(u->n_offsets, (size_t)n + 1);
    assert_memory_equal(u->offsets, r.offs, ((size_t)n + 1) * sizeof(uint32_t));
    assert_int_equal(u->n_rollout_logprobs, r.tb.n_rollout_logprobs);
    if (u->n_rollout_logprobs) assert_memory_equal(u->rollout_logprobs, r.lps, u->n_rollout_logprobs * sizeof(float));
    assert_int_equal(u->n_scores, (size_t)n);
    if (n) assert_memory_equal(u->scores, r.scores, (size_t)n * sizeof(float));
    assert_int_equal(u->last_of_step, h->last_of_step != 0);
    assert_int_equal(u->step, h->step);
    dapo__train_batch__free_unpacked(u, NULL);
    free(a); free(b);
    ref_free(&r);
}

static void test_edge_cases(void **state) {
    (void)state;
    int32_t p[] = {151644, 872, 0, 198}, q[] = {-1, INT32_MIN, INT32_MAX, 127, 128, 16383, 16384, 0};
    float lp[] = {-0.5f, -1e-30f, 0.0f, -3.25f, -INFINITY, -7.0f, -0.125f, -2.0f};
    TbwSeq s[3] = {
        {.prompt = p, .n_prompt = 4, .resp = q, .n_resp = 8, .logprobs = lp, .n_logprobs = 8, .mask = 1, .adv = -0.75f,
         .group_id = 1, .behaviour_version = 0, .score = -1.25f},
        {.prompt = p, .n_prompt = 2, .resp = q, .n_resp = 5, .logprobs = lp, .n_logprobs = 3, .mask = 0, .adv = 0,
         .group_id = UINT64_MAX, .behaviour_version = INT64_MAX, .score = 0.0f},                            /* log-probs shorter: padded with 0 */
        {.prompt = p, .n_prompt = 0, .resp = q, .n_resp = 0, .mask = 1, .adv = 1.5f, .group_id = 0,
         .behaviour_version = 300},   /* empty */
    };
    TbwHead h = {.run_id = "run-1-2", .step = 3, .policy_version = 2, .mini_batch_index = 1, .num_mini_batches = 4,
                 .ppo_epoch = 0, .global_response_tokens = 300, .global_num_seqs = 64, .rank = 0, .world_size = 2,
                 .last_of_step = 1, .total_training_steps = 1234567};
    check_same(&h, s, 3);
    check_same(&h, s, 0);                                    /* an empty shard: offsets {0} only */
    TbwHead z = {0};                                         /* every scalar zero, no run id: all left out */
    check_same(&z, s, 3);
    check_same(&z, s, 0);
    TbwHead neg = {.run_id = "", .step = -5, .policy_version = INT64_MIN, .rank = 17, .world_size = 18,
                   .global_response_tokens = UINT64_MAX, .global_num_seqs = UINT32_MAX};
    check_same(&neg, s + 1, 2);
    /* every varint length boundary of a token id, and of the sizes' length prefixes */
    int32_t b[] = {0, 1, 127, 128, 16383, 16384, (1 << 21) - 1, 1 << 21, (1 << 28) - 1, 1 << 28, INT32_MAX, -1};
    TbwSeq e = {.prompt = b, .n_prompt = 12, .resp = b, .n_resp = 12, .logprobs = lp, .n_logprobs = 8, .mask = 1,
                .adv = 2, .group_id = 127};
    check_same(&h, &e, 1);
}

static uint64_t rnd(uint64_t *x) {
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    return *x;
}

static void test_random_shards(void **state) {
    (void)state;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int it = 0; it < 60; it++) {
        int n = (int)(rnd(&x) % 40);
        TbwSeq *s = calloc((size_t)n + 1, sizeof *s);
        int64_t *tv[40] = {0};
        int32_t *ids = malloc(4096 * sizeof *ids);
        float *lps = malloc(4096 * sizeof *lps);
        for (int i = 0; i < 4096; i++) {
            uint64_t k = rnd(&x);
            ids[i] = k % 13 == 0 ? -(int32_t)(k % 100000) : (int32_t)((k >> 8) % (1u << (k % 31)));
            lps[i] = -(float)(k % 10000) / 997.0f;
        }
        for (int i = 0; i < n; i++) {
            s[i].prompt = ids + rnd(&x) % 1024;
            s[i].n_prompt = (uint32_t)(rnd(&x) % 64);
            s[i].resp = ids + 2048 + rnd(&x) % 1024;
            s[i].n_resp = (uint32_t)(rnd(&x) % 300);
            s[i].logprobs = lps + rnd(&x) % 1024;
            s[i].n_logprobs = rnd(&x) % 5 == 0 ? s[i].n_resp / 2 : s[i].n_resp;
            s[i].mask = rnd(&x) % 4 == 0 ? 0.0f : 1.0f;
            s[i].mask_prefix = rnd(&x) % 3 == 0 ? (uint32_t)(rnd(&x) % (s[i].n_resp + 2)) : 0;   /* may pass n_resp */
            s[i].adv = (float)((int)(rnd(&x) % 2001) - 1000) / 333.0f;
            s[i].group_id = rnd(&x) >> (rnd(&x) % 64);
            s[i].behaviour_version = (int64_t)(rnd(&x) >> (rnd(&x) % 63 + 1));
            if (it % 2 && rnd(&x) % 3 == 0) {        /* partial rollouts: per-token versions from the oldest on */
                tv[i] = malloc(((size_t)s[i].n_resp + 1) * sizeof(int64_t));
                for (uint32_t k = 0; k < s[i].n_resp; k++)
                    tv[i][k] = s[i].behaviour_version + (int64_t)(k * 3 / (s[i].n_resp + 1)) * (int64_t)(rnd(&x) % 200);
                s[i].token_versions = tv[i];
                s[i].n_token_versions = s[i].n_resp;
            }
        }
        TbwHead h = {.run_id = it % 3 ? "run-1796029085-12557" : NULL, .step = (int64_t)(rnd(&x) % 1000),
                     .policy_version = (int64_t)(rnd(&x) % 3), .mini_batch_index = (uint32_t)(rnd(&x) % 4),
                     .num_mini_batches = 4, .ppo_epoch = (uint32_t)(rnd(&x) % 2),
                     .global_response_tokens = rnd(&x) % 100000, .global_num_seqs = (uint32_t)(rnd(&x) % 512),
                     .rank = (uint32_t)(rnd(&x) % 20), .world_size = 20, .last_of_step = (int)(rnd(&x) % 2),
                     .total_training_steps = it % 2 ? rnd(&x) % 5000 : 0};
        check_same(&h, s, n);
        for (int i = 0; i < n; i++) free(tv[i]);
        free(s); free(ids); free(lps);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_random_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
