/* tests/unit/test_coord_batch.c: the coordinator's batch plan (services/coordinator/batch.h) on hand-computed cases:
 * two groups of two responses, rewards +1/-1 and +1/+1, one response truncated with overlong filtering on.
 * GRPO advantages (verl: (r - mean) / (std + 1e-6), torch.std unbiased): group 1 is +-1/sqrt(2) (std sqrt(2)),
 * group 2 all 0; the truncated row has response_mask 0 and is left out of the critic/advantages metrics; every row carries its
 * prompt, response, log-probs, group id and behaviour version; the shards hold every row once with the right token
 * counts for 1 and 2 learner ranks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/testutil.h"

#include "services/coordinator/batch.h"

typedef struct {
    Dapo__Response r[4], *rp[2][2];
    Dapo__GroupResult gr[2];
    Group g[2], *gp[2];
    float score[2][2], acc[2][2];
    DatasetItem it[2];
    const DatasetItem *ip[2];
    int32_t prompt[2][3], tok[4][5];
    float lp[4][5];
} Fix;

static void fix_init(Fix *f) {
    memset(f, 0, sizeof *f);
    const int len[4] = { 5, 2, 3, 4 };
    const float rw[4] = { 1, -1, 1, 1 };
    for (int q = 0; q < 4; q++) {
        Dapo__Response *r = &f->r[q];
        dapo__response__init(r);
        for (int t = 0; t < len[q]; t++) { f->tok[q][t] = 10 * q + t; f->lp[q][t] = -0.1f * (float)(t + 1); }
        r->token_ids = f->tok[q];
        r->n_token_ids = (size_t)len[q];
        r->logprobs = f->lp[q];
        r->n_logprobs = (size_t)len[q];
        r->finish_reason = (char *)(q == 2 ? "length" : "stop");   /* row 2 is truncated */
        r->policy_version = q == 3 ? 7 : 6;
        f->rp[q / 2][q % 2] = r;
        f->score[q / 2][q % 2] = rw[q];
    }
    for (int b = 0; b < 2; b++) {
        f->gr[b].responses = f->rp[b];
        f->gr[b].n_responses = 2;
        f->g[b] = (Group){ .id = 100 + (uint64_t)b, .n = 2, .version = 6, .result = &f->gr[b], .score = f->score[b],
                           .acc = f->acc[b] };
        f->gp[b] = &f->g[b];
        for (int t = 0; t < 3; t++) f->prompt[b][t] = 50 + 3 * b + t;
        f->it[b] = (DatasetItem){ .ids = f->prompt[b], .n_ids = 2 + b };   /* prompts of 2 and 3 tokens */
        f->ip[b] = &f->it[b];
    }
}

static Config cfg_of(int world) {
    Config c;
    config_defaults(&c);
    tu_dapo_recipe(&c);
    c.rollout_n = 2;
    c.num_learners = world;
    c.ppo_mini_batch_size = 2;          /* both groups in one mini-batch */
    c.overlong_filtering = true;
    c.norm_adv_by_std_in_grpo = true;
    return c;
}

static void test_plan_one_rank(void **state) {
    (void)state;
    Fix f;
    fix_init(&f);
    Config c = cfg_of(1);
    BatchPlan p;
    char err[ERR_LEN];
    assert_int_equal(batch_plan_build(&c, f.gp, f.ip, 2, &p, err), 0);
    assert_int_equal(p.nseq, 4);
    double a = 1.0 / (sqrt(2.0) + 1e-6);
    assert_true(fabs(p.adv[0] - a) < 1e-6 && fabs(p.adv[1] + a) < 1e-6);
    assert_true(p.adv[2] == 0.0f && p.adv[3] == 0.0f);
    /* rows */
    assert_true(p.row[2].mask == 0.0f);                     /* truncated, overlong filtering on */
    assert_true(p.row[0].mask == 1.0f && p.row[1].mask == 1.0f && p.row[3].mask == 1.0f);
    assert_ptr_equal(p.row[3].resp, f.tok[3]);
    assert_int_equal(p.row[3].n_resp, 4);
    assert_ptr_equal(p.row[3].prompt, f.prompt[1]);
    assert_int_equal(p.row[3].n_prompt, 3);
    assert_int_equal(p.row[1].group_id, 100);
    assert_int_equal(p.row[2].group_id, 101);
    assert_int_equal(p.row[3].behaviour_version, 7);   /* its own version, newer than the group's */
    assert_int_equal(p.row[0].behaviour_version, 6);
    assert_true(p.row[1].adv == p.adv[1]);
    /* shards: one mini-batch x one rank holds every row; tokens = prompts + responses */
    assert_int_equal(p.lay.n_mini, 1);
    assert_int_equal(p.lay.shard[0].n_seq, 4);
    assert_int_equal(p.batch_tokens, (2 + 5) + (2 + 2) + (3 + 3) + (3 + 4));
    assert_int_equal(p.shard_tokens[0], p.batch_tokens);
    /* critic/advantages over unmasked response tokens: rows 0 (5 tokens, +a), 1 (2, -a), 3 (4, 0) */
    assert_true(fabs(p.adv_mean - (5 * a - 2 * a) / 11) < 1e-6);
    assert_true(fabs(p.adv_max - a) < 1e-6 && fabs(p.adv_min + a) < 1e-6);
    TbwSeq rows[4];
    batch_plan_shard_rows(&p, 0, rows);
    int seen[4] = { 0 };
    for (int j = 0; j < 4; j++) seen[rows[j].resp == f.tok[0] ? 0 : rows[j].resp == f.tok[1] ? 1 : rows[j].resp == f.tok[2] ? 2 : 3]++;
    for (int q = 0; q < 4; q++) assert_int_equal(seen[q], 1);
    batch_plan_free(&p);
    assert_null(p.row);
    config_free(&c);
}

/* Issue 42, slime's mask-offpolicy-in-partial-rollout: row 0 (5 tokens) was continued across a weight swap (versions
 * 6 6 7 7 7); with the option its first 2 tokens get response_mask 0 and leave the token-mean denominator and the
 * advantage statistics; its own versions go to the learner (TrainBatch.token_versions); without it nothing is masked. */
static void test_plan_partial_rollout_mask(void **state) {
    (void)state;
    for (int on = 0; on < 2; on++) {
        Fix f;
        fix_init(&f);
        int64_t tv[5] = {6, 6, 7, 7, 7};
        f.r[0].token_versions = tv;
        f.r[0].n_token_versions = 5;
        Config c = cfg_of(1);
        c.mask_offpolicy_partial = on;
        BatchPlan p;
        char err[ERR_LEN];
        assert_int_equal(batch_plan_build(&c, f.gp, f.ip, 2, &p, err), 0);
        assert_int_equal(p.row[0].mask_prefix, on ? 2 : 0);
        assert_ptr_equal(p.row[0].token_versions, tv);
        assert_int_equal(p.row[0].n_token_versions, 5);
        assert_null(p.row[1].token_versions);          /* one version made it: none sent */
        assert_int_equal(p.lay.shard[0].global_tokens, on ? 3 + 2 + 4 : 5 + 2 + 4);   /* row 2: overlong-masked */
        double a = 1.0 / (sqrt(2.0) + 1e-6);
        int t0 = on ? 3 : 5;
        assert_true(fabs(p.adv_mean - (t0 * a - 2 * a) / (t0 + 2 + 4)) < 1e-6);
        batch_plan_free(&p);
        config_free(&c);
    }
}

static void test_plan_two_ranks(void **state) {
    (void)state;
    Fix f;
    fix_init(&f);
    Config c = cfg_of(2);
    BatchPlan p;
    char err[ERR_LEN];
    assert_int_equal(batch_plan_build(&c, f.gp, f.ip, 2, &p, err), 0);
    assert_int_equal(p.world, 2);
    int rows = 0;
    long long tok = 0;
    for (int k = 0; k < p.lay.n_mini * 2; k++) { rows += p.lay.shard[k].n_seq; tok += p.shard_tokens[k]; }
    assert_int_equal(rows, 4);
    assert_int_equal(tok, p.batch_tokens);
    batch_plan_free(&p);
    config_free(&c);
}

static void test_plan_bad_layout(void **state) {
    (void)state;
    Fix f;
    fix_init(&f);
    Config c = cfg_of(1);
    c.ppo_mini_batch_size = 0;
    BatchPlan p;
    char err[ERR_LEN] = "";
    assert_int_not_equal(batch_plan_build(&c, f.gp, f.ip, 2, &p, err), 0);
    assert_true(err[0] != 0);
    assert_null(p.row);
    config_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_one_rank),
        cmocka_unit_test(test_plan_two_ranks),
        cmocka_unit_test(test_plan_partial_rollout_mask),
        cmocka_unit_test(test_plan_bad_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
