/* tests/unit/test_learner_klreward.c: algorithm.use_kl_in_reward and the advantages the learner computes itself
 * (services/learner/klreward.h; issue 40) against verl 0.9.1's apply_kl_penalty + estimator
 * (tests/reference/make_dapo_fixtures.py kl_reward.bin): every estimator, reinforce_plus_plus also at gamma 0.9, fixed
 * and adaptive controllers; and two ranks over the CPU collective equal one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/learner_fixture.h"
#include "tests/unit/dapo_fixture.h"

#define CLOSE(a, b, atol, rtol) (fabs((double)(a) - (double)(b)) <= (atol) + (rtol) * fabs((double)(b)))

typedef struct {
    int B, T, est, adaptive, kl;
    const int32_t *sizes, *len, *mask;
    const float *score, *old, *ref, *adv;
    const double *par, *out;
} Case;

static void get_case(const Fixture *fx, int c, Case *k) {
    char name[64];
#define GET(key, dt) (snprintf(name, sizeof name, "r%d/%s", c, key), fx_get(fx, name, dt))
    const FxTensor *e = GET("est", FX_I32), *sz = GET("sizes", FX_I32);
    assert_non_null(e);
    assert_non_null(sz);
    k->est = ((int32_t *)e->data)[0];
    k->adaptive = ((int32_t *)e->data)[1];
    k->kl = ((int32_t *)e->data)[2];
    k->sizes = sz->data;
    k->B = 0;
    for (uint32_t i = 0; i < sz->n; i++) k->B += k->sizes[i];
    k->len = GET("lengths", FX_I32)->data;
    const FxTensor *m = GET("mask", FX_I32);
    k->mask = m->data;
    k->T = (int)m->n / k->B;
    k->score = GET("score", FX_F32)->data;
    k->old = GET("old", FX_F32)->data;
    k->ref = GET("ref", FX_F32)->data;
    k->adv = GET("adv", FX_F32)->data;
    k->par = GET("params", FX_F64)->data;
    k->out = GET("out", FX_F64)->data;
#undef GET
}

/* Sequences [a, b) of the case as one TrainBatch shard (prompt: 2 tokens; response: its length's tokens), for rank r of
 * W; its old and reference log-probs into *old / *ref (malloc'd). */
static Dapo__TrainBatch *case_batch(const Case *k, int a, int b, int r, int W, float **old, float **ref) {
    int n = b - a, R = 0, g = 0, gi = 0;
    for (int i = a; i < b; i++) R += k->len[i];
    Dapo__TrainBatch *tb = calloc(1, sizeof *tb);
    dapo__train_batch__init(tb);
    tb->run_id = strdup("test");
    tb->step = 1;
    tb->num_mini_batches = 1;
    tb->last_of_step = 1;
    tb->rank = (uint32_t)r;
    tb->world_size = (uint32_t)W;
    tb->n_offsets = (size_t)n + 1;
    tb->offsets = calloc((size_t)n + 1, sizeof(uint32_t));
    tb->n_prompt_lengths = tb->n_group_ids = tb->n_scores = (size_t)n;
    tb->prompt_lengths = calloc((size_t)n, sizeof(uint32_t));
    tb->group_ids = calloc((size_t)n, sizeof(uint64_t));
    tb->scores = calloc((size_t)n, sizeof(float));
    tb->n_input_ids = (size_t)(2 * n + R);
    tb->input_ids = calloc(tb->n_input_ids, sizeof(int32_t));
    tb->n_response_mask = tb->n_advantages = tb->n_rollout_logprobs = (size_t)R;
    tb->response_mask = calloc((size_t)R, sizeof(float));
    tb->advantages = calloc((size_t)R, sizeof(float));
    tb->rollout_logprobs = calloc((size_t)R, sizeof(float));
    *old = xmalloc((size_t)(R > 0 ? R : 1) * sizeof(float));   /* the learner frees them (xfree) */
    *ref = xmalloc((size_t)(R > 0 ? R : 1) * sizeof(float));
    int t = 0, rt = 0;
    for (int i = 0; i < b; i++) {                    /* group of sequence i: walk the sizes */
        if (i == g + k->sizes[gi]) { g = i; gi++; }
        if (i < a) continue;
        int s = i - a;
        tb->offsets[s] = (uint32_t)t;
        tb->prompt_lengths[s] = 2;
        tb->group_ids[s] = 1000 + (uint64_t)gi * 0x100000001ull;   /* ids past 2^32: the record's three pieces */
        tb->scores[s] = k->score[i];
        for (int j = 0; j < 2 + k->len[i]; j++) tb->input_ids[t++] = 3 + (i * 7 + j) % 50;
        for (int j = 0; j < k->len[i]; j++, rt++) {
            tb->response_mask[rt] = (float)k->mask[i * k->T + j];
            (*old)[rt] = k->old[i * k->T + j];
            (*ref)[rt] = k->ref[i * k->T + j];
        }
    }
    tb->offsets[n] = (uint32_t)t;
    tb->global_num_seqs = (uint32_t)k->B;
    return tb;
}

static void case_config(const Case *k, const char *kv[][2], char gamma[32]) {
    snprintf(gamma, 32, "%.17g", k->par[0]);
    const char *v[][2] = {{"algorithm.use_kl_in_reward", "true"},
                          {"algorithm.kl_penalty", FX_KL_NAMES[k->kl]},
                          {"algorithm.kl_ctrl.type", k->adaptive ? "adaptive" : "fixed"},
                          {"algorithm.kl_ctrl.kl_coef", "0.05"},
                          {"algorithm.kl_ctrl.target_kl", "0.02"},
                          {"algorithm.kl_ctrl.horizon", "100"},
                          {"algorithm.adv_estimator", adv_estimator_name((AdvEstimator)k->est)},
                          {"algorithm.gamma", gamma}};
    memcpy(kv, v, sizeof v);
}

/* Runs klreward_step on L over tb with the given log-probs (as the old-log-prob pass leaves them). */
static int run_step(Learner *L, Dapo__TrainBatch *tb, float *old, float *ref, char err[ERR_LEN]) {
    L->n_mini = 1;
    L->old_lp = xcalloc(1, sizeof *L->old_lp);       /* the learner's own arrays: step_reset frees them */
    L->ref_lp = xcalloc(1, sizeof *L->ref_lp);
    L->old_n = xcalloc(1, sizeof *L->old_n);
    L->old_lp[0] = old;
    L->ref_lp[0] = ref;
    L->old_n[0] = (long)tb->n_response_mask;
    return klreward_step(L, &tb, 1, err);
}

static void test_kl_in_reward_against_verl(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/kl_reward.bin", &fx), 0);
    int n = ((int32_t *)fx_get(&fx, "n_cases", FX_I32)->data)[0], checked = 0;
    assert_true(n >= 16);
    for (int c = 0; c < n; c++) {
        Case k;
        get_case(&fx, c, &k);
        const char *kv[8][2];
        char gamma[32], err[ERR_LEN];
        case_config(&k, kv, gamma);
        Learner *L = open_learner(kv, 8, 0, 1, NULL);
        assert_true(L->klr.on && L->klr.use_kl && L->ref_params);
        float *old, *ref;
        Dapo__TrainBatch *tb = case_batch(&k, 0, k.B, 0, 1, &old, &ref);
        int rc = run_step(L, tb, old, ref, err);
        if (rc) fail_msg("case %d (%s): %s", c, adv_estimator_name((AdvEstimator)k.est), err);
        for (int i = 0, rt = 0; i < k.B; i++)
            for (int j = 0; j < k.len[i]; j++, rt++) {
                float want = k.adv[i * k.T + j], got = L->klr.adv[0][rt];
                if (!CLOSE(got, want, 2e-6, 2e-5))
                    fail_msg("case %d (%s, gamma %g, %s): response %d token %d: advantage %.9g, verl %.9g", c,
                             adv_estimator_name((AdvEstimator)k.est), k.par[0], FX_KL_NAMES[k.kl], i, j, got, want);
                checked++;
            }
        assert_true(CLOSE(L->klr.current_kl, k.out[0], 1e-7, 1e-5));
        assert_true(L->klr.beta == 0.05 && k.out[1] == 0.05);
        if (!CLOSE(L->klr.value, k.out[2], 1e-12, 1e-7))   /* current_kl to fp32 rounding, times 0.05 n / horizon */
            fail_msg("case %d: controller %.17g, verl %.17g (current_kl %.9g vs %.9g)", c, L->klr.value, k.out[2],
                     L->klr.current_kl, k.out[0]);                /* the controller after its update */
        assert_true(!k.adaptive || L->klr.value != 0.05);
        assert_true(CLOSE(L->klr.rewards_mean, k.out[3], 1e-6, 1e-5));
        free(tb->scores);
        free_batch(tb);
        learner_close(L);                            /* frees the step's arrays (old and reference log-probs too) */
    }
    fprintf(stderr, "kl_reward.bin: %d cases, %d tokens equal to verl's\n", n, checked);
    fx_free(&fx);
}

/* ---- two ranks over the CPU collective: each holds half of every group (the coordinator's shards split groups) ---- */
typedef struct {
    const Case *k;
    int rank, rc;
    char endpoint[64], err[ERR_LEN];
    float *adv;                  /* this rank's advantages */
    long n_adv;
    double current_kl, value, adv_mean, adv_max, adv_min;
    pthread_barrier_t *done;
} KArg;

static void *k_rank(void *p) {
    KArg *a = p;
    CollOptions o = {.rank = a->rank, .world = 2, .endpoint = a->endpoint, .timeout_s = 20};
    Collective *c = NULL;
    if (coll_open_cpu(&o, &c, a->err)) { a->rc = -1; pthread_barrier_wait(a->done); return NULL; }
    const char *kv[9][2];
    char gamma[32];
    case_config(a->k, kv, gamma);
    kv[8][0] = "cluster.num_learners";
    kv[8][1] = "2";
    Config cfg;
    base_config(&cfg, kv, 9);
    Learner *L = learner_open(&cfg, a->rank, 2, c, a->err);
    config_free(&cfg);
    if (!L) { a->rc = -2; pthread_barrier_wait(a->done); coll_close(c); return NULL; }
    float *old, *ref;
    int h = a->k->B / 2;          /* rank 0: sequences [0, h), rank 1: [h, B) — group 1 is cut in two */
    Dapo__TrainBatch *tb = case_batch(a->k, a->rank ? h : 0, a->rank ? a->k->B : h, a->rank, 2, &old, &ref);
    a->rc = run_step(L, tb, old, ref, a->err);
    if (!a->rc) {
        a->n_adv = (long)tb->n_response_mask;
        a->adv = malloc((size_t)a->n_adv * sizeof(float));
        memcpy(a->adv, L->klr.adv[0], (size_t)a->n_adv * sizeof(float));
        a->current_kl = L->klr.current_kl;
        a->value = L->klr.value;
        a->adv_mean = L->klr.adv_mean;
        a->adv_max = L->klr.adv_max;
        a->adv_min = L->klr.adv_min;
    }
    pthread_barrier_wait(a->done);
    free(tb->scores);
    free_batch(tb);
    learner_close(L);
    coll_close(c);
    return NULL;
}

static void test_kl_in_reward_two_ranks(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/dapo/kl_reward.bin", &fx), 0);
    int n = ((int32_t *)fx_get(&fx, "n_cases", FX_I32)->data)[0];
    for (int c = 1; c < n; c += 2) {                 /* the adaptive cases: every estimator */
        Case k;
        get_case(&fx, c, &k);
        KArg a[2];
        pthread_t th[2];
        pthread_barrier_t done;
        pthread_barrier_init(&done, NULL, 2);
        int port = tu_free_port();
        for (int r = 0; r < 2; r++) {
            memset(&a[r], 0, sizeof a[r]);
            a[r].k = &k;
            a[r].rank = r;
            a[r].done = &done;
            snprintf(a[r].endpoint, sizeof a[r].endpoint, "tcp://127.0.0.1:%d", port);
            pthread_create(&th[r], NULL, k_rank, &a[r]);
        }
        for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
        pthread_barrier_destroy(&done);
        for (int r = 0; r < 2; r++)
            if (a[r].rc) fail_msg("case %d rank %d: %s", c, r, a[r].err);
        int h = k.B / 2;
        for (int r = 0, i0 = 0; r < 2; r++, i0 = h) {
            long rt = 0;
            for (int i = i0; i < (r ? k.B : h); i++)
                for (int j = 0; j < k.len[i]; j++, rt++)
                    if (!CLOSE(a[r].adv[rt], k.adv[i * k.T + j], 2e-6, 2e-5))
                        fail_msg("case %d (%s) rank %d: response %d token %d: %.9g, verl %.9g", c,
                                 adv_estimator_name((AdvEstimator)k.est), r, i, j, a[r].adv[rt], k.adv[i * k.T + j]);
        }
        assert_true(a[0].current_kl == a[1].current_kl && a[0].value == a[1].value);   /* every rank the same */
        assert_true(a[0].adv_mean == a[1].adv_mean && a[0].adv_max == a[1].adv_max && a[0].adv_min == a[1].adv_min);
        assert_true(CLOSE(a[0].value, k.out[2], 1e-12, 1e-7));
        for (int r = 0; r < 2; r++) free(a[r].adv);
    }
    fx_free(&fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kl_in_reward_against_verl),
        cmocka_unit_test(test_kl_in_reward_two_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
