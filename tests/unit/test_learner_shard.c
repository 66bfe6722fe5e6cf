/* tests/unit/test_learner_shard.c: the fully sharded learner (issue 39; fsdp_config.fsdp_size -1, services/learner/
 * shard.h) on the small random Qwen2 model: W = 2, 3, 4 ranks give every rank the same bits and gradients within the
 * element-wise bound of one unsharded rank's (reshard_after_forward false the same bits; ranks with unequal chunk counts
 * too); the sharded checkpoint re-shards 2 -> 1, 2 -> 4 and 1 -> 2 bit for bit; a sharded run is bitwise the same run
 * after run and after a stop and resume at the same W, and within the bound resumed at W = 4 or 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include "tests/learner_fixture.h"

/* Issue 39: FSDP full shard (fsdp_size -1) at W = 2, 3, 4 gives every rank the same bits, and they equal replicated
 * data parallelism's at that W and one unsharded rank's on the whole batch within fp32 reassociation (each chunk's layer
 * gradients are summed over ranks before they are added over chunks, the ring cuts its sums elsewhere, the norm's double
 * sums run in another order): |a - b| <= 1e-6 + 1e-5 |b| after one AdamW step at lr 1e-6. reshard_after_forward false
 * (every layer's parameters kept from forward to backward) gives the same bits as true; ranks with unequal chunk counts
 * (8 and 4 sequences: the short one runs idle passes) agree too. */
static void test_sharded_ranks(void **state) {
    (void)state;
    Learner *one = open_learner(NULL, 0, 0, 1, NULL);
    Dapo__TrainBatch *tb = make_batch(77, 12, 1, 0, 1, 0, 1);
    float *old = shifted_old(one, tb);
    LearnerMiniStats st;
    char err[ERR_LEN];
    assert_int_equal(learner_grads(one, tb, old, NULL, NULL, &st, err), 0);
    long P = model_n_params(one->m);
    float *g1 = malloc((size_t)P * sizeof(float)), *g = malloc((size_t)P * sizeof(float));
    memcpy(g1, tu_grads(one->m), (size_t)P * sizeof(float));
    assert_int_equal(learner_apply(one, &st, err), 0);
    for (int W = 2; W <= 4; W++) {
        RankArg rep[4], sh[4];
        run_ranks(tb, old, rep, W, 0, NULL);
        run_ranks(tb, old, sh, W, 1, NULL);
        long owned = 0;
        memset(g, 0, (size_t)P * sizeof(float));
        for (int r = 0; r < W; r++) {
            owned += sh[r].shard_floats;
            assert_memory_equal(sh[r].params_out, sh[0].params_out, (size_t)P * sizeof(float));
            for (long i = 0; i < P; i++) g[i] += sh[r].grads_out[i];     /* disjoint pieces: exact */
        }
        assert_int_equal(owned, P);
        assert_int_equal(grads_match(one->m, g, g1, "sharded grads vs one rank"), 0);
        assert_int_equal(close_enough(sh[0].params_out, rep[0].params_out, P, 1e-6, 1e-5, "sharded vs replicated"), 0);
        assert_int_equal(close_enough(sh[0].params_out, tu_params(one->m), P, 1e-6, 1e-5, "sharded vs one rank"), 0);
        if (W == 2) {
            RankArg keep[2], uneven[2];
            int cut[3] = {0, 8, 12};
            run_ranks_cut(tb, old, keep, 2, 1, NULL, NULL, 1);
            assert_memory_equal(keep[0].params_out, sh[0].params_out, (size_t)P * sizeof(float));
            run_ranks_cut(tb, old, uneven, 2, 1, NULL, cut, 0);
            assert_memory_equal(uneven[1].params_out, uneven[0].params_out, (size_t)P * sizeof(float));
            assert_int_equal(close_enough(uneven[0].params_out, tu_params(one->m), P, 1e-6, 1e-5, "uneven"), 0);
            free_ranks(keep, 2);
            free_ranks(uneven, 2);
        }
        free_ranks(rep, W);
        free_ranks(sh, W);
    }
    free(g);
    free(g1);
    free(old);
    free_batch(tb);
    learner_close(one);
}

/* The moments of a sharded checkpoint read back as rank r of W (checkpoint_load_optim_shard) equal the flat moments at
 * that rank's pieces. */
static void check_reshard(const char *path, const Model *m, int W, const float *mo, const float *vo) {
    char err[ERR_LEN];
    for (int r = 0; r < W; r++) {
        long k = 0, lo, hi;
        for (int u = 0; u < model_n_units(m); u++) { model_unit_piece(m, u, r, W, &lo, &hi); k += hi - lo; }
        float *a = malloc((size_t)(k + 1) * sizeof(float)), *b = malloc((size_t)(k + 1) * sizeof(float));
        assert_int_equal(checkpoint_load_optim_shard(path, m, r, W, a, b, err), 0);
        k = 0;
        for (int u = 0; u < model_n_units(m); u++) {
            model_unit_piece(m, u, r, W, &lo, &hi);
            assert_memory_equal(a + k, mo + lo, (size_t)(hi - lo) * sizeof(float));
            assert_memory_equal(b + k, vo + lo, (size_t)(hi - lo) * sizeof(float));
            k += hi - lo;
        }
        free(a);
        free(b);
    }
}

/* Issue 39: the sharded checkpoint (each rank its moments' pieces, rank 0 the gathered fp32 weights) loads into one
 * unsharded rank with the sharded run's weights and moments bit for bit (W = 2 -> 1), reads as W = 4's pieces
 * (2 -> 4), and the unsharded rank's checkpoint reads back as W = 2's (1 -> 2); a missing shard is an error. */
static void test_sharded_optimizer(void **state) {
    (void)state;
    Learner *one = open_learner(NULL, 0, 0, 1, NULL);
    Dapo__TrainBatch *tb = make_batch(77, 12, 1, 0, 1, 0, 1);
    float *old = shifted_old(one, tb);
    char dir[128], e[ERR_LEN];
    snprintf(dir, sizeof dir, "/tmp/dapo-test-shard-%d", (int)getpid());
    checkpoint_remove_tree(dir, e);
    RankArg sh[2];
    run_two_ranks_with(tb, old, sh, 1, dir);
    long P = sh[0].P;
    assert_int_equal(sh[0].shard_floats + sh[1].shard_floats, P);
    float *mo = calloc((size_t)P, sizeof(float)), *vo = calloc((size_t)P, sizeof(float));
    for (long i = 0; i < P; i++) {                       /* the pieces are disjoint: x + 0 is exact */
        mo[i] = sh[0].m_out[i] + sh[1].m_out[i];
        vo[i] = sh[0].v_out[i] + sh[1].v_out[i];
    }
    const char *res[][2] = {{"trainer.resume_mode", "resume_path"}, {"trainer.resume_from_path", dir}};
    char path[256];
    snprintf(path, sizeof path, "%s/global_step_0", dir);
    res[1][1] = path;
    Learner *back = open_learner(res, 2, 0, 1, NULL);           /* W = 1 from the W = 2 shards */
    assert_memory_equal(tu_params(back->m), sh[0].params_out, (size_t)P * sizeof(float));
    assert_memory_equal(tu_adam_m(back->m), mo, (size_t)P * sizeof(float));
    assert_memory_equal(tu_adam_v(back->m), vo, (size_t)P * sizeof(float));
    assert_int_equal(model_adam_step(back->m), 1);
    check_reshard(path, back->m, 4, mo, vo);                     /* W = 2 -> 4 */
    char dir1[160], err[ERR_LEN];                                /* W = 1 -> 2 */
    snprintf(dir1, sizeof dir1, "%s/w1", dir);
    xfree(back->ckpt_root);
    back->ckpt_root = xstrdup(dir1);
    assert_int_equal(learner_checkpoint(back, err), 0);
    char p1[256];
    snprintf(p1, sizeof p1, "%s/global_step_0", dir1);
    check_reshard(p1, back->m, 2, mo, vo);
    char shard1[300], shard0[300], tmp[320];                     /* shards swapped: refused, naming the file */
    snprintf(shard1, sizeof shard1, "%s/optim_shards/rank_1_of_2.safetensors", path);
    snprintf(shard0, sizeof shard0, "%s/optim_shards/rank_0_of_2.safetensors", path);
    snprintf(tmp, sizeof tmp, "%s.tmp", shard0);
    assert_int_equal(rename(shard0, tmp) || rename(shard1, shard0) || rename(tmp, shard1), 0);
    assert_int_equal(checkpoint_load_optim_range(path, back->m, 0, P, mo, vo, err), ERR_INVAL);
    assert_non_null(strstr(err, "written by rank 1 of 2, expected rank 0 of 2"));
    assert_int_equal(rename(shard0, tmp) || rename(shard1, shard0) || rename(tmp, shard1), 0);
    assert_int_equal(checkpoint_load_optim_range(path, back->m, 0, P, mo, vo, err), 0);   /* a shard gone */
    assert_int_equal(unlink(shard1), 0);
    assert_int_not_equal(checkpoint_load_optim_range(path, back->m, 0, P, mo, vo, err), 0);
    free(mo);
    free(vo);
    learner_close(back);
    free_ranks(sh, 2);
    free(old);
    free_batch(tb);
    learner_close(one);
    checkpoint_remove_tree(dir, e);
}

/* ---- issue 39: sharded runs step by step (learner_submit / learner_next: the weights gathered at each step's end) ---- */
#define SR_STEPS 3
static Dapo__TrainBatch *g_sr[SR_STEPS + 1][2][2];   /* [step][epoch][mini-batch]: 12 sequences each (main thread) */

typedef struct {
    int rank, world, sharded, from, to, ckpt_at, resume, rc;
    int kl;                       /* actor.use_kl_loss (coefficient 0.5): kl_sum adds every update's actor/kl_loss */
    double kl_sum;
    char endpoint[64], err[ERR_LEN];
    const char *ckdir;
    float *params_out;
    pthread_barrier_t *done;
} StepArg;

static void *step_rank(void *p) {
    StepArg *a = p;
    CollOptions o = {.rank = a->rank, .world = a->world, .endpoint = a->endpoint, .timeout_s = 20};
    Collective *c = NULL;
    if (a->world > 1 && coll_open_cpu(&o, &c, a->err)) { a->rc = -1; pthread_barrier_wait(a->done); return NULL; }
    char nl[16];
    snprintf(nl, sizeof nl, "%d", a->world);
    const char *kv[][2] = {{"actor_rollout_ref.actor.ppo_epochs", "2"},
                           {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "2"},
                           {"cluster.num_learners", nl},
                           {"actor_rollout_ref.actor.fsdp_config.fsdp_size", a->sharded ? "-1" : "1"},
                           {"trainer.default_local_dir", a->ckdir},
                           {"trainer.resume_mode", a->resume ? "auto" : "disable"},
                           {"actor_rollout_ref.actor.use_kl_loss", a->kl ? "true" : "false"},
                           {"actor_rollout_ref.actor.kl_loss_coef", "0.5"}};
    Config cfg;
    base_config(&cfg, kv, 8);
    Learner *L = learner_open(&cfg, a->rank, a->world, c, a->err);
    config_free(&cfg);
    if (!L) { a->rc = -2; pthread_barrier_wait(a->done); coll_close(c); return NULL; }
    int per = 12 / a->world;
    for (int step = a->from; step <= a->to && !a->rc; step++) {
        for (int ep = 0; ep < 2; ep++)
            for (int k = 0; k < 2; k++)
                learner_submit(L, to_owned(sub_batch(g_sr[step][ep][k], a->rank * per, (a->rank + 1) * per, a->rank,
                                                     a->world)));
        LearnerResult r;
        while (!a->rc && learner_next(L, &r)) {
            if (r.failed) { a->rc = -3; snprintf(a->err, sizeof a->err, "%s", r.error); }
            a->kl_sum += metrics_get(&r.metrics, "actor/kl_loss", 0);
            learner_result_free(&r);
        }
        if (!a->rc && L->steps_done != step) { a->rc = -4; snprintf(a->err, sizeof a->err, "step %d not done", step); }
        if (!a->rc && step == a->ckpt_at) a->rc = learner_checkpoint(L, a->err);
    }
    long P = model_n_params(L->m);
    a->params_out = malloc((size_t)P * sizeof(float));
    if (!a->rc) {
        if (L->sharded) a->rc = shard_gather_full(&L->shard, a->params_out, a->err);
        else memcpy(a->params_out, tu_params(L->m), (size_t)P * sizeof(float));
    }
    pthread_barrier_wait(a->done);
    learner_close(L);
    coll_close(c);
    return NULL;
}

/* W ranks run steps [from, to] (checkpointing after ckpt_at, resuming from ckdir when resume); out: rank 0's final
 * weights, every rank's checked equal. */
static double step_ranks_kl(int W, int sharded, int from, int to, int ckpt_at, int resume, const char *ckdir, float *out,
                            long P, int kl) {
    StepArg a[4];
    pthread_t th[4];
    pthread_barrier_t done;
    pthread_barrier_init(&done, NULL, (unsigned)W);
    int port = tu_free_port();
    for (int r = 0; r < W; r++) {
        a[r] = (StepArg){.rank = r, .world = W, .sharded = sharded, .from = from, .to = to, .ckpt_at = ckpt_at,
                         .resume = resume, .ckdir = ckdir, .done = &done, .kl = kl};
        snprintf(a[r].endpoint, sizeof a[r].endpoint, "tcp://127.0.0.1:%d", port);
        pthread_create(&th[r], NULL, step_rank, &a[r]);
    }
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&done);
    for (int r = 0; r < W; r++) {
        if (a[r].rc) fprintf(stderr, "rank %d of %d: %s\n", r, W, a[r].err);
        assert_int_equal(a[r].rc, 0);
        assert_memory_equal(a[r].params_out, a[0].params_out, (size_t)P * sizeof(float));
    }
    memcpy(out, a[0].params_out, (size_t)P * sizeof(float));
    for (int r = 0; r < W; r++) free(a[r].params_out);
    for (int r = 1; r < W; r++) assert_true(a[r].kl_sum == a[0].kl_sum);   /* all-reduced: the same on every rank */
    return a[0].kl_sum;
}

static void step_ranks(int W, int sharded, int from, int to, int ckpt_at, int resume, const char *ckdir, float *out,
                       long P) {
    step_ranks_kl(W, sharded, from, to, ckpt_at, resume, ckdir, out, P, 0);
}

/* Issue 39: a sharded run (W = 2, 3 steps of 2 epochs x 2 mini-batches) is bitwise the same run after run, and after a
 * checkpoint at step 2 and a resume at the same W; resumed at W = 4 (sharded) or W = 1 (unsharded) it matches within
 * the fp32 reassociation bound of test_sharded_ranks. */
static void test_sharded_resume(void **state) {
    (void)state;
    for (int st = 1; st <= SR_STEPS; st++)
        for (int ep = 0; ep < 2; ep++)
            for (int k = 0; k < 2; k++)
                g_sr[st][ep][k] = make_batch(500 + (uint64_t)st * 10 + k, 12, st, (uint32_t)k, 2, (uint32_t)ep,
                                             ep == 1 && k == 1);
    Learner *one = open_learner(NULL, 0, 0, 1, NULL);
    long P = model_n_params(one->m);
    learner_close(one);
    char dir[128], e[ERR_LEN];
    snprintf(dir, sizeof dir, "/tmp/dapo-test-sresume-%d", (int)getpid());
    checkpoint_remove_tree(dir, e);
    float *a = malloc((size_t)P * sizeof(float)), *b = malloc((size_t)P * sizeof(float));
    step_ranks(2, 1, 1, SR_STEPS, -1, 0, dir, a, P);
    step_ranks(2, 1, 1, SR_STEPS, -1, 0, dir, b, P);
    assert_memory_equal(a, b, (size_t)P * sizeof(float));             /* run to run */
    step_ranks(2, 1, 1, 2, 2, 0, dir, b, P);
    step_ranks(2, 1, 3, SR_STEPS, -1, 1, dir, b, P);
    assert_memory_equal(a, b, (size_t)P * sizeof(float));             /* stop and resume at W = 2 */
    step_ranks(4, 1, 3, SR_STEPS, -1, 1, dir, b, P);
    assert_int_equal(close_enough(b, a, P, 1e-6, 1e-5, "resumed at W = 4"), 0);
    step_ranks(1, 0, 3, SR_STEPS, -1, 1, dir, b, P);
    assert_int_equal(close_enough(b, a, P, 1e-6, 1e-5, "resumed at W = 1"), 0);
    /* issue 40: the KL loss against the reference policy (model.path's weights; each rank holds its pieces of them):
     * sharded W = 2 equals one rank within the same bound, the KL term changes the run, and a resume at step 3 keeps
     * the reference at model.path (not the checkpoint's weights): bitwise the uninterrupted run */
    float *k1 = malloc((size_t)P * sizeof(float)), *k2 = malloc((size_t)P * sizeof(float));
    double kl1 = step_ranks_kl(1, 0, 1, SR_STEPS, -1, 0, dir, k1, P, 1);
    double kl2 = step_ranks_kl(2, 1, 1, SR_STEPS, 2, 0, dir, k2, P, 1);
    fprintf(stderr, "KL loss summed over 12 updates: W = 1 %.9g, W = 2 sharded %.9g\n", kl1, kl2);
    assert_true(kl1 > 0 && fabs(kl2 - kl1) <= 1e-5 * kl1);
    assert_int_equal(close_enough(k2, k1, P, 1e-6, 1e-5, "KL loss, sharded W = 2 vs W = 1"), 0);
    assert_true(memcmp(k2, a, (size_t)P * sizeof(float)) != 0);
    step_ranks_kl(2, 1, 3, SR_STEPS, -1, 1, dir, b, P, 1);
    assert_memory_equal(b, k2, (size_t)P * sizeof(float));
    free(k1);
    free(k2);
    free(a);
    free(b);
    for (int st = 1; st <= SR_STEPS; st++)
        for (int ep = 0; ep < 2; ep++)
            for (int k = 0; k < 2; k++) free_batch(g_sr[st][ep][k]);
    checkpoint_remove_tree(dir, e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sharded_ranks),
        cmocka_unit_test(test_sharded_optimizer),
        cmocka_unit_test(test_sharded_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
