/* tests/unit/test_learner.c: the learner engine (services/learner/learner.h) on the small random Qwen2 model of
 * tests/data/model/qwen2_gqa: 1, 2 and 5 micro-batches give the same gradients (bitwise; the bound is
 * |a-b| <= 1e-8 + 1e-5|b| per element) and weights within 1e-5 after 3 steps at lr 1e-6; dynamic micro-batches (another
 * summation order) within the element-wise bound; 2 CPU ranks on a split mini-batch equal 1 rank on the whole
 * (gradients within the element-wise bound, weights within 1e-5); a NaN advantage skips the update on every rank (counted, weights untouched);
 * the step bookkeeping (old log-probs of all mini-batches before the first update: mini-batch 0 has ratio 1, clipfrac
 * 0); exact resume: 4 steps straight == 2 steps + checkpoint + kill -9 during step 3 + resume + 2 steps, bitwise
 * (the killed run is this test binary re-executed as a child); malformed shards and failed-step retries;
 * actor.use_rollout_log_probs; async mode's decoupled objective on a stale batch (IS weights, rejection, the refused
 * too-stale row). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collective/collective.h"
#include "model/checkpoint.h"
#include "services/learner/learner.h"
#include "tests/testutil.h"
#include "tests/model_slabs.h"
#include "model/probe.h"
#include "tests/learner_fixture.h"

static void test_micro_batches_same_gradients(void **state) {
    (void)state;
    const char *m1[][2] = {{"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "1"}};
    const char *m2[][2] = {{"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "5"}};
    const char *m5[][2] = {{"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "2"}};
    const char *md[][2] = {{"actor_rollout_ref.actor.use_dynamic_bsz", "true"},
                           {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "30"}};
    Learner *L[4] = {open_learner(m1, 1, 0, 1, NULL), open_learner(m2, 1, 0, 1, NULL), open_learner(m5, 1, 0, 1, NULL),
                     open_learner(md, 2, 0, 1, NULL)};
    /* The dynamic split sums in another order, so its gradient differs from L[0]'s by fp32 rounding, and AdamW (whose
     * m / sqrt(v) is about +-1 for any nonzero element) turns that into weight differences of up to ~lr on elements
     * whose gradient is near zero: from step 2 on L[3] holds other weights than L[0]. Its gradients are compared on
     * L[0]'s weights (this probe, a copy taken each step); L[3] itself runs on for the weight check. */
    Learner *probe = open_learner(md, 2, 0, 1, NULL);
    int want_micro[3] = {10, 2, 5};
    long P = model_n_params(L[0]->m);
    char err[ERR_LEN];
    for (int step = 1; step <= 3; step++) {
        Dapo__TrainBatch *tb = make_batch(100 + (uint64_t)step, 10, step, 0, 1, 0, 1);
        float *old = shifted_old(L[0], tb);
        LearnerMiniStats st[4];
        for (int k = 0; k < 4; k++) {
            int rc = learner_grads(L[k], tb, old, NULL, NULL, &st[k], err);
            if (rc) fprintf(stderr, "%s\n", err);
            assert_int_equal(rc, 0);
            if (k < 3) assert_int_equal(st[k].n_micro, want_micro[k]);
            else assert_true(st[k].n_micro >= 2);
        }
        assert_true(st[0].pg_clipfrac > 0);                      /* the clip bites somewhere */
        LearnerMiniStats pst;
        memcpy(tu_params(probe->m), tu_params(L[0]->m), (size_t)P * sizeof(float));
        assert_int_equal(learner_grads(probe, tb, old, NULL, NULL, &pst, err), 0);
        assert_true(pst.n_micro >= 2);
        assert_int_equal(grads_match(L[0]->m, tu_grads(probe->m), tu_grads(L[0]->m), "dynamic micro-batch grads"), 0);
        for (int k = 1; k < 4; k++) {
            if (k < 3) {    /* fixed-size micro-batches keep the sequence order: the same sums in the same order */
                assert_int_equal(grads_match(L[0]->m, tu_grads(L[k]->m), tu_grads(L[0]->m), "micro-batch grads"), 0);
                assert_memory_equal(tu_grads(L[k]->m), tu_grads(L[0]->m), (size_t)P * sizeof(float));
            }
            assert_true(fabs(st[k].pg_loss - st[0].pg_loss) <= 1e-6 * (1 + fabs(st[0].pg_loss)));
            assert_true(fabs(st[k].pg_clipfrac - st[0].pg_clipfrac) < 1e-6);
            assert_true(fabs(st[k].ppo_kl - st[0].ppo_kl) < 1e-6);
        }
        for (int k = 0; k < 4; k++) {
            assert_int_equal(learner_apply(L[k], &st[k], err), 0);
            assert_false(st[k].skipped);
            assert_true(fabs(st[k].lr - 1e-6) < 1e-12);
            L[k]->steps_done = step;
        }
        free(old);
        free_batch(tb);
    }
    for (int k = 1; k < 4; k++)
        assert_int_equal(close_enough(tu_params(L[k]->m), tu_params(L[0]->m), P, 1e-5, 0, "param"), 0);
    /* and the weights did move: 3 AdamW steps of ~lr each */
    Learner *fresh = open_learner(NULL, 0, 0, 1, NULL);
    double moved = 0;
    for (long i = 0; i < P; i++) moved = fmax(moved, fabs((double)tu_params(fresh->m)[i] - tu_params(L[0]->m)[i]));
    assert_true(moved > 1e-6 && moved < 1e-5);
    learner_close(fresh);
    learner_close(probe);
    for (int k = 0; k < 4; k++) learner_close(L[k]);
}

static void test_two_ranks_equal_one(void **state) {
    (void)state;
    Learner *one = open_learner(NULL, 0, 0, 1, NULL);
    Dapo__TrainBatch *tb = make_batch(77, 12, 1, 0, 1, 0, 1);
    float *old = shifted_old(one, tb);
    RankArg a[2];
    run_two_ranks(tb, old, a);
    char err[ERR_LEN];
    LearnerMiniStats st;
    assert_int_equal(learner_grads(one, tb, old, NULL, NULL, &st, err), 0);
    long P = model_n_params(one->m);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(a[r].P, P);
        assert_int_equal(grads_match(one->m, a[r].grads_out, tu_grads(one->m), "2-rank grads"), 0);
    }
    assert_memory_equal(a[0].grads_out, a[1].grads_out, (size_t)P * sizeof(float));   /* same bits on both ranks */
    assert_int_equal(learner_apply(one, &st, err), 0);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(close_enough(a[r].params_out, tu_params(one->m), P, 1e-5, 0, "param 2 ranks"), 0);
        free(a[r].grads_out);
        free(a[r].params_out);
    }
    free(old);
    free_batch(tb);
    learner_close(one);
}

/* Issue 40: each of verl's other policy losses drives an update through the learner (finite loss, weights moved; the
 * values themselves are test_dapo_loss's, against verl). */
static void test_loss_modes_train(void **state) {
    (void)state;
    static const char *modes[] = {"gspo", "cispo", "sapo", "gpg", "dppo_tv", "clip_cov", "kl_cov", "geo_mean"};
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        const char *kv[][2] = {{"actor_rollout_ref.actor.policy_loss.loss_mode", modes[k]}};
        Learner *L = open_learner(kv, 1, 0, 1, NULL);
        long P = model_n_params(L->m);
        float *before = malloc((size_t)P * sizeof(float));
        memcpy(before, tu_params(L->m), (size_t)P * sizeof(float));
        Dapo__TrainBatch *tb = make_batch(40 + k, 6, 1, 0, 1, 0, 1);
        float *old = shifted_old(L, tb);
        LearnerMiniStats st;
        char err[ERR_LEN];
        assert_int_equal(learner_update(L, tb, old, NULL, NULL, &st, err), 0);
        assert_false(st.skipped);
        assert_true(isfinite(st.pg_loss) && isfinite(st.grad_norm) && st.grad_norm > 0);
        assert_true(memcmp(before, tu_params(L->m), (size_t)P * sizeof(float)) != 0);
        free(before);
        free(old);
        free_batch(tb);
        learner_close(L);
    }
}

/* Issue 40: actor.use_kl_loss against the reference policy (model.path's weights, ref.h). One step of two mini-batches
 * through learner_submit / learner_next: the first update sees the reference and the actor as the same weights, so
 * actor/kl_loss is exactly 0; the second equals the hand-computed token-mean of verl's low_var_kl between the actor's
 * log-probs after the first update and those of the initial model (a second learner that never trains). With
 * kl_loss_coef 0 the trained weights are bitwise those of a run without the KL term: the reference pass hands the
 * actor's weights back bit for bit. */
static void run_step_kl(Learner *L, double kl[2], Learner *init, double *expect) {
    learner_submit(L, to_owned(make_batch(3000, 5, 1, 0, 2, 0, 0)));
    learner_submit(L, to_owned(make_batch(3001, 5, 1, 1, 2, 0, 1)));
    LearnerResult r;
    for (int k = 0; k < 2; k++) {
        if (k == 1 && init) {                        /* before the second update: the hand computation */
            Dapo__TrainBatch *b = make_batch(3001, 5, 1, 1, 2, 0, 1);
            long R = (long)b->n_response_mask;
            float *cur = malloc((size_t)R * sizeof(float)), *ref = malloc((size_t)R * sizeof(float));
            char err[ERR_LEN];
            assert_int_equal(learner_logprobs(L, b, cur, err), 0);
            assert_int_equal(learner_logprobs(init, b, ref, err), 0);
            KlPenalty k3 = {.kind = KL_K3};
            double sum = 0;
            for (long j = 0; j < R; j++)
                if (b->response_mask[j] > 0.5f) sum += kl_penalty_eval(k3, cur[j], ref[j], NULL);
            *expect = sum / (double)b->global_response_tokens;     /* token-mean over the mini-batch */
            free(cur);
            free(ref);
            free_batch(b);
        }
        assert_int_equal(learner_next(L, &r), 1);
        assert_false(r.failed);
        kl[k] = metrics_get(&r.metrics, "actor/kl_loss", NAN);
        learner_result_free(&r);
    }
    assert_int_equal(L->steps_done, 1);
}

static void test_kl_loss_reference(void **state) {
    (void)state;
    const char *kv[][2] = {{"actor_rollout_ref.actor.optim.lr", "1e-3"}, {"actor_rollout_ref.actor.use_kl_loss", "true"},
                           {"actor_rollout_ref.actor.kl_loss_coef", "0.3"}};
    Learner *L = open_learner(kv, 3, 0, 1, NULL), *init = open_learner(kv, 1, 0, 1, NULL);
    double kl[2], expect = NAN;
    run_step_kl(L, kl, init, &expect);
    fprintf(stderr, "actor/kl_loss: %.9g, then %.9g (hand-computed %.9g)\n", kl[0], kl[1], expect);
    assert_true(kl[0] == 0.0);
    assert_true(kl[1] > 0 && fabs(kl[1] - expect) <= 1e-5 * expect + 1e-9);
    learner_close(L);
    learner_close(init);
    kv[2][1] = "0";
    Learner *zero = open_learner(kv, 3, 0, 1, NULL), *plain = open_learner(kv, 1, 0, 1, NULL);
    run_step_kl(zero, kl, NULL, NULL);
    assert_true(kl[1] > 0);                          /* computed, with no weight in the loss */
    run_step_kl(plain, kl, NULL, NULL);
    assert_memory_equal(tu_params(zero->m), tu_params(plain->m), model_bytes_params(plain->m));
    learner_close(zero);
    learner_close(plain);
}

/* Issue 41: versions only move forward. After step 1 (version 1), a step that trains from version 0 is refused with
 * ERR_STALE naming both versions (the coordinator reloads the learners); the learner's version stays 1, and the same
 * step from version 1 then trains. */
static void test_refuses_other_version(void **state) {
    (void)state;
    Learner *L = open_learner(NULL, 0, 0, 1, NULL);
    LearnerResult r;
    learner_submit(L, to_owned(make_batch(61, 4, 1, 0, 1, 0, 1)));
    assert_int_equal(learner_next(L, &r), 1);
    assert_false(r.failed);
    learner_result_free(&r);
    assert_int_equal(L->version, 1);
    Dapo__TrainBatch *old = make_batch(62, 4, 2, 0, 1, 0, 1);
    old->policy_version = 0;
    learner_submit(L, to_owned(old));
    assert_int_equal(learner_next(L, &r), 1);
    assert_true(r.failed);
    assert_int_equal(r.code, ERR_STALE);
    assert_non_null(strstr(r.error, "trains from policy version 0, but this learner holds version 1"));
    learner_result_free(&r);
    assert_int_equal(L->version, 1);
    assert_int_equal(L->steps_done, 1);
    learner_submit(L, to_owned(make_batch(62, 4, 2, 0, 1, 0, 1)));   /* policy_version 1: trains */
    assert_int_equal(learner_next(L, &r), 1);
    assert_false(r.failed);
    learner_result_free(&r);
    assert_int_equal(L->version, 2);
    learner_close(L);
}

static void test_nan_skips_update(void **state) {
    (void)state;
    /* on one rank */
    Learner *L = open_learner(NULL, 0, 0, 1, NULL);
    long P = model_n_params(L->m);
    float *before = malloc((size_t)P * sizeof(float));
    memcpy(before, tu_params(L->m), (size_t)P * sizeof(float));
    Dapo__TrainBatch *tb = make_batch(5, 6, 1, 0, 1, 0, 1);
    tb->advantages[3] = NAN;
    float *old = shifted_old(L, tb);
    char err[ERR_LEN];
    LearnerMiniStats st;
    assert_int_equal(learner_update(L, tb, old, NULL, NULL, &st, err), 0);
    assert_true(st.skipped);
    assert_int_equal(L->skipped_updates, 1);
    assert_int_equal(model_adam_step(L->m), 0);
    assert_memory_equal(before, tu_params(L->m), (size_t)P * sizeof(float));
    tb->advantages[3] = 0.5f;                                    /* the next update goes through */
    assert_int_equal(learner_update(L, tb, old, NULL, NULL, &st, err), 0);
    assert_false(st.skipped);
    assert_int_equal(model_adam_step(L->m), 1);
    assert_true(memcmp(before, tu_params(L->m), (size_t)P * sizeof(float)) != 0);
    free(old);
    /* on two ranks: only rank 1's shard has the NaN, both skip */
    Dapo__TrainBatch *whole = make_batch(9, 12, 1, 0, 1, 0, 1);
    whole->advantages[whole->n_advantages - 1] = INFINITY;
    old = shifted_old(L, whole);
    for (int sharded = 0; sharded < 2; sharded++) {     /* replicated, and fully sharded (fsdp_size -1) */
        RankArg a[2];
        run_two_ranks_with(whole, old, a, sharded, NULL);
        for (int r = 0; r < 2; r++) {
            assert_true(a[r].skipped);
            assert_memory_equal(a[r].params_out, before, (size_t)P * sizeof(float));
        }
        free_ranks(a, 2);
    }
    free(old);
    free_batch(whole);
    free_batch(tb);
    free(before);
    learner_close(L);
}

/* Submit/next: 2 mini-batches x 2 epochs; old log-probs computed before the first update, so mini-batch 0 of epoch 0
 * runs at ratio 1 exactly (ppo_kl 0, clipfrac 0), and results come in order with the version bump at the end. */
static void run_step(Learner *L, long step, int kill_after) {
    for (uint32_t ep = 0; ep < 2; ep++)
        for (uint32_t k = 0; k < 2; k++)
            learner_submit(L, to_owned(make_batch(1000 + (uint64_t)step * 10 + k, 5, step, k, 2, ep, ep == 1 && k == 1)));
    int got = 0;
    LearnerResult r;
    while (learner_next(L, &r)) {
        if (r.failed) fprintf(stderr, "%s\n", r.error);
        assert_false(r.failed);
        assert_int_equal(r.tb->ppo_epoch, (uint32_t)(got / 2));
        assert_int_equal(r.tb->mini_batch_index, (uint32_t)(got % 2));
        if (got == 0) {
            assert_true(fabs(metrics_get(&r.metrics, "actor/ppo_kl", 1)) < 1e-7);
            assert_true(metrics_get(&r.metrics, "actor/pg_clipfrac", 1) == 0);
        }
        assert_true(metrics_get(&r.metrics, "rollout_corr/abs_logprob_diff", 0) > 0);
        assert_true(metrics_get(&r.metrics, "actor/grad_norm", 0) > 0);
        learner_result_free(&r);
        got++;
        if (kill_after && got == kill_after) raise(SIGKILL);
    }
    assert_int_equal(got, 4);
    assert_int_equal(L->steps_done, step);
    assert_int_equal(L->version, step);
}

static char ckdir[256];

static const char *resume_cfg[][2] = {{"actor_rollout_ref.actor.ppo_epochs", "2"},
                                      {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "2"},
                                      {"trainer.default_local_dir", ckdir},
                                      {"trainer.resume_mode", "auto"},
                                      {"trainer.max_actor_ckpt_to_keep", "1"}};

/* The child: steps 1-2, checkpoint, then killed with SIGKILL in the middle of step 3. */
static void resume_child_test(void **state) {
    (void)state;
    Learner *L = open_learner(resume_cfg, 5, 0, 1, NULL);
    char err[ERR_LEN];
    for (long s = 1; s <= 2; s++) {
        run_step(L, s, 0);
        int rc = learner_checkpoint(L, err);
        if (rc) fprintf(stderr, "%s\n", err);
        assert_int_equal(rc, 0);
    }
    run_step(L, 3, 3);
    fail_msg("not killed");
}

/* The child process: cmocka reports any failure with its line. */
static int resume_child(const char *dir) {
    snprintf(ckdir, sizeof ckdir, "%s", dir);
    const struct CMUnitTest t[] = {cmocka_unit_test(resume_child_test)};
    return cmocka_run_group_tests(t, NULL, NULL);
}

static void test_resume_exact(void **state) {
    (void)state;
    snprintf(ckdir, sizeof ckdir, "/tmp/dapo-test-learner-%d", (int)getpid());
    char e[ERR_LEN];
    checkpoint_remove_tree(ckdir, e);
    char cmd[600], out[4096];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --resume-child %s 2>&1", (int)getpid(), ckdir);
    int st = tu_run(cmd, out, sizeof out);
    (void)st;                                                  /* the shell reports the SIGKILL as 137 */
    long step;
    char path[512];
    assert_int_equal(checkpoint_find_latest(ckdir, path, sizeof path, &step, e), 0);
    assert_int_equal(step, 2);
    char p1[600];
    snprintf(p1, sizeof p1, "%s/global_step_1", ckdir);
    assert_int_not_equal(access(p1, F_OK), 0);                  /* max_actor_ckpt_to_keep = 1 pruned step 1 */
    /* resumed: steps 3-4 */
    Learner *R = open_learner(resume_cfg, 5, 0, 1, NULL);
    assert_int_equal(R->steps_done, 2);
    assert_int_equal(R->version, 2);
    run_step(R, 3, 0);
    run_step(R, 4, 0);
    /* straight: steps 1-4 without checkpoints */
    const char *straight_cfg[][2] = {{"actor_rollout_ref.actor.ppo_epochs", "2"},
                                     {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "2"}};
    Learner *S = open_learner(straight_cfg, 2, 0, 1, NULL);
    for (long s = 1; s <= 4; s++) run_step(S, s, 0);
    long P = model_n_params(S->m);
    assert_memory_equal(tu_params(S->m), tu_params(R->m), (size_t)P * sizeof(float));
    assert_memory_equal(tu_adam_m(S->m), tu_adam_m(R->m), (size_t)P * sizeof(float));
    assert_memory_equal(tu_adam_v(S->m), tu_adam_v(R->m), (size_t)P * sizeof(float));
    assert_int_equal(model_adam_step(S->m), model_adam_step(R->m));
    assert_int_equal(model_adam_step(S->m), 16);          /* 4 steps x 2 epochs x 2 mini-batches */
    learner_close(S);
    learner_close(R);
    checkpoint_remove_tree(ckdir, e);
}

/* Rejects malformed shards with a message instead of crashing. */
/* Shards that arrive out of (epoch, mini-batch) order (the daemon can read one before others it read earlier are
 * handed over) are trained in verl's order all the same: the same results, in order, and bitwise the same weights as
 * in-order arrival; the step ends after its 6th shard, not at the one marked last_of_step. */
static void test_shards_out_of_order(void **state) {
    (void)state;
    static const char *cfg[][2] = {{"actor_rollout_ref.actor.ppo_epochs", "3"}};
    Learner *L[2] = {open_learner(cfg, 1, 0, 1, NULL), open_learner(cfg, 1, 0, 1, NULL)};
    static const uint32_t order[2][6][2] = {{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}},
                                            {{0, 0}, {1, 0}, {2, 1}, {0, 1}, {1, 1}, {2, 0}}};   /* (epoch, mini) */
    for (int v = 0; v < 2; v++) {
        for (int i = 0; i < 6; i++) {
            uint32_t ep = order[v][i][0], k = order[v][i][1];
            learner_submit(L[v], to_owned(make_batch(2000 + k, 5, 1, k, 2, ep, ep == 2 && k == 1)));
        }
        LearnerResult r;
        int got = 0;
        while (learner_next(L[v], &r)) {
            assert_false(r.failed);
            assert_int_equal(r.tb->ppo_epoch, (uint32_t)(got / 2));
            assert_int_equal(r.tb->mini_batch_index, (uint32_t)(got % 2));
            learner_result_free(&r);
            got++;
        }
        assert_int_equal(got, 6);
        assert_int_equal(L[v]->steps_done, 1);
    }
    assert_memory_equal(tu_params(L[0]->m), tu_params(L[1]->m), model_bytes_params(L[0]->m));
    learner_close(L[0]);
    learner_close(L[1]);
}

static void test_bad_batches(void **state) {
    (void)state;
    Learner *L = open_learner(NULL, 0, 0, 1, NULL);
    char err[ERR_LEN];
    Dapo__TrainBatch *tb = make_batch(3, 4, 1, 0, 1, 0, 1);
    tb->input_ids[2] = 5000;
    assert_int_equal(learner_check_batch(L, tb, err), ERR_INVAL);
    assert_non_null(strstr(err, "vocabulary"));
    tb->input_ids[2] = 5;
    tb->n_advantages--;
    assert_int_equal(learner_check_batch(L, tb, err), ERR_INVAL);
    tb->n_advantages++;
    /* issue 42: per-token versions (partial rollouts): one per response token, each between its sequence's behaviour
     * version and the version the step trains from */
    int64_t tv[4096];
    size_t nr = tb->n_response_mask;
    assert_true(nr > 1 && nr <= 4096);
    for (size_t t = 0; t < nr; t++) tv[t] = tb->policy_version;
    tb->token_versions = tv;
    tb->n_token_versions = nr;
    assert_int_equal(learner_check_batch(L, tb, err), 0);
    tb->n_token_versions = nr - 1;
    assert_int_equal(learner_check_batch(L, tb, err), ERR_INVAL);
    assert_non_null(strstr(err, "token versions"));
    tb->n_token_versions = nr;
    tv[nr - 1] = tb->policy_version + 1;
    assert_int_equal(learner_check_batch(L, tb, err), ERR_INVAL);
    assert_non_null(strstr(err, "the version it trains from"));
    tb->token_versions = NULL;
    tb->n_token_versions = 0;
    tb->offsets[2] = tb->offsets[1] - 1;
    assert_int_equal(learner_check_batch(L, tb, err), ERR_INVAL);
    free_batch(tb);
    /* a failing shard fails its step: the rest of the step's shards are dropped */
    Dapo__TrainBatch *bad = make_batch(4, 4, 1, 0, 2, 0, 0);
    bad->rank = 3;
    learner_submit(L, to_owned(bad));
    learner_submit(L, to_owned(make_batch(5, 4, 1, 1, 2, 0, 1)));
    LearnerResult r;
    assert_int_equal(learner_next(L, &r), 1);
    assert_true(r.failed);
    assert_non_null(strstr(r.error, "rank"));
    learner_result_free(&r);
    assert_int_equal(learner_next(L, &r), 0);
    learner_submit(L, to_owned(make_batch(6, 4, 1, 1, 2, 1, 1)));      /* the failed attempt's remainder: dropped */
    assert_int_equal(learner_next(L, &r), 0);
    assert_int_equal(L->n_pending, 0);
    learner_submit(L, to_owned(make_batch(4, 4, 1, 0, 2, 0, 0)));      /* a new attempt of step 1 runs */
    learner_submit(L, to_owned(make_batch(5, 4, 1, 1, 2, 0, 1)));
    for (int k = 0; k < 2; k++) {
        assert_int_equal(learner_next(L, &r), 1);
        assert_false(r.failed);
        learner_result_free(&r);
    }
    assert_int_equal(L->steps_done, 1);
    learner_close(L);
}

/* actor.use_rollout_log_probs: no recompute; the rollout's log-probs are the old ones (ratio far from 1 here) */
static void test_rollout_logprobs_option(void **state) {
    (void)state;
    const char *cfg[][2] = {{"actor_rollout_ref.actor.use_rollout_log_probs", "true"}};
    Learner *L = open_learner(cfg, 1, 0, 1, NULL);
    Dapo__TrainBatch *tb = make_batch(8, 4, 1, 0, 1, 0, 1);
    long R = (long)tb->n_response_mask;
    float *lp = malloc((size_t)R * sizeof(float));
    char err[ERR_LEN];
    assert_int_equal(learner_logprobs(L, tb, lp, err), 0);
    double kl = 0, n = 0;
    for (long j = 0; j < R; j++)
        if (tb->response_mask[j] > 0.5f) { kl += tb->rollout_logprobs[j] - lp[j]; n++; }
    learner_submit(L, to_owned(tb));
    LearnerResult r;
    assert_int_equal(learner_next(L, &r), 1);
    assert_false(r.failed);
    assert_true(fabs(metrics_get(&r.metrics, "actor/ppo_kl", 0) - kl / n) < 1e-4);
    assert_true(metrics_get(&r.metrics, "rollout_corr/log_ppl_diff", 12345) == 12345);   /* not computed */
    learner_result_free(&r);
    free(lp);
    learner_close(L);
}

/* A shard of step `step` generated by policy version `behaviour` (every row), its rollout log-probs those of L now. */
static Dapo__TrainBatch *stale_batch(Learner *L, uint64_t seed, long step, int64_t behaviour, float **rollout_lp) {
    Dapo__TrainBatch *tb = make_batch(seed, 6, step, 0, 1, 0, 1);
    tb->n_behaviour_versions = tb->n_offsets - 1;
    tb->behaviour_versions = calloc(tb->n_behaviour_versions, sizeof(int64_t));
    for (size_t i = 0; i < tb->n_behaviour_versions; i++) tb->behaviour_versions[i] = behaviour;
    char err[ERR_LEN];
    assert_int_equal(learner_logprobs(L, tb, tb->rollout_logprobs, err), 0);     /* the behaviour policy's */
    *rollout_lp = malloc(tb->n_rollout_logprobs * sizeof(float));
    memcpy(*rollout_lp, tb->rollout_logprobs, tb->n_rollout_logprobs * sizeof(float));
    return tb;
}

/* Submits tb (a one-shard step) and runs it into *r. */
static void run_one_step(Learner *L, Dapo__TrainBatch *tb, LearnerResult *r) {
    int64_t *bv = tb->behaviour_versions;                /* free_batch (via to_owned) does not free it */
    Dapo__TrainBatch *u = to_owned(tb);
    free(bv);
    learner_submit(L, u);
    assert_int_equal(learner_next(L, r), 1);
}

/* Async mode's decoupled objective (issue 15): two batches generated by version 0; the second is trained after the
 * first's update, so the learner (version 1) is its proximal policy and version 0 its behaviour policy. Its IS
 * weights are min(pi_1 / pi_0, 2) (trainer.staleness 1 turns token-level TIS at 2.0 on), they differ from 1, the loss
 * is the hand-computed decoupled loss (ratio = 1 against the proximal policy on the first mini-batch, so the loss is
 * -A w averaged over the tokens), ppo_kl and the clip fractions are 0, and the metrics show staleness 1. The first
 * batch, on-policy, has every weight exactly 1. */
static void test_stale_batch_decoupled_loss(void **state) {
    (void)state;
    const char *cfg[][2] = {{"trainer.staleness", "1"}, {"actor_rollout_ref.actor.optim.lr", "3e-2"}};
    Learner *L = open_learner(cfg, 2, 0, 1, NULL);
    assert_true(L->rc.is_on && L->rc.is_auto && L->rc.is_level == ROLLOUT_IS_TOKEN && L->rc.is_upper == 2.0);
    float *beh_a, *beh_b;
    Dapo__TrainBatch *a = stale_batch(L, 21, 1, 0, &beh_a), *b = stale_batch(L, 22, 2, 0, &beh_b);
    a->policy_version = 0;
    b->policy_version = 1;                              /* what the learner will hold when b arrives */
    long R = (long)b->n_response_mask;
    float *adv = malloc((size_t)R * sizeof(float)), *mask = malloc((size_t)R * sizeof(float));
    memcpy(adv, b->advantages, (size_t)R * sizeof(float));
    memcpy(mask, b->response_mask, (size_t)R * sizeof(float));
    LearnerResult r;
    run_one_step(L, a, &r);
    assert_false(r.failed);
    assert_true(metrics_get(&r.metrics, "rollout_corr/staleness_max", -1) == 0);
    assert_true(metrics_get(&r.metrics, "training/off_policy/trajectory_staleness/min", -1) == 0);
    assert_true(fabs(metrics_get(&r.metrics, "rollout_corr/rollout_is_mean", -1) - 1) < 1e-6);
    assert_true(metrics_get(&r.metrics, "rollout_corr/rollout_is_min", -1) == 1);
    assert_true(metrics_get(&r.metrics, "rollout_corr/rollout_is_max", -1) == 1);
    assert_true(metrics_get(&r.metrics, "rollout_corr/rows_truncated", -1) == 0);
    learner_result_free(&r);
    assert_true(L->version == 1);
    /* the proximal policy of b: the learner's weights now (version 1) */
    float *prox = malloc((size_t)R * sizeof(float));
    char err[ERR_LEN];
    assert_int_equal(learner_logprobs(L, b, prox, err), 0);
    double num = 0, cnt = 0, wsum = 0;
    int differ = 0, capped = 0;
    for (long j = 0; j < R; j++) {
        if (mask[j] <= 0.5f) continue;
        float w = expf(prox[j] - beh_b[j]);
        if (w > 2.0f) { w = 2.0f; capped++; }
        differ += fabsf(w - 1.0f) > 1e-4f;
        num += -(double)adv[j] * w;
        wsum += w;
        cnt += 1;
    }
    assert_true(differ > 0);
    run_one_step(L, b, &r);
    assert_false(r.failed);
    double want = num / cnt;
    fprintf(stderr, "stale batch: %d of %.0f weights differ from 1 (%d capped at 2), pg_loss %.9g, hand %.9g\n", differ,
            cnt, capped, r.st.pg_loss, want);
    assert_true(fabs(r.st.pg_loss - want) <= 1e-6 + 1e-5 * fabs(want));
    assert_true(r.st.ppo_kl == 0 && r.st.pg_clipfrac == 0 && r.st.pg_clipfrac_lower == 0);
    assert_true(metrics_get(&r.metrics, "rollout_corr/staleness_mean", -1) == 1);
    assert_true(metrics_get(&r.metrics, "rollout_corr/staleness_max", -1) == 1);
    assert_true(metrics_get(&r.metrics, "rollout_corr/stale_rows", -1) == 6);
    assert_true(metrics_get(&r.metrics, "training/off_policy/trajectory_staleness/max", -1) == 1);   /* verl V1's */
    assert_true(metrics_get(&r.metrics, "training/off_policy/trajectory_staleness/min", -1) == 1);
    assert_true(metrics_get(&r.metrics, "rollout_corr/rows_is_weighted", -1) == 6);
    assert_true(fabs(metrics_get(&r.metrics, "rollout_corr/rollout_is_mean", -1) - wsum / cnt) < 1e-5);
    learner_result_free(&r);
    /* a row two versions behind (staleness 1) is refused, naming it */
    float *beh_c;
    Dapo__TrainBatch *c = stale_batch(L, 23, 3, 0, &beh_c);
    c->policy_version = 2;
    run_one_step(L, c, &r);
    assert_true(r.failed);
    assert_non_null(strstr(r.error, "more versions behind than trainer.staleness 1"));
    learner_result_free(&r);
    free(beh_a); free(beh_b); free(beh_c); free(prox); free(adv); free(mask);
    learner_close(L);
}

/* Issue 42: a partial rollout — each sequence's first half sampled by version 0, the rest (after an in-flight weight
 * update) by version 1, each token with its own version and log-prob. Trained at version 1 (its proximal policy), the
 * IS weight of a version-1 token is exactly 1 and a version-0 token's min(pi_1 / pi_0, 2): the loss equals the
 * hand-computed per-token decoupled loss, -A w averaged over the tokens. */
static void test_partial_rollout_decoupled_loss(void **state) {
    (void)state;
    const char *cfg[][2] = {{"trainer.staleness", "1"}, {"actor_rollout_ref.actor.optim.lr", "3e-2"}};
    Learner *L = open_learner(cfg, 2, 0, 1, NULL);
    float *beh_a, *lp0;
    Dapo__TrainBatch *a = stale_batch(L, 31, 1, 0, &beh_a), *b = stale_batch(L, 32, 2, 0, &lp0);
    a->policy_version = 0;
    b->policy_version = 1;
    long R = (long)b->n_response_mask;
    LearnerResult r;
    run_one_step(L, a, &r);                              /* version 0 -> 1 */
    assert_false(r.failed);
    learner_result_free(&r);
    float *lp1 = malloc((size_t)R * sizeof(float)), *adv = malloc((size_t)R * sizeof(float));
    char err[ERR_LEN];
    assert_int_equal(learner_logprobs(L, b, lp1, err), 0);
    memcpy(adv, b->advantages, (size_t)R * sizeof(float));
    int64_t *tv = malloc((size_t)R * sizeof(int64_t));
    double num = 0, cnt = 0;
    int spans = 0, differ = 0;
    for (size_t i = 0, t = 0; i + 1 < b->n_offsets; i++) {
        uint32_t n = b->offsets[i + 1] - b->offsets[i] - b->prompt_lengths[i], half = n / 2;
        spans += half > 0 && half < n;
        for (uint32_t k = 0; k < n; k++, t++) {
            tv[t] = k < half ? 0 : 1;
            b->rollout_logprobs[t] = k < half ? lp0[t] : lp1[t];
            if (b->response_mask[t] <= 0.5f) continue;
            float w = expf(lp1[t] - b->rollout_logprobs[t]);
            if (w > 2.0f) w = 2.0f;
            if (k >= half) assert_true(w == 1.0f);
            differ += fabsf(w - 1.0f) > 1e-4f;
            num += -(double)adv[t] * w;
            cnt += 1;
        }
    }
    assert_true(spans > 0 && differ > 0);
    b->token_versions = tv;
    b->n_token_versions = (size_t)R;
    run_one_step(L, b, &r);
    assert_false(r.failed);
    double want = num / cnt;
    fprintf(stderr, "partial rollout: %d sequences span versions 0 and 1, %d weights differ from 1, pg_loss %.9g, hand "
            "%.9g\n", spans, differ, r.st.pg_loss, want);
    assert_true(fabs(r.st.pg_loss - want) <= 1e-6 + 1e-5 * fabs(want));
    assert_true(metrics_get(&r.metrics, "training/off_policy/trajectory_staleness/max", -1) == 1);
    learner_result_free(&r);
    free(beh_a); free(lp0); free(lp1); free(adv); free(tv);
    learner_close(L);
}

/* Issue 42: the weight probe. The learner's probe log-probs (its training forward, at open and after every step) equal
 * a rollout's (model/probe.h: an inference model, the KV-cache forward) of the same weights to fp32 rounding; one
 * tensor changed in the rollout's copy shows far above cluster.weights_probe_tolerance (1e-4); after a step the
 * learner's probe is of the new weights. */
static void test_weight_probe(void **state) {
    (void)state;
    const char *cfg[][2] = {{"actor_rollout_ref.actor.optim.lr", "3e-2"}};
    Learner *L = open_learner(cfg, 1, 0, 1, NULL);
    assert_int_equal(L->n_probe, probe_len(model_max_tokens(L->m)) - 1);   /* its window: the first ids */
    char p[1024], err[ERR_LEN];
    snprintf(p, sizeof p, "%s/tests/data/model/qwen2_gqa", tu_root());
    ModelOptions mo = {.max_tokens = PROBE_TOKENS};
    Model *m = model_load(p, &mo, err);
    if (!m) fail_msg("%s", err);
    float got[PROBE_TOKENS];
    float T = L->temperature;
    assert_int_equal(probe_logprobs(m, T, L->n_probe + 1, got, err), L->n_probe);
    double d = probe_diff(got, L->probe_lp, L->n_probe);
    fprintf(stderr, "weight probe: learner vs rollout %.3g over %d log-probs\n", d, L->n_probe);
    assert_true(d <= 1e-5);
    float before[PROBE_TOKENS];
    memcpy(before, L->probe_lp, sizeof before);
    LearnerResult r;
    run_one_step(L, make_batch(41, 4, 1, 0, 1, 0, 1), &r);   /* version 1: the probe follows the weights */
    assert_false(r.failed);
    learner_result_free(&r);
    assert_true(probe_diff(before, L->probe_lp, L->n_probe) > 1e-6);
    const ModelTensor *t = model_tensor(m, model_tensor_index(m, "model.layers.0.mlp.down_proj.weight"));
    float *w = model_host_slab(m, MODEL_PARAMS);
    for (long i = 0; i < t->numel; i++) w[t->offset + i] += 0.5f;
    assert_int_equal(probe_logprobs(m, T, L->n_probe + 1, got, err), L->n_probe);
    assert_true(probe_diff(got, before, L->n_probe) > 1e-4);
    model_free(m);
    learner_close(L);
}

/* Decoupled rejection: token_k2 rejects tokens whose proximal/behaviour log-ratio r has r^2/2 > 1e-4; they leave the
 * loss and the token-mean denominator (verl counts batch_num_tokens after rejection). */
static void test_stale_batch_rejection(void **state) {
    (void)state;
    const char *cfg[][2] = {{"trainer.staleness", "1"}, {"actor_rollout_ref.actor.optim.lr", "3e-2"},
                            {"algorithm.rollout_correction.rollout_is", "null"},
                            {"algorithm.rollout_correction.rollout_rs", "token_k2"},
                            {"algorithm.rollout_correction.rollout_rs_threshold", "1e-4"}};
    Learner *L = open_learner(cfg, 5, 0, 1, NULL);
    float *beh_a, *beh_b;
    Dapo__TrainBatch *a = stale_batch(L, 31, 1, 0, &beh_a), *b = stale_batch(L, 32, 2, 0, &beh_b);
    a->policy_version = 0;
    b->policy_version = 1;
    long R = (long)b->n_response_mask;
    float *adv = malloc((size_t)R * sizeof(float)), *mask = malloc((size_t)R * sizeof(float));
    memcpy(adv, b->advantages, (size_t)R * sizeof(float));
    memcpy(mask, b->response_mask, (size_t)R * sizeof(float));
    LearnerResult r;
    run_one_step(L, a, &r);
    assert_false(r.failed);
    assert_true(metrics_get(&r.metrics, "rollout_corr/rollout_rs_masked_fraction", -1) == 0);   /* on-policy */
    learner_result_free(&r);
    float *prox = malloc((size_t)R * sizeof(float));
    char err[ERR_LEN];
    assert_int_equal(learner_logprobs(L, b, prox, err), 0);
    double num = 0, kept = 0, counted = 0;
    for (long j = 0; j < R; j++) {
        if (mask[j] <= 0.5f) continue;
        float d = prox[j] - beh_b[j];
        counted += 1;
        if (0.5f * d * d <= 1e-4f) { num += -(double)adv[j]; kept += 1; }
    }
    assert_true(kept > 0 && kept < counted);
    run_one_step(L, b, &r);
    assert_false(r.failed);
    double want = num / kept;
    fprintf(stderr, "rejection: %.0f of %.0f tokens kept, pg_loss %.9g, hand %.9g\n", kept, counted, r.st.pg_loss, want);
    assert_true(fabs(r.st.pg_loss - want) <= 1e-6 + 1e-5 * fabs(want));
    assert_true(fabs(metrics_get(&r.metrics, "rollout_corr/rollout_rs_masked_fraction", -1) - (1 - kept / counted)) < 1e-6);
    assert_true(metrics_get(&r.metrics, "rollout_corr/rows_rejected", -1) >= 1);
    learner_result_free(&r);
    free(beh_a); free(beh_b); free(prox); free(adv); free(mask);
    learner_close(L);
}

/* Trains step `step` of a run the coordinator says has `total` steps (TrainBatch.total_training_steps) on a fresh
 * batch (seed) and returns the learning rate the update used. */
static double lr_of_step(Learner *L, uint64_t seed, long step, uint64_t total) {
    Dapo__TrainBatch *tb = make_batch(seed, 4, step, 0, 1, 0, 1);
    tb->total_training_steps = total;
    learner_submit(L, to_owned(tb));
    LearnerResult r;
    assert_int_equal(learner_next(L, &r), 1);
    assert_false(r.failed);
    double lr = r.st.lr;
    learner_result_free(&r);
    return lr;
}

/* A decaying schedule without trainer.total_training_steps takes its length from the coordinator (TrainBatch
 * total_training_steps, derived from the data as verl does) instead of 10^9 steps that never decay. */
static void test_cosine_length_from_coordinator(void **state) {
    (void)state;
    const char *cfg[][2] = {{"actor_rollout_ref.actor.optim.warmup_style", "cosine"},
                            {"actor_rollout_ref.actor.optim.lr_warmup_steps", "0"}};
    Learner *L = open_learner(cfg, 2, 0, 1, NULL);
    assert_true(L->total_steps == 0);
    for (long step = 1; step <= 3; step++) {
        double lr = lr_of_step(L, 40 + (uint64_t)step, step, 4);
        double want = lr_at(LR_COSINE, 1e-6, step - 1, 0, 4, 0.0);
        assert_true(fabs(lr - want) <= 1e-15);
        if (step == 3) assert_true(lr < 0.6e-6);            /* 1e-6 * (1 + cos(pi/2)) / 2 = 0.5e-6: decaying */
    }
    assert_true(L->total_steps == 4);
    learner_close(L);
}

/* verl's lr_warmup_steps_ratio: with lr_warmup_steps -1 the warm-up is int(ratio x total steps), the total from the
 * coordinator: ratio 0.5 of 4 steps warms up over 2 (lr 0, then half, then the full rate). */
static void test_warmup_ratio(void **state) {
    (void)state;
    const char *cfg[][2] = {{"actor_rollout_ref.actor.optim.lr_warmup_steps", "-1"},
                            {"actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", "0.5"}};
    Learner *L = open_learner(cfg, 2, 0, 1, NULL);
    const double want[] = {0, 0.5e-6, 1e-6};
    for (long step = 1; step <= 3; step++) {
        double lr = lr_of_step(L, 60 + (uint64_t)step, step, 4);
        if (fabs(lr - want[step - 1]) > 1e-15) fail_msg("step %ld: lr %g, want %g", step, lr, want[step - 1]);
    }
    learner_close(L);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--resume-child")) return resume_child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_micro_batches_same_gradients),
        cmocka_unit_test(test_two_ranks_equal_one),
        cmocka_unit_test(test_loss_modes_train),
        cmocka_unit_test(test_kl_loss_reference),
        cmocka_unit_test(test_refuses_other_version),
        cmocka_unit_test(test_nan_skips_update),
        cmocka_unit_test(test_resume_exact),
        cmocka_unit_test(test_bad_batches),
        cmocka_unit_test(test_shards_out_of_order),
        cmocka_unit_test(test_rollout_logprobs_option),
        cmocka_unit_test(test_stale_batch_decoupled_loss),
        cmocka_unit_test(test_partial_rollout_decoupled_loss),
        cmocka_unit_test(test_weight_probe),
        cmocka_unit_test(test_stale_batch_rejection),
        cmocka_unit_test(test_cosine_length_from_coordinator),
        cmocka_unit_test(test_warmup_ratio),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
